"""SGLang on a unified-memory GPU (kvplan/engines/sglang/uma.py): which free memory its pool is sized from by release
and profile fields, the OS's share at that measurement, and a cold load's page cache where the device's count is read.

Sources (the released wheels, read 2026-12-06): `get_available_gpu_memory` (`sglang/srt/utils/common.py`): 0.5.3 no
branch; 0.5.4 L461 .. 0.5.8.post1 L513-521 `SHARED_SYSMEM_DEVICE_MEM_SMS = (87, 110, 121)` -> psutil's available;
0.5.9 L528-535 .. 0.5.23 L448-456 `props.is_integrated` -> psutil's available. The pool: `rest = avail_after_load -
B x (1 - mem_fraction_static)` (0.5.9 `model_runner_kv_cache_mixin.py` L116-149). MemFree vs MemAvailable on a GB10:
https://github.com/unslothai/unsloth/pull/10704 (2026-09-10).
"""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.engines import resolve_engine
from kvplan.engines.sglang import uma
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from kvplan.report.text import format_warning

GIB = 2**30


@pytest.fixture(scope="module")
def gb10():
    return find_gpu("gb10")


def _plan(gpu, version, *opts, model="llama-3.1-8b"):
    engine = resolve_engine("sglang", version, opts)
    return engine.result(find_in_catalog(model), gpu, Deployment(1), Request(context=32768)).plan


def _fraction(plan) -> float:
    return round(plan.budget_bytes / plan.usable_memory_bytes, 4)


def test_where_each_release_reads_free_memory(gb10):
    # GB10 is sm_121 and integrated: the device count up to 0.5.3, its capability 0.5.4-0.5.8.post1, the flag from 0.5.9
    assert [uma.reads_meminfo(gb10, r) for r in ("0.5.3", "0.5.4", "0.5.8.post1", "0.5.9", "0.5.23")] == [
        False, True, True, True, True]
    # the same unified part with a capability outside 0.5.4-0.5.8's list: only the flag era reads MemAvailable
    other = dataclasses.replace(gb10, key="other", compute_capability="12.0")
    assert not uma.reads_meminfo(other, "0.5.8") and uma.reads_meminfo(other, "0.5.9")
    # a discrete card never; another vendor's unified part (MI300A): its integrated flag is not read, so never
    assert not any(uma.reads_meminfo(find_gpu(k), "0.5.23") for k in ("mi300a", "h100-sxm", "gh200"))


def test_a_cold_load_costs_the_pool_its_page_cache_where_the_device_count_is_read(gb10):
    # SGLang 0.5.3 on GB10 reads cudaMemGetInfo's free (MemFree, page cache counted as used), f 0.892 (its default):
    # pool = usable x f - weights as loaded - init x f - page cache. The weights as loaded are kvplan's own estimate
    # (tested where it is made), so this test pins what the rule adds: a cold start's pool is the warm one less the
    # page cache, Meta-Llama-3.1-8B's published 16,060,522,496 B of bf16 safetensors
    cold, warm = _plan(gb10, "0.5.3"), _plan(gb10, "0.5.3", "page_cache=0")
    assert _fraction(cold) == 0.892
    assert warm.kv_memory_bytes_per_gpu - cold.kv_memory_bytes_per_gpu == 16_060_522_496
    said = " ".join(format_warning(w) for w in cold.warnings)
    assert "the kernel's MemFree" in said and "page cache" in said and "14.96 GiB, a cold start" in said
    # where MemAvailable is read (0.5.8 by capability) the cache is free: nothing added, and a stated one is ignored
    meminfo = _plan(gb10, "0.5.8", "page_cache=10GiB")
    assert meminfo.overhead_bytes_per_gpu == int(536_870_912 * _fraction(meminfo))
    assert "page_cache ignored" in " ".join(format_warning(w) for w in meminfo.warnings)


