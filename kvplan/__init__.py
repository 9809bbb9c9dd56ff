"""kvplan: KV-cache capacity planning for LLM serving.

The Python API, loaded on first use so that `import kvplan` (and the CLI, kvplan.cli) stays cheap:
`plan`, `sweep`, `cheapest`, `simulate`, `disagg`, `load_model`, `gpu` (kvplan.api), the results they return
(`Plan`, `SweepResult`, `Candidate`, `Simulation`), and `KvplanError`, the one error they raise.
"""

import importlib

__version__ = "0.1.0"

# name -> the module that defines it, imported when the name is first read (PEP 562)
_LAZY = {
    **dict.fromkeys(("plan", "sweep", "cheapest", "simulate", "disagg", "load_model", "gpu", "Simulation"),
                    "kvplan.api"),
    "KvplanError": "kvplan.core.errors",
    "Plan": "kvplan.planning.plan",
    "Request": "kvplan.planning.plan",
    "SweepResult": "kvplan.compare.sweep",
    "Candidate": "kvplan.compare.cheapest",
    "ModelSpec": "kvplan.model.spec",
    "GPU": "kvplan.hardware.gpus",
    "Deployment": "kvplan.planning.deploy",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
