"""TensorRT-LLM on a unified-memory GPU (kvplan/engines/trtllm/uma.py): its budget counts the device's own free
memory, so a cold load's page cache and the OS's share are used memory, and where they leave nothing the pool is
what the kernel keeps free, which kvplan does not guess.

Training record: jeansblog/trt_llm@661401c2 README.md (2025-12-20; tests/fixtures/logs/corpus/
trtllm-jeansblog-gpt-oss-120b-gb10-v110rc3.log), TensorRT-LLM 1.1.0rc3, gpt-oss-120b on a GB10: 63.52 GiB inside torch
and 49.78 GiB outside it after loading, of a 119.70 GiB device total, so 119.70 - 63.52 - 49.78 = 6.40 GiB free; the
pool (119.70 - 113.65 peak + 0.56 temporary pool) x 0.9 = 5.95 GiB."""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.report.text import format_warning

from kvplan.sources.catalog import find_in_catalog

GIB = 2**30


def _plan(model: str, gpu: str, *opts):
    return resolve_engine("trtllm", "1.2.0", opts).result(find_in_catalog(model), find_gpu(gpu), Deployment(1),
                                                          Request(context=32768)).plan


def _said(plan) -> str:
    return " ".join(format_warning(w) for w in plan.warnings)


def test_a_cold_load_counts_the_checkpoint_as_used():
    # Llama-3.1-8B on GB10: the budget's used memory grows by the checkpoint's 16,060,522,496 B of safetensors,
    # so the pool (x 0.9) by 0.9 x that: int(0.9 x (room)) - int(0.9 x (room - 16,060,522,496)) = 14,454,470,246 (+-1)
    warm, cold = _plan("llama-3.1-8b", "gb10", "page_cache=0"), _plan("llama-3.1-8b", "gb10")
    assert cold.overhead_bytes_per_gpu - warm.overhead_bytes_per_gpu == 16_060_522_496
    assert abs((warm.kv_memory_bytes_per_gpu - cold.kv_memory_bytes_per_gpu) - 14_454_470_246) <= 1
    assert "page cache 14.96 GiB (a cold start" in _said(cold)
    held = _plan("llama-3.1-8b", "gb10", "page_cache=0", "os_memory=10GiB")
    assert held.overhead_bytes_per_gpu - warm.overhead_bytes_per_gpu == 10 * GIB


def test_the_gb10_record_is_not_promised_a_pool_the_kernel_decides():
    # gpt-oss-120b: 60.77 GiB of weights and the same checkpoint in the page cache do not fit in 121.69 GiB beside
    # each other, so the kernel evicted cache (the record kept 6.40 GiB free, a 5.95 GiB pool); kvplan before this
    # rule promised (121.69 - 60.77 - overhead) x 0.9, about 54 GiB, 9x the record's; now it says the pool is unknown
    plan = _plan("gpt-oss-120b", "gb10")
    assert plan.kv_memory_bytes_per_gpu <= 0 and not plan.fits
    assert "which kvplan cannot know" in _said(plan)
    assert _plan("gpt-oss-120b", "gb10", "page_cache=0").kv_memory_bytes_per_gpu > 50 * GIB


def test_discrete_gpus_and_other_vendors_ignore_it():
    h100 = _plan("llama-3.1-8b", "h100-sxm", "page_cache=1GiB")
    assert h100.kv_memory_bytes_per_gpu == _plan("llama-3.1-8b", "h100-sxm").kv_memory_bytes_per_gpu
    assert "page_cache ignored" in _said(h100)
    mi300a = _plan("llama-3.1-8b", "mi300a", "os_memory=1GiB")
    assert "not an NVIDIA part" in _said(mi300a)
