"""`kvplan disagg --manifest-for llm-d`: the llm-d values fragment with each pool's replicas, GPUs per
pod and serve arguments.

The fragment follows llm-d's P/D guide, the `llm-d-modelservice` chart values it installs
(llm-d/llm-d@28719cebf04c521f1422b58b4b8f5431abbc6f68:guides/pd-disaggregation/ms-pd/values.yaml):
top-level `prefill:` and `decode:` each with `replicas`, `parallelism.tensor` / `.data`, one `vllm`
container with `modelCommand: vllmServe` (the chart writes `vllm serve` and the model from
`modelArtifacts`; `args` carries the rest, tensor parallelism first, `--kv-transfer-config` with
NixlConnector) and `resources.limits/requests` `nvidia.com/gpu`; `routing.proxy.connector: nixlv2`
is the routing sidecar that sends a request to prefill, then decode. Engines other than vLLM get
`modelCommand: custom` with their whole command (the chart's own way to run another server) and a
comment where the connector goes: kvplan does not write another engine's sidecar connector.
"""

from __future__ import annotations

import json

from kvplan.engines.disagg import chart_container, split_env


def _list(key: str, items: list[str], indent: str) -> list[str]:
    return [f"{indent}{key}:"] + [f"{indent}  - {json.dumps(a)}" for a in items]


def env_rows(env: list[tuple[str, str]], indent: str) -> list[str]:
    """A container's `env` for a serve command's leading NAME=value words (kvplan.engines.disagg.split_env): Kubernetes
    EnvVars, each value a string; no rows where there are none."""
    if not env:
        return []
    return [f"{indent}env:"] + [f"{indent}  - name: {k}\n{indent}    value: {json.dumps(v)}" for k, v in env]


def _pool_rows(pool, n: int, cmd: str | None, engine_name: str) -> list[str]:
    d = pool.plan.deployment
    _, command, args = chart_container(engine_name, cmd)
    gpus = f"nvidia.com/gpu: \"{d.gpus}\""
    rows = [f"{pool.role}:", "  create: true", f"  replicas: {n}", "  parallelism:",
            f"    tensor: {d.tp}", "    data: 1", "  containers:", "  - name: \"vllm\"" if not command
            else "  - name: \"server\"", f"    modelCommand: {'custom' if command else 'vllmServe'}"]
    rows += env_rows(split_env(cmd)[0], "    ")
    if command:
        rows += _list("command", command, "    ")
    if args:
        rows += _list("args", args, "    ")
    rows += ["    resources:", "      limits:", f"        {gpus}", "      requests:", f"        {gpus}"]
    return rows


def llmd_values(res, commands: dict, counts: tuple[int, int], engine_name: str) -> str:
    """The llm-d modelservice values (prefill and decode pools; `counts`: their replica counts)."""
    heads = (chart_container(engine_name, commands.get(r))[0] for r in ("prefill", "decode"))
    model = next((m for m in heads if m), None)
    rows = []
    if model is not None:  # vLLM's NixlConnector: the guide's artifacts and routing sidecar connector
        uri = model if model.startswith(("/", ".")) else f"hf://{model}"
        rows += ["modelArtifacts:", f"  uri: {json.dumps(uri)}", f"  name: {json.dumps(model)}",
                 "routing:", "  proxy:", "    connector: nixlv2"]
    else:
        rows += ["# routing.proxy.connector: the sidecar connector for this engine's KV transfer"]
    for pool, n in zip((res.prefill, res.decode), counts):
        rows += _pool_rows(pool, n, commands.get(pool.role), engine_name)
    return "\n".join(rows) + "\n"
