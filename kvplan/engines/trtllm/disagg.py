"""TensorRT-LLM's disaggregated serving for `kvplan disagg --engine trtllm`: each pool's `trtllm-serve`
command and the three YAML files they read.

As NVIDIA/TensorRT-LLM@c3c3d76e28c57ee23adc3458fc6aca87300c8c21:examples/disaggregated/README.md writes
it: every context (prefill) and generation (decode) server is a plain `trtllm-serve MODEL` with
`--extra_llm_api_options` naming a YAML whose `cache_transceiver_config` (backend `DEFAULT`, i.e. NIXL;
`max_tokens_in_buffer` at least the longest prompt) makes it a disaggregated worker, the context
servers' with `disable_overlap_scheduler: true`; `trtllm-serve disaggregated -c disagg_config.yaml`
then routes between `context_servers` and `generation_servers` (`num_instances`, `urls`). The flags
are trtllm-serve's (tensorrt_llm/commands/serve.py): --backend, --tp_size, --pp_size, --max_batch_size,
--max_num_tokens, --max_seq_len, --kv_cache_free_gpu_memory_fraction, --extra_llm_api_options.
"""

from __future__ import annotations

import shlex

from kvplan.sources.origin import model_arg

FILES = {"prefill": "ctx_extra-llm-api-config.yaml", "decode": "gen_extra-llm-api-config.yaml"}
ROUTER = "disagg_config.yaml"
FIRST_PORT = 8001  # the README's: the router on 8000, servers from 8001


def pool_command(result, model, role: str, batch: int, max_seq_len: int) -> str:
    """One `role` server's trtllm-serve command line (`batch`: its max_batch_size)."""
    plan, st = result.plan, result.settings
    d = plan.deployment
    args = ["trtllm-serve", model_arg(model), "--backend", "pytorch", "--tp_size", str(d.tp),
            "--pp_size", str(d.pp), "--max_batch_size", str(max(1, batch)),
            "--max_num_tokens", str(st["max_num_tokens"]), "--max_seq_len", str(max_seq_len),
            "--kv_cache_free_gpu_memory_fraction", f"{st['free_gpu_memory_fraction']:g}",
            "--extra_llm_api_options", FILES[role]]
    return shlex.join(args)


def config_files(buffer_tokens: int, counts: tuple[int, int], kv_fp8: bool) -> dict[str, str]:
    """The YAML files the commands read: each pool's extra LLM API options and the router's
    disagg_config.yaml (`counts`: prefill and decode replicas; `buffer_tokens`: the longest prompt)."""
    cache = ["cache_transceiver_config:", "  backend: DEFAULT", f"  max_tokens_in_buffer: {buffer_tokens}"]
    if kv_fp8:
        cache += ["kv_cache_config:", "  dtype: fp8"]
    files = {FILES["prefill"]: "\n".join(["disable_overlap_scheduler: true", *cache]) + "\n",
             FILES["decode"]: "\n".join(cache) + "\n"}
    rows = ["hostname: localhost", "port: 8000", "backend: pytorch"]
    port = FIRST_PORT
    for key, n in zip(("context_servers", "generation_servers"), counts):
        rows += [f"{key}:", f"  num_instances: {n}", "  urls:  # each server's host:port"]
        rows += [f"    - \"localhost:{p}\"" for p in range(port, port + n)]
        port += n
    files[ROUTER] = "\n".join(rows) + "\n"
    return files
