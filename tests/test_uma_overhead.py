"""`--overhead` on a unified-memory GPU (GB10), engine by engine: it prices activations and runtime, so what each
engine's budget also loses to the host there (kvplan/engines/*/uma.py) is counted beside it, never dropped with the
estimate it replaces; and each engine's printed assumption says what its fraction is a share of.

Before this change a given --overhead replaced vLLM's host token table, SGLang's f x os_memory and TensorRT-LLM's page
cache and OS share while their warnings still said they were counted (llama.cpp already kept its share beside it).
Llama-3.1-8B on GB10 at 32k, --overhead 2 GiB = 2,147,483,648 B:
  * vLLM 0.30.0: + the runner's token table 1,024 x 32,768 x 4 B = 134,217,728 -> 2,281,701,376 B;
  * SGLang 0.5.23, os_memory 10 GiB, f 0.888: + int(10,737,418,240 x 0.888) = 9,534,827,397 -> 11,682,311,045 B;
  * TensorRT-LLM 1.2.0, os_memory 10 GiB, a cold load: + 10,737,418,240 + the checkpoint's 16,060,522,496 ->
    28,945,424,384 B;
  * llama.cpp, os_memory 10 GiB: + 10,737,418,240 -> 12,884,901,888 B.
"""

from __future__ import annotations

import pytest

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.report.text import format_warning
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30


def _plan(engine: str, version: str | None, opts: tuple, overhead: int | None, gpu: str = "gb10"):
    return resolve_engine(engine, version, opts).result(find_in_catalog("llama-3.1-8b"), find_gpu(gpu), Deployment(1),
                                                        Request(context=32768, overhead_bytes=overhead)).plan


@pytest.mark.parametrize("engine, version, opts, expected", [
    ("vllm", "0.30.0", (), 2_281_701_376),
    ("sglang", "0.5.23", ("os_memory=10GiB",), 11_682_311_045),
    ("trtllm", "1.2.0", ("os_memory=10GiB",), 28_945_424_384),
    ("llamacpp", None, ("os_memory=10GiB",), 12_884_901_888),
])
def test_a_given_overhead_keeps_the_unified_memory_terms(engine, version, opts, expected):
    assert _plan(engine, version, opts, 2 * GIB).overhead_bytes_per_gpu == expected
    # on a discrete GPU the same options add nothing: --overhead is the whole overhead
    assert _plan(engine, version, opts, 2 * GIB, gpu="h100-sxm").overhead_bytes_per_gpu == 2 * GIB


def _said(engine: str | None, version: str | None = None) -> str:
    plan = resolve_engine(engine, version, ()).result(find_in_catalog("llama-3.1-8b"), find_gpu("gb10"),
                                                      Deployment(1), Request(context=32768)).plan
    return " ".join(format_warning(w) for w in plan.warnings)


def test_each_engine_says_what_its_fraction_is_a_share_of():
    # vLLM: of the total, the OS only checked at start-up (vllm/v1/worker/utils.py request_memory); SGLang: of the free
    # memory before the load (0.5.23 distributed/bootstrap.py L207-212); TensorRT-LLM: of total - peak
    # (_util.py _cal_max_memory); llama.cpp: no share, -c cells
    assert "gpu_memory_utilization 0.92 is a share of the GPU's total" in _said("vllm", "0.30.0")
    assert "not subtracted from it but checked at start-up" in _said("vllm", "0.30.0")
    assert "mem_fraction_static 0.888 is a share of the free memory it reads before the weights load" in \
        _said("sglang", "0.5.23")
    assert "free_gpu_memory_fraction 0.9 is a share of what its estimation run leaves free" in _said("trtllm", "1.2.0")
    assert "allocates its -c cells whatever is free" in _said("llamacpp")


def test_the_plan_without_an_engine_claims_no_start_up_check():
    # the engine-neutral budget (usable x 0.9 - weights - overhead) has no start-up check: the note says what it
    # subtracts, not what vLLM refuses
    said = _said(None)
    assert "refuses to start" not in said
    assert "subtracts nothing for what the OS, its page cache and other processes hold" in said


def test_the_total_is_said_to_be_the_profiles():
    # GB10 totals by system software: 119.70 GiB (TensorRT-LLM 1.1.0rc3 log, jeansblog/trt_llm@661401c2), 119.56
    # (vllm#48140), 121.69 (the 2026-08/09 vLLM reports the profile keeps); vLLM and TensorRT-LLM read the device's own
    # (cudaMemGetInfo) when they run, so every engine's plan says the figure is the profile's
    for engine in (None, "vllm", "sglang", "trtllm", "llamacpp"):
        assert "121.69 GiB (the profile's total; the device's own, read at run time" in _said(engine), engine
