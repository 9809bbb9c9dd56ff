"""Every bundled GPU profile, walked through every speed path (issues 21/22): where a figure needs a rate the profile
does not state (a bf16/fp16 matmul rate for the GEMM and attention terms, the fp8 or fp4 rate low-precision weights
run at on a part with that tensor math), the command either prices it or says on stderr how it made the number;
never a silent 0 s or an infinite rate. And where every rate is there, no such line (the test can fail both ways)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.hardware.gpus import load_gpus
from kvplan.speed.coverage import rate_gaps
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import FP4_NAMES, FP8_NAMES, gemm_rate

GPUS = load_gpus()
PROFILES = Path(__file__).resolve().parents[1] / "kvplan" / "hardware" / "profiles"
WEIGHTS = (None, "fp8", "nvfp4")  # 16-bit, fp8 and fp4 weights: the three GEMM precisions gemm_rate chooses among


def _llama_8b():
    from kvplan.sources.catalog import find_in_catalog

    return find_in_catalog("llama-3.1-8b")


def _missing(gpu, weight: str | None) -> str | None:
    """The rate a step with `weight` weights needs and the profile lacks, read off the profile's own fields (not the
    code under test): no 16-bit rate; fp8/fp4 weights on a part whose fp8/fp4 fact is true but no rate for it."""
    flops, measured = dict(gpu.dense_flops), dict(gpu.achieved_dense_flops)
    if not (flops.get("bf16") or flops.get("fp16") or measured.get("bf16") or measured.get("fp16")):
        return "bf16"
    if weight in FP4_NAMES and gpu.fp4:  # fp4 weights on FP4 math need the fp4 rate
        return None if flops.get("fp4") else "fp4"
    if weight in FP4_NAMES + FP8_NAMES and gpu.fp8:  # fp8 weights (fp4 ones without FP4 math) need the fp8 rate
        return None if flops.get("fp8") else "fp8"
    return None  # 16-bit weights, or low-precision ones on a part without that math (weight-only kernels)


@pytest.mark.parametrize("key", sorted(GPUS))
@pytest.mark.parametrize("weight", WEIGHTS)
def test_every_profile_prices_each_gemm_precision_or_says_what_it_lacks(key, weight):
    gpu = GPUS[key]
    s = shape_for(_llama_8b(), gpu, weight_dtype=weight)
    for rate in (s.gemm_rate, s.bf16_rate, s.bandwidth):
        assert math.isfinite(rate) and rate >= 0
    assert s.bandwidth > 0  # every profile states its bandwidth (a required field): decode is never free
    gaps = [line for line in rate_gaps([gpu], weight) if f"GPU {key}'s" in line]
    # no datasheet 16-bit rate but a measured one (GB10): priced at it, and said to be a measurement
    stand_in = [line for line in gaps if "no datasheet bf16 or fp16 rate" in line]
    if not (gpu.dense_flops.get("bf16") or gpu.dense_flops.get("fp16")) and gpu.achieved_dense_flops:
        rate = gpu.achieved_dense_flops.get("bf16") or gpu.achieved_dense_flops["fp16"]
        assert len(stand_in) == 1 and f"measured {rate / 1e12:,.1f} TFLOP/s" in stand_in[0] and s.bf16_rate == rate
        gaps = [line for line in gaps if line not in stand_in]
    else:
        assert stand_in == []
    lacking = _missing(gpu, weight)
    if lacking is None:
        # every rate the step needs is stated: priced, and no line says otherwise
        assert s.gemm_rate > 0 and s.bf16_rate > 0, (key, weight)
        assert gaps == [], gaps
    else:
        assert len(gaps) == 1 and f"no {lacking}" in gaps[0], (key, weight, gaps)
        if lacking == "bf16":  # nothing to divide the FLOPs by: said to be a lower bound
            assert s.bf16_rate == 0 and "lower bounds" in gaps[0]
        else:  # priced at the next rate the profile gives, and which one is said
            assert s.gemm_rate > 0 and f"at its {gemm_rate(gpu, weight)[1]} rate" in gaps[0]


def _rows(res) -> list[dict]:
    data = json.loads(res.stdout)
    return data["plans"] if isinstance(data, dict) else data


@pytest.mark.parametrize("speed", ["calibrated", "roofline"])
@pytest.mark.parametrize("weight", ["bf16", "fp8"])
def test_sweep_over_every_profile_gives_finite_figures_and_names_each_gap(speed, weight):
    keys = sorted(GPUS)
    res = CliRunner().invoke(whole_app(), ["sweep", "-m", "llama-3.1-8b", "--gpu", ",".join(keys), "--ctx", "8k",
                                           "--weight-dtype", weight, "--speed", speed, "--json"])
    assert res.exit_code == 0, res.output
    rows = _rows(res)
    assert {r["gpu"] for r in rows} == set(keys)
    for r in rows:
        tps = r["decode_tokens_per_second"]
        assert math.isfinite(tps) and tps > 0, r["gpu"]
        if speed == "calibrated" and r.get("fits"):
            cal = r["decode_tokens_per_second_calibrated"]
            assert cal is None or (math.isfinite(cal) and 0 < cal <= tps * 1.0001), r["gpu"]
    for key in keys:
        lacking = _missing(GPUS[key], None if weight == "bf16" else weight)
        said = [ln for ln in res.stderr.splitlines() if f"GPU {key}'s profile states no" in ln]
        assert len([ln for ln in said if "matmul rate" in ln]) == (lacking is not None), (key, said)
        # a link line only where the profile states no link bandwidth (the sweep's layouts span several GPUs)
        assert all(GPUS[key].interconnect_bytes_per_s is None for ln in said if "link bandwidth" in ln), said


@pytest.mark.parametrize("key", sorted(GPUS))
@pytest.mark.parametrize("tp", [1, 2])
def test_fit_on_every_profile_prints_a_decode_figure_and_says_a_missing_rate(key, tp):
    gpu = GPUS[key]
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", key, "--ctx", "8k", "--tp", str(tp),
                                           "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert math.isfinite(plan["decode_step_seconds"]) and plan["decode_step_seconds"] > 0
    cal = plan["decode_step_seconds_calibrated"]  # null where the plan does not fit (16 GB cards at tp 1), as sweep's
    assert (math.isfinite(cal) and cal > 0) if plan["fits"] else cal is None
    said = [ln for ln in res.stderr.splitlines() if "matmul rate" in ln]
    assert len(said) == (_missing(gpu, None) is not None), said
    # two GPUs all-reduce over the profile's link: where it states no bandwidth, the PCIe rate taken is said
    link = [ln for ln in res.stderr.splitlines() if "no link bandwidth" in ln]
    assert len(link) == (tp > 1 and not gpu.interconnect_bytes_per_s), link
    if link:
        gen, lanes = gpu.pcie_gen or 4, gpu.pcie_lanes or 16
        assert f"priced over the host's PCIe Gen{gen} x{lanes}" in link[0], link


def test_a_profile_with_fp8_math_but_no_fp8_rate_says_its_fp8_gemms_run_at_bf16(tmp_path):
    # No bundled profile with a 16-bit rate lacks its fp8 one since H800, L20 and MI300A gained theirs; a user's copy
    # of the H800 without it takes the path: fp8 weights on Hopper (fp8: true) priced at the bf16 rate, 989 T, and the
    # line says so.
    from kvplan.sources.catalog import find_in_catalog

    text = (PROFILES / "h800.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("  fp8: ")]
    lines = [("key: my-h800" if ln.startswith("key:") else "aliases: []" if ln.startswith("aliases:") else ln)
             for ln in lines]
    (tmp_path / "my-h800.yaml").write_text("\n".join(lines) + "\n")
    gpu = load_gpus([tmp_path])["my-h800"]
    assert gpu.fp8 and "fp8" not in gpu.dense_flops
    assert gemm_rate(gpu, "fp8") == (989e12, "bf16")
    assert shape_for(find_in_catalog("llama-3.1-8b"), gpu, weight_dtype="fp8").gemm_rate == 989e12
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", "my-h800", "--hw-profiles", str(tmp_path),
                                           "--ctx", "8k", "--weight-dtype", "fp8"])
    assert res.exit_code == 0, res.output
    said = [ln for ln in res.stderr.splitlines() if "matmul rate" in ln]
    assert said == ["note: GPU my-h800's profile states no fp8 matmul rate (dense_flops), though it has fp8 tensor "
                    "math: fp8 GEMMs are priced at its bf16 rate, slower than its fp8 kernels may run (give the rate "
                    "in a profile of your own, --hw-profiles)"], res.stderr
    # 16-bit weights on it need no fp8 rate: no line
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", "my-h800", "--hw-profiles", str(tmp_path),
                                           "--ctx", "8k"])
    assert res.exit_code == 0 and "matmul rate" not in res.stderr


def test_cheapest_without_a_workload_says_the_gaps_sweep_says():
    # cheapest ranks by the calibrated step's tok/s/req with or without --workload, so what the profiles lack for
    # those figures is said either way, as sweep says it (kvplan.cli.speed_flags.plans_gaps): GB10's datasheet states
    # no 16-bit matmul rate (a measured one stands in, said), MI250X (one 64 GiB GCD) no link bandwidth, and
    # Llama 3.1 70B's 141 GB of bf16 weights
    # need more than two GCDs, so its plans there span several (before, cheapest said neither without a workload)
    gaps = {}
    for command, args in (("sweep", ["-m", "llama-3.1-70b"]), ("cheapest", ["llama-3.1-70b", "--concurrency", "4"])):
        res = CliRunner().invoke(whole_app(), [command, *args, "--gpu", "gb10,mi250x", "--ctx", "8k", "--json"])
        assert res.exit_code == 0, res.output
        gaps[command] = [ln for ln in res.stderr.splitlines() if "'s profile states no" in ln]
    assert any("GPU gb10's profile states no datasheet bf16 or fp16 rate: its 16-bit GEMMs and attention run at the "
               "measured 213.0 TFLOP/s" in ln for ln in gaps["cheapest"]), gaps
    assert any("GPU mi250x's profile states no link bandwidth" in ln for ln in gaps["cheapest"]), gaps
    assert gaps["cheapest"] == gaps["sweep"]
