"""Every bundled model, planned on H200s, becomes simulator inputs and serves a small workload:
no layer kind the adapter does not understand, no request lost."""

import pytest

from kvplan.sources.catalog import load_catalog
from kvplan.simulator.workload import WORKLOADS, generate

REQUESTS = generate(WORKLOADS["chat"], 1.0, 8.0, seed=0)


@pytest.mark.parametrize("spec", sorted(load_catalog(), key=lambda s: s.name), ids=lambda s: s.name)
def test_every_catalog_model_simulates(spec):
    from kvplan.planning.deploy import deployment_for_gpus
    from kvplan.engines import resolve_engine
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.plan import Request
    from kvplan.simulator.adapter import sim_model
    from kvplan.simulator.engine import Engine, EngineConfig

    gpu = find_gpu("h200")
    deps = [d for g in (1, 8, 16, 32, 64) if (d := deployment_for_gpus(spec, g)) is not None]
    plans = (resolve_engine().plan(spec, gpu, d, Request(context=min(spec.max_context, 32768))) for d in deps)
    p = next(p for p in plans if p.kv_memory_bytes_per_gpu > 0)
    m = sim_model(p, spec, gpu)
    assert m.kv_budget_bytes in {st.kv_memory_bytes for st in p.stages}  # the binding stage's pool
    # every attention-backed model pools its KV in groups; an attention-free one (falcon-mamba-7b) holds only state
    assert m.groups if any(la.elements_per_token(1) for la in spec.layers) else (not m.groups and m.state_bytes > 0)
    s = Engine(m, EngineConfig(check=True)).run(REQUESTS).summary(2.0, 0.1)
    assert s["requests"]["completed"] + sum(s["requests"]["rejected"].values()) == len(REQUESTS)
    assert s["requests"]["completed"] > 0
