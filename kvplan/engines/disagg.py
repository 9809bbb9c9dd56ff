"""The serve flags that make an engine's server one pool of a disaggregated deployment (`kvplan disagg`).

vLLM: `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` on the prefill and
the decode servers alike (vLLM docs/features/nixl_connector_usage.md, v0.11.0 onwards: both roles
start with kv_both; the proxy or Dynamo's router sends each request to a prefill server, then to a
decode server that pulls its KV). SGLang: `--disaggregation-mode prefill|decode` with
`--disaggregation-transfer-backend mooncake` (its default; `nixl` the other),
docs/advanced_features/pd_disaggregation.md. Other engines: none (TensorRT-LLM sets its cache
transceiver in a YAML file, not in flags kvplan writes).
"""

from __future__ import annotations

import json
import shlex

from kvplan.engines.emit import emit

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def pool_flags(engine_name: str, role: str) -> list[str] | None:
    """The flags that make `engine_name`'s server the `role` (prefill | decode) pool; None: no such flags."""
    if engine_name == "vllm":
        return ["--kv-transfer-config", NIXL]
    if engine_name == "sglang":
        return ["--disaggregation-mode", role, "--disaggregation-transfer-backend", "mooncake"]
    return None


def pool_command(engine, result, model, role: str) -> str | None:
    """The serve command of one replica of the `role` pool (the plan's own command plus the pool's
    flags), or None where the engine has no server kvplan emits or no disaggregation flags."""
    flags = pool_flags(engine.name, role)
    if flags is None or not engine.emits:
        return None
    return emit(engine, result, model) + " " + shlex.join(flags)
