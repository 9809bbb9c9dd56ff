"""llama.cpp on a unified-memory GPU (kvplan/engines/llamacpp/uma.py): its cache is -c cells whatever is free, so the
OS's stated share decides only whether the plan fits. Source: ggml-org/ggml@d99724f2 src/ggml-cuda/ggml-cuda.cu
L4769-4808 (MemAvailable as a unified device's free memory, llama.cpp PR #17368, 2025-11-20)."""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.report.text import format_warning
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30


def _result(gpu: str, *opts, overhead=None):
    req = Request(context=32768, overhead_bytes=overhead)
    return resolve_engine("llama.cpp", None, opts).result(find_in_catalog("llama-3.1-8b"), find_gpu(gpu),
                                                          Deployment(1), req)


def _plan(gpu: str, *opts):
    return _result(gpu, *opts).plan


def test_the_cache_stays_exact_and_the_os_share_is_kept_out():
    base, held = _plan("gb10"), _plan("gb10", "os_memory=100GiB")
    # the cache is -c x bytes per cell either way: 32,768 cells x 131,072 B (32 layers x 8 heads x 128 x 2 B x 2)
    assert base.kv_bytes_per_sequence == held.kv_bytes_per_sequence == 32_768 * 131_072
    # what the weights, cache and buffers may take shrinks by exactly the stated share: 100 GiB = 107,374,182,400 B
    assert base.kv_memory_bytes_per_gpu - held.kv_memory_bytes_per_gpu == 100 * GIB
    assert base.fits and held.fits  # 121.69 - 100 - 13.98 - 0.40 = 7.31 GiB left, above the 4 GiB sequence
    assert not _plan("gb10", "os_memory=105GiB").fits  # 2.31 GiB left: the 4 GiB sequence does not fit
    said = " ".join(format_warning(w) for w in held.warnings)
    assert "stated os_memory 100.00 GiB, kept out of the 121.69 GiB" in said
    assert "kvplan assumed they hold none" in " ".join(format_warning(w) for w in base.warnings)


def test_a_given_overhead_keeps_the_os_share_out_too():
    # --overhead replaces the compute-buffer estimate, not the stated OS share the warning says is kept out:
    # 1 GiB given with os_memory=100GiB leaves exactly 100 GiB less than 1 GiB alone, and fit --json's
    # compute_buffer_estimate is the 1 GiB given (it went negative when the share was dropped: 1 - 100 GiB)
    alone, held = _result("gb10", overhead=GIB), _result("gb10", "os_memory=100GiB", overhead=GIB)
    assert alone.plan.kv_memory_bytes_per_gpu - held.plan.kv_memory_bytes_per_gpu == 100 * GIB
    assert held.settings["compute_buffer_estimate"] == alone.settings["compute_buffer_estimate"] == GIB


def test_a_discrete_gpu_ignores_it():
    plan = _plan("h100-sxm", "os_memory=20GiB")
    assert plan.kv_memory_bytes_per_gpu == _plan("h100-sxm").kv_memory_bytes_per_gpu
    assert "os_memory ignored" in " ".join(format_warning(w) for w in plan.warnings)
