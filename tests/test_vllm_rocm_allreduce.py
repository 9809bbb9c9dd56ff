"""vLLM's custom all-reduce on an AMD GPU by release and gfx target (kvplan.speed.amd_allreduce).

Read in the PyPI wheels: 0.6.3 vllm/config.py L914-918 and 0.8.2 L1550-1554 set `disable_custom_all_reduce = True`
on ROCm ("Disabled the custom all-reduce kernel because it is not supported on AMD GPUs"); 0.8.3 L1632-1635 asks
`current_platform.use_custom_allreduce()`, which platforms/rocm.py L307-311 answers True for gfx94* (MI300 series),
and 0.8.5 too (L340-341); 0.9.0 adds gfx95* (L374-375), which every release read since keeps (0.33.0 L1273).
AMD's fork build that dstack's DeepSeek-R1 MI300X run states, "0.7.3.dev138+g21f6ca217" (ROCm/vllm@21f6ca217b8a,
branch deepseek_v3_dev), disables it only on MI250 at tp > 1 and Navi at tp <= 2 (vllm/config.py L1388-1404).
Hand arithmetic (tests/test_speed_custom_allreduce.py's constants): on 8 x MI300X (xGMI, domain 8) the ring's latency
a call is 6.6 + 2 x 7 x 0.6 = 15.0 us, the custom kernel's 6.6 + 2 x 0.6 = 7.8 us; vLLM's limit 8,192 x 1,024 B.
"""

import pytest

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu, load_gpus
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.model import custom_allreduce_bytes
from kvplan.speed.shape import shape_for

LIMIT = 8_388_608


def test_releases_before_0_8_3_run_rccl_alone_on_amd():
    gpus = load_gpus()
    mi300x, h100 = gpus["mi300x"], gpus["h100-sxm"]
    for v in ("0.6.3.dev116+g151ef4ef", "0.7.3", "0.8.2"):
        assert custom_allreduce_bytes("vllm", 8, mi300x, v) == 0
        assert custom_allreduce_bytes("vllm-inprocess", 8, mi300x, v) == 0  # the era's rules are vLLM's
        assert custom_allreduce_bytes("vllm", 8, h100, v) == LIMIT  # CUDA: on at every release
    for v in ("0.8.3", "0.11.0", None):  # None: the current release
        assert custom_allreduce_bytes("vllm", 8, mi300x, v) == LIMIT
    # AMD's fork build: its own ROCm limit, `_MAX_CAR_SIZE = 2 * 8192 * 1024` = 16,777,216 B (ROCm/vllm@21f6ca217
    # vllm/distributed/device_communicators/custom_all_reduce.py L53-56)
    assert custom_allreduce_bytes("vllm", 8, mi300x, "0.7.3.dev138+g21f6ca217") == 2 * LIMIT
    assert custom_allreduce_bytes("sglang", 8, mi300x, "0.4.2") == 2 * LIMIT  # SGLang's rule is its own


def test_the_shape_prices_the_rings_latency_and_the_plan_says_so():
    spec, mi300x = find_in_catalog("llama-3.1-405b"), load_gpus()["mi300x"]
    old = shape_for(spec, mi300x, tp=8, engine="vllm", version="0.6.3")
    new = shape_for(spec, mi300x, tp=8, engine="vllm", version="0.8.3")
    assert old.oneshot_latency_s == 0.0 and old.oneshot_max_bytes == 0
    assert new.oneshot_latency_s == pytest.approx(7.8e-6) and new.oneshot_max_bytes == LIMIT
    assert old.link_latency_s == pytest.approx(15.0e-6)
    for version, gpu, said in (("0.6.3", "mi300x", True), ("0.8.3", "mi300x", False), ("0.6.3", "h100-sxm", False)):
        res = resolve_engine("vllm", version).result(spec, find_gpu(gpu), Deployment(8, 1), Request(context=8192))
        assert any("custom all-reduce is off on ROCm before 0.8.3" in n for n in res.capacity.notes) is said


def test_from_0_8_3_the_kernel_runs_on_the_gfx_targets_its_release_names_alone():
    # `supported_archs = ['gfx94']` (0.8.3, 0.8.5), ['gfx94', 'gfx95'] (0.9.0 on); the profile's compute_capability:
    # MI250X gfx90a, MI100 gfx908, MI300X gfx942, MI355X gfx950
    gpus = load_gpus()
    mi250x, mi355x, mi300x = gpus["mi250x"], gpus["mi355x"], gpus["mi300x"]
    for v in ("0.8.3", "0.9.0", "0.11.0", "0.33.0", None):
        assert custom_allreduce_bytes("vllm", 8, mi250x, v) == 0
        assert custom_allreduce_bytes("vllm", 4, gpus["mi100"], v) == 0
        assert custom_allreduce_bytes("vllm", 8, mi300x, v) == LIMIT
    assert custom_allreduce_bytes("vllm", 8, mi355x, "0.8.5") == 0
    assert custom_allreduce_bytes("vllm", 8, mi355x, "0.9.0") == LIMIT
    assert custom_allreduce_bytes("vllm", 8, mi355x, "0.9.0rc2.dev10") == 0  # a 0.9.0 development build: 0.8.x
    assert custom_allreduce_bytes("sglang", 8, mi250x, "0.4.2") == 2 * LIMIT  # no gfx rule read for SGLang


def test_the_plan_says_the_gfx_target_and_the_shape_takes_the_ring():
    spec, mi250x = find_in_catalog("llama-3.1-70b"), load_gpus()["mi250x"]
    shape = shape_for(spec, mi250x, tp=8, engine="vllm", version="0.11.0")
    assert shape.oneshot_latency_s == 0.0 and shape.oneshot_max_bytes == 0
    res = resolve_engine("vllm", "0.11.0").result(spec, mi250x, Deployment(8, 1), Request(context=8192))
    said = [n for n in res.capacity.notes if "custom all-reduce runs on" in n]
    assert len(said) == 1 and "gfx94x and gfx95x alone" in said[0] and "not on gfx90a" in said[0]
    res = resolve_engine("vllm", "0.11.0").result(spec, load_gpus()["mi300x"], Deployment(8, 1), Request(context=8192))
    assert not any("custom all-reduce" in n for n in res.capacity.notes)