def test_the_os_share_costs_the_pool_the_fraction_of_it(gb10):
    # rest = B x f - D with B = total - init - OS share: 20 GiB held at B costs int(21,474,836,480 x 0.892) =
    # 19,155,554,140 B of pool (17.84 GiB) at 0.5.8's default f 0.892 on GB10
    base, held = _plan(gb10, "0.5.8"), _plan(gb10, "0.5.8", "os_memory=20GiB")
    assert _fraction(base) == _fraction(held) == 0.892
    assert base.kv_memory_bytes_per_gpu - held.kv_memory_bytes_per_gpu == 19_155_554_140
    assert "stated os_memory 20.00 GiB, the pool 17.84 GiB smaller" in " ".join(format_warning(w)
                                                                             for w in held.warnings)
    # unstated: the plan says none was assumed and what each GiB costs
    assert "kvplan assumed they hold none" in " ".join(format_warning(w) for w in base.warnings)


def test_discrete_and_other_vendors(gb10):
    h100 = _plan(find_gpu("h100-sxm"), "0.5.23", "os_memory=20GiB")
    assert h100.overhead_bytes_per_gpu == _plan(find_gpu("h100-sxm"), "0.5.23").overhead_bytes_per_gpu
    assert "os_memory ignored" in " ".join(format_warning(w) for w in h100.warnings)
    mi300a = " ".join(format_warning(w) for w in _plan(find_gpu("mi300a"), "0.5.23").warnings)
    assert "not read" in mi300a and "cold start" not in mi300a


def test_emit_advice_follows_the_os_share(gb10):
    # the fraction advice's slope is B = usable - init - OS share: with 20 GiB held the lowest fraction rises
    from kvplan.engines.sglang.boot import lowest_fraction

    def low(*opts):
        engine = resolve_engine("sglang", "0.5.23", opts)
        res = engine.result(find_in_catalog("llama-3.1-8b"), gb10, Deployment(1), Request(context=32768, batch=10))
        return lowest_fraction(res.plan, res.settings, 10, find_in_catalog("llama-3.1-8b"))
    # 10 x 32,768 tokens + 10% = 360,448 x 131,072 B = 44 GiB of pool plus 15.02 GiB of weights: f x (121.69 - 0.5)
    # >= 59.02 -> 0.49 (0.487); with 20 GiB held f x 101.19 >= 59.02 -> 0.59 (0.583)
    assert (low(), low("os_memory=20GiB")) == (0.49, 0.59)


def _slope_of(gpu, *opts, version="0.5.23"):
    from kvplan.engines.sglang.boot import _slope

    res = resolve_engine("sglang", version, opts).result(find_in_catalog("llama-3.1-8b"), gpu, Deployment(1),
                                                           Request(context=32768))
    return _slope(res.plan, res.settings), res.plan.usable_memory_bytes - res.settings["init_bytes"], res.settings


def test_slope_subtracts_the_os_share_on_unified_memory_only(gb10):
    # the rule: a unit of fraction buys B = usable - init - what the OS holds at B; the OS's share is in B's
    # absence only where B is read on a unified GPU (options.os_share); a discrete GPU ignores the option
    slope, base, _ = _slope_of(gb10, "os_memory=20GiB")
    assert slope == base - 20 * GIB
    # the page cache is in the weights' drop D, not in B: it moves the pool, not the slope (0.5.3 reads the
    # device's count, so the cache is in D there)
    slope, base, st = _slope_of(gb10, "page_cache=30GiB", version="0.5.3")
    assert st["uma_bytes"] == 30 * GIB and slope == base
    # one byte stated: f x 1 B rounds to no pool bytes (uma_bytes 0), yet B still lacks that byte (the check
    # this replaces read the OS's share only where uma_bytes was non-zero)
    slope, base, st = _slope_of(gb10, "os_memory=1", "page_cache=0")
    assert st["uma_bytes"] == 0 and slope == base - 1
    h100 = find_gpu("h100-sxm")
    slope, base, st = _slope_of(h100, "os_memory=20GiB")
    assert st["os_held"] == 0 and slope == base
