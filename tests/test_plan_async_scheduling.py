"""A plan's decode step follows vLLM's async scheduling as its release, stages and options set it
(kvplan.speed.overlap.plan_overlaps), as the corpus fit prices a run (run_overlaps): `--engine-opt
async_scheduling=false` puts the host's fixed cost a step (`step`) back on the step in fit, sweep and simulate alike."""

from __future__ import annotations

import pytest

from kvplan import api
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import coefficients
from kvplan.speed.plan import DecodeSteps, plan_decode_seconds, plan_shape
from kvplan.speed.terms import TERMS

LLAMA, H100 = find_in_catalog("llama-3.1-8b"), find_gpu("h100")


def _plan(opts=(), version=None, pp=None):
    return api.plan("llama-3.1-8b", "h100", context="8k", engine="vllm", engine_version=version, engine_opts=opts,
                    pp=pp)


def test_the_stated_option_reaches_the_plans_shape():
    on, off = _plan(), _plan(("async_scheduling=false",))
    assert on.request.host_overlap is None and off.request.host_overlap is False
    assert plan_shape(on, LLAMA, H100, "vllm").host_overlap is True  # the current release: on by default (0.14.0+)
    assert plan_shape(off, LLAMA, H100, "vllm").host_overlap is False
    # off, the step pays vLLM's fitted fixed cost a step once more: the `step` coefficient x 1 step
    step = dict(zip(TERMS, coefficients("vllm")))["step"]
    gap = plan_decode_seconds(off, LLAMA, H100, "vllm") - plan_decode_seconds(on, LLAMA, H100, "vllm")
    assert gap == pytest.approx(step)
    # the sweep's cached decode steps agree with the plan's, either way
    steps = DecodeSteps("vllm")
    for p in (on, off):
        assert steps.seconds(p, LLAMA, H100) == pytest.approx(plan_decode_seconds(p, LLAMA, H100, "vllm"), rel=1e-12)


def test_release_and_stages_set_it_where_no_option_does():
    # 0.13.0: off by default (vllm 0.13.0 sdist vllm/config/scheduler.py L133 `async_scheduling: bool = False`), on
    # where stated; 0.14.0 under pp 2: off (vllm/config/vllm.py L590-596), from 0.15.0 on (kvplan.speed.overlap)
    assert plan_shape(_plan(version="0.13.0"), LLAMA, H100, "vllm", "0.13.0").host_overlap is False
    stated = _plan(("async_scheduling=yes",), version="0.13.0")
    assert plan_shape(stated, LLAMA, H100, "vllm", "0.13.0").host_overlap is True
    assert plan_shape(_plan(version="0.14.0", pp=2), LLAMA, H100, "vllm", "0.14.0").host_overlap is False
    assert plan_shape(_plan(version="0.16.0", pp=2), LLAMA, H100, "vllm", "0.16.0").host_overlap is True
