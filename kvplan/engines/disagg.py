"""The serve flags that make an engine's server one pool of a disaggregated deployment (`kvplan disagg`).

vLLM: `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` on the prefill and
the decode servers alike (vLLM docs/features/nixl_connector_usage.md, v0.11.0 onwards: both roles
start with kv_both; the proxy or Dynamo's router sends each request to a prefill server, then to a
decode server that pulls its KV). SGLang: `--disaggregation-mode prefill|decode` with
`--disaggregation-transfer-backend mooncake` (its default; `nixl` the other),
docs/advanced_features/pd_disaggregation.md. TensorRT-LLM: a trtllm-serve line per pool that reads its
cache transceiver from a YAML file (kvplan.engines.trtllm.disagg). Other engines: none.
"""

from __future__ import annotations

import json
import re
import shlex

from kvplan.engines.emit import emit
from kvplan.engines.trtllm import disagg as trtllm_disagg

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def pool_flags(engine_name: str, role: str) -> list[str] | None:
    """The flags that make `engine_name`'s server the `role` (prefill | decode) pool; None: no such flags."""
    if engine_name == "vllm":
        return ["--kv-transfer-config", NIXL]
    if engine_name == "sglang":
        return ["--disaggregation-mode", role, "--disaggregation-transfer-backend", "mooncake"]
    return None


def pool_command(engine, result, model, role: str, batch: int = 1, max_seq_len: int = 0) -> str | None:
    """The serve command of one replica of the `role` pool (the plan's own command plus the pool's
    flags; TensorRT-LLM: its trtllm-serve line, `batch` and `max_seq_len` the pool's), or None where
    the engine has no server kvplan emits or no disaggregation flags."""
    if engine.name == "trtllm":
        return trtllm_disagg.pool_command(result, model, role, batch, max_seq_len)
    flags = pool_flags(engine.name, role)
    if flags is None or not engine.emits:
        return None
    return emit(engine, result, model) + " " + shlex.join(flags)


def split_env(cmd: str | None) -> tuple[list[tuple[str, str]], list[str]]:
    """(environment, argv) of a serve command: its leading NAME=value words (vLLM's VLLM_USE_V1, the engine option
    use_v1) are a container's `env` in a manifest, not its command's first word."""
    argv = shlex.split(cmd) if cmd else []
    n = next((i for i, a in enumerate(argv) if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", a)), len(argv))
    return [tuple(a.split("=", 1)) for a in argv[:n]], argv[n:]


def chart_container(engine_name: str, cmd: str | None) -> tuple[str | None, list[str], list[str]]:
    """(model, command, args) of one pool's serve command as llm-d's modelservice chart takes it: vLLM's
    `vllm serve MODEL` is its `vllmServe` (model apart, no command; tensor parallelism first and in
    full, as llm-d's guides/pd-disaggregation/ms-pd/values.yaml keeps it); another server keeps its
    program (up to the first `--` flag) as the `custom` command."""
    argv = split_env(cmd)[1]  # the environment goes to the container's env (split_env)
    if engine_name == "vllm" and argv[:2] == ["vllm", "serve"] and len(argv) > 2:
        return argv[2], [], _tp_first(argv[3:])
    flag = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    return None, argv[:flag], argv[flag:]


def _tp_first(args: list[str]) -> list[str]:
    for i, a in enumerate(args[:-1]):
        if a in ("-tp", "--tensor-parallel-size"):
            return ["--tensor-parallel-size", args[i + 1], *args[:i], *args[i + 2:]]
    return args


def pool_files(engine_name: str, buffer_tokens: int, counts: tuple[int, int], kv_fp8: bool) -> dict[str, str]:
    """The files the pools' commands read, by name: TensorRT-LLM's YAML (kvplan.engines.trtllm.disagg);
    none for the engines whose flags say it all."""
    if engine_name != "trtllm":
        return {}
    return trtllm_disagg.config_files(buffer_tokens, counts, kv_fp8)
