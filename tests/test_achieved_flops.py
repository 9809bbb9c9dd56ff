"""A profile's measured matmul rate (`achieved_dense_flops`): read by the speed terms' GEMM and attention FLOPs where a
profile has it (fp8 / fp4 at the measured bf16 share where only bf16 was measured), the datasheet's otherwise; the
roofline stays on the datasheet; check-bench shows it beside the datasheet; the field is checked."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.core.errors import KvplanError
from kvplan.hardware.gpu_profile import parse_profile
from kvplan.hardware.gpus import find_gpu
from kvplan.speed.compute_dtype import read_flops
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS, features, gemm_rate, roofline

PROFILES = Path(__file__).resolve().parents[1] / "kvplan" / "hardware" / "profiles"
H100 = find_gpu("h100-sxm")
T = 10**12


def _llama_8b():
    from kvplan.sources.catalog import find_in_catalog

    return find_in_catalog("llama-3.1-8b")


def test_an_h100_prefill_gemm_runs_at_its_measured_rate_and_the_roofline_at_the_datasheet():
    # stas00/ml-engineering @744d01e1 (2026-08-22) compute/accelerator/README.md, MAMF table, 'NVIDIA H100 SXM':
    # BF16 794.5 TFLOPS (80% of the datasheet's 989), FP8 1,402.6 TFLOPS (71% of 1,978).
    assert dict(H100.achieved_dense_flops) == {"bf16": 794_500 * 10**9, "fp8": 1_402_600 * 10**9}
    assert gemm_rate(H100, None) == (989e12, "bf16")  # the datasheet's, as before: the roofline's rate
    s = shape_for(_llama_8b(), H100)
    assert (s.gemm_rate, s.bf16_rate, s.peak_bf16_rate) == (794.5e12, 794.5e12, 989e12)
    # Llama 3.1 8B, one GPU: 2 x 7,504,924,672 active parameters (the embedding is a lookup) = 15,009,849,344 FLOPs a
    # token, of which the LM head's 2 x 128,256 x 4,096 = 1,050,673,152 run only for the one position sampled
    # (kvplan.speed.terms.head_rows): 13,959,176,192 a token. A 1,000-token prefill's GEMMs: 1.3959176192e13 +
    # 1.050673152e9 = 1.3960226865e13 / 794.5e12 = 17.571 ms (18.892 ms with the head on every token).
    assert (s.flops_per_token, s.head_flops) == (13_959_176_192, 1_050_673_152)
    f = features(s, 1000, 1, 0, 0)
    assert f[TERMS.index("gemm")] == pytest.approx(1.3960226865e13 / 794.5e12)
    assert f[TERMS.index("gemm")] == pytest.approx(17.571e-3, rel=1e-4)
    # attention: 4 x 32 heads x 128 x 32 layers = 524,288 FLOPs a query-key pair; 500,500 causal pairs
    # (1,000 x 1,001 / 2) = 2.62406e11 FLOPs / 794.5e12 = 0.3303 ms
    assert s.attn_flops_per_pair == 524_288
    f = features(s, 1000, 1, 0, 500_500)
    assert f[TERMS.index("attn")] == pytest.approx(524_288 * 500_500 / 794.5e12)
    # the roofline, the labelled lower bound, prices every FLOP at the datasheet's bf16 rate:
    # (1.3960226865e13 + 2.62406e11) / 989e12 = 14.381 ms (the weights' 15,009,849,344 B / 3.35e12 = 4.481 ms is less)
    assert roofline(s, 1000, 1, 0, 500_500) == pytest.approx((1.3960226865e13 + 524_288 * 500_500) / 989e12)


def test_fp8_weights_read_the_measured_fp8_rate_and_the_roofline_stays_at_bf16():
    s = shape_for(_llama_8b(), H100, weight_dtype="fp8")
    assert (s.gemm_rate, s.bf16_rate, s.peak_bf16_rate) == (1402.6e12, 794.5e12, 989e12)
    f = features(s, 1000, 1, 0, 0)
    # FP8 Llama 3.1 8B: the LM head's 2 x 128,256 x 4,096 = 1.050673152e9 for its one sampled position at the bf16
    # rate (an fp8 checkpoint keeps it in 16 bits: kvplan.model.weights.weight_bytes) = 0.0013 ms, the other
    # 1.3959176192e13 at fp8's 1,402.6e12 = 9.9524 ms: 9.9537 ms (11.275 ms with the head on all 1,000 tokens)
    assert f[TERMS.index("gemm")] == pytest.approx(9.9537e-3, rel=1e-4)
    assert roofline(s, 1000, 1, 0, 0) == pytest.approx(1.3960226865e13 / 989e12)  # every FLOP at the bf16 datasheet


def test_a_precision_not_measured_runs_at_the_measured_bf16_share_of_its_datasheet_rate():
    # B200: MAMF measured BF16 1,745 of 2,250 TFLOPS and FP8, not FP4: 9,000 x 1,745 / 2,250 = 6,980 TFLOPS
    assert read_flops(find_gpu("b200"), "fp4") == pytest.approx(6_980e12)
    assert read_flops(find_gpu("b200"), "fp8") == 3_432.5e12  # measured
    # MI355X: MAMF BF16 1,565 of AMD's 2,500 measured, no FP8 row, and no AMD MAF for it: 5,000 x 1,565 / 2,500 =
    # 3,130 TFLOPS
    assert read_flops(find_gpu("mi355x"), "fp8") == pytest.approx(5_000e12 * 1_565 / 2_500)
    assert read_flops(find_gpu("mi355x"), "fp8") == pytest.approx(3_130e12, rel=1e-9)


def test_mi300x_and_mi325x_fp8_gemms_run_at_amds_measured_maf_not_the_bf16_share():
    # ROCm/rocm-blogs@d957560c blogs/software-tools-optimization/measuring-max-achievable-flops-part2/README.md,
    # Table 1 'Max Achievable FLOPs (MAF)' (hipblaslt-bench, 4096 x 3648 x 32896 f8_fnuz): 'AMD Instinct MI300X' FP8
    # 1273 TFLOPs, 'AMD Instinct MI325X' FP8 1519 TFLOPs. The bf16-share rule gave 2,614.9 x 668.4 / 1,307.4 = 1,336.85
    # and 2,614.9 x 784.9 / 1,307.4 = 1,569.83: AMD's own FP8 runs 4.8% and 3.2% below them.
    mi300x, mi325x = find_gpu("mi300x"), find_gpu("mi325x")
    assert read_flops(mi300x, "fp8") == 1_273e12 and read_flops(mi325x, "fp8") == 1_519e12
    assert read_flops(mi300x, "bf16") == 668.4e12  # bf16 stays on MAMF's torch.matmul row
    # an FP8 checkpoint's prefill GEMMs on an MI300X: Llama 3.1 8B's 1.3959176192e13 FLOPs outside its bf16 LM head
    # (test_fp8_weights_read_the_measured_fp8_rate_and_the_roofline_stays_at_bf16) / 1,273e12 = 10.9656 ms, plus the
    # head's one sampled position, 1.050673152e9 / 668.4e12 = 0.0016 ms: 10.9671 ms (at the bf16 share 10.4418 + 0.0016)
    s = shape_for(_llama_8b(), mi300x, weight_dtype="fp8")
    assert (s.gemm_rate, s.bf16_rate, s.peak_bf16_rate) == (1_273e12, 668.4e12, 1_307.4e12)
    assert features(s, 1000, 1, 0, 0)[TERMS.index("gemm")] == pytest.approx(10.9671e-3, rel=1e-4)
    # the roofline, the labelled lower bound, stays at the datasheet's bf16 rate
    assert roofline(s, 1000, 1, 0, 0) == pytest.approx(1.3960226865e13 / 1_307.4e12)


def test_a_profile_without_a_measurement_runs_at_its_datasheet():
    # L40: no published matmul measurement found, so its terms run at the datasheet's 181.05 (bf16) and 362 (fp8)
    l40 = find_gpu("l40")
    assert dict(l40.achieved_dense_flops) == {} and l40.achieved_dense_flops_source is None
    assert read_flops(l40, "bf16") == 181.05e12 and read_flops(l40, "fp8") == 362e12
    s = shape_for(_llama_8b(), l40)
    assert s.gemm_rate == s.bf16_rate == s.peak_bf16_rate == 181.05e12


def test_l40_runs_at_half_the_l40s_tensor_rate_as_its_datasheet_says():
    # NVIDIA's L40/L40S datasheet table (L40 column, '*' with sparsity): BFLOAT16 Tensor 181.05 | 362.1*, FP8 362 | 724*
    # (L40S: 362.05 | 733*, 733 | 1,466*). Dense = half the sparse figure: 362.1 / 2 = 181.05, 724 / 2 = 362; about
    # half the L40S's (362.05 / 181.05 = 2.0).
    l40, l40s = find_gpu("l40"), find_gpu("l40s")
    assert read_flops(l40, "bf16") == 362.1e12 / 2 and read_flops(l40, "fp8") == 724e12 / 2
    assert l40s.dense_flops["bf16"] / read_flops(l40, "bf16") == pytest.approx(2.0, rel=1e-3)
    assert shape_for(_llama_8b(), l40).bf16_rate == 181.05e12  # the prefill terms are priced, not free


def test_every_measured_figure_is_its_sources_number():
    # Each bundled rate is a TFLOPS figure the source quotes (x 10^12), at most the datasheet's (a bf16 figure on a
    # profile stating fp16 alone: at most that), from one of two tables: the MAMF table, or, for parts it has no row
    # for, zzc0721/torch-performance-test-data's torch.mm database; the MI100's from rocblas-bench at llama.cpp's own
    # call (ROCm/Tensile#2087) (kvplan/hardware/profiles/README.md).
    seen, mamf = {}, "stas00/ml-engineering @744d01e1"
    aic = "ai-dynamo/aiconfigurator@f0f1266353c5249725df470ce2f6c74e6f152566"  # mmapeak, where no datasheet rate is
    for path in sorted(PROFILES.glob("*.yaml")):
        gpu = parse_profile(path.read_text(), str(path))
        if not gpu.achieved_dense_flops:
            continue
        source = gpu.achieved_dense_flops_source
        seen[gpu.key] = ("mamf" if mamf in source else "aiconfigurator" if aic in source
                         else "rocblas" if "ROCm/Tensile#2087" in source else "mm")
        quoted = {int(Decimal(x) * T) for x in re.findall(r"(\d+\.\d+) TFLOPS", source)}
        quoted |= {int(x) for x in re.findall(r"_tc_flops (\d+)", source)}  # aiconfigurator's yaml, in FLOP/s
        quoted |= {int(Decimal(x) * T) for x in re.findall(r"(?:BF16|FP8) (\d+\.\d+)", source)}
        quoted |= {int(Decimal(x) * T) for x in re.findall(r"MAF FP8 (\d+) TFLOPs", source)}
        quoted |= {int(Decimal(x) * T) for x in re.findall(r"about (\d+) TFlops", source)}  # Tensile#2087
        for precision, rate in gpu.achieved_dense_flops.items():
            assert rate in quoted, (path.name, precision)
            rated = gpu.dense_flops.get(precision) or gpu.dense_flops.get("fp16")
            assert rate <= rated if rated else seen[gpu.key] == "aiconfigurator", (path.name, precision)
        assert mamf in source or aic in source or "zzc0721/torch-performance-test-data @9d828276" in source or (
            "ROCm/Tensile#2087" in source), path.name
    assert {k for k, v in seen.items() if v == "mamf"} == {
        "a100-sxm-80", "a100-sxm-40", "a100-pcie-80", "a100-pcie-40", "gh200-144", "h100-sxm", "h200-sxm", "b200",
        "b300", "gb200", "mi300x", "mi325x", "mi355x", "gaudi2", "gaudi3"}
    assert {k for k, v in seen.items() if v == "mm"} == {
        "rtx-3090", "rtx-4090", "rtx-5090", "l4", "l40s", "rtx-pro-6000-server", "rtx-pro-6000-workstation",
        "rtx-a6000", "t4", "l20", "h20", "h100-pcie", "v100-sxm2-16"}
    assert {k for k, v in seen.items() if v == "aiconfigurator"} == {"gb10"}
    assert {k for k, v in seen.items() if v == "rocblas"} == {"mi100"}


def test_check_bench_shows_the_measured_rate_beside_the_datasheet():
    r = CliRunner().invoke(whole_app(), ["check-bench", str(Path(__file__).parent / "fixtures" / "bench" /
                                                            "vllm-report-gemma3-27b.txt"), "--gpu", "h100", "--json"])
    assert r.exit_code == 0, r.output
    (run,) = json.loads(r.stdout)["runs"]
    pre = next(e for e in run["efficiency"] if e["term"].startswith("prefill FLOP/s"))
    assert (pre["datasheet"], pre["benchmark"]) == (989e12, 794.5e12)
    assert pre["pct_of_benchmark"] == pytest.approx(100 * pre["achieved"] / 794.5e12)


def _h100_text(**fields) -> str:
    text = (PROFILES / "h100-sxm.yaml").read_text()
    text = re.sub(r"^achieved_dense_flops(_source)?:.*\n(  \w+: .*\n)*", "", text, flags=re.M)
    return text + "".join(f"{k}: {v}\n" for k, v in fields.items())


def test_the_field_is_checked_in_one_line():
    ok = parse_profile(_h100_text(achieved_dense_flops="{bf16: 700000000000000}",
                                  achieved_dense_flops_source='"a matmul sweep"'), "x.yaml")
    assert dict(ok.achieved_dense_flops) == {"bf16": 700 * T}
    bare = parse_profile(_h100_text(), "x.yaml")
    assert dict(bare.achieved_dense_flops) == {} and bare.achieved_dense_flops_source is None
    cases = [
        ({"achieved_dense_flops": "{bf16: 700000000000000}"}, "needs 'achieved_dense_flops_source'"),
        ({"achieved_dense_flops": "{bf16: 990000000000000}", "achieved_dense_flops_source": '"x"'},
         "'achieved_dense_flops.bf16' (990000000000000) exceeds 'dense_flops.bf16' (989000000000000)"),
        ({"achieved_dense_flops": "{bf16: 794.5T}", "achieved_dense_flops_source": '"x"'}, "positive integer"),
        ({"achieved_dense_flops": "794500000000000", "achieved_dense_flops_source": '"x"'}, "a mapping of precision"),
        ({"achieved_dense_flops_source": '"x"'}, "a mapping of precision"),
    ]
    for fields, said in cases:
        with pytest.raises(KvplanError) as err:
            parse_profile(_h100_text(**fields), "x.yaml")
        assert said in str(err.value) and "\n" not in str(err.value), str(err.value)


def _bare_spark(tmp_path) -> Path:
    """gb10.yaml as a user's profile under another key, without its measured rates: no 16-bit rate at all."""
    import yaml

    data = yaml.safe_load((PROFILES / "gb10.yaml").read_text())
    for field in ("achieved_dense_flops", "achieved_dense_flops_source", "device_name"):
        data.pop(field)
    data.update(key="my-spark", aliases=[])
    (tmp_path / "hw").mkdir(exist_ok=True)
    (tmp_path / "hw" / "my-spark.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path / "hw"


def test_a_profile_without_a_matmul_rate_is_said_where_speed_is_shown_never_priced_at_zero_silently(tmp_path):
    # A profile with no 16-bit tensor rate, datasheet or measured (GB10's, less the measured rates it carries: NVIDIA
    # states only FP4 with sparsity, 1 PFLOP): the bf16 GEMM and attention terms, FLOPs / rate, have nothing to divide
    # by and cost 0 s, so a prefill on it is a lower bound, said. (RTX 6000 Ada was the example before its rate was
    # derived: tests/test_gpu_dense_rates.py; the bundled GB10 until its measured rates: the test below.)
    hw = _bare_spark(tmp_path)
    bare = parse_profile((hw / "my-spark.yaml").read_text(), "my-spark.yaml")
    assert not (bare.dense_flops.get("bf16") or bare.dense_flops.get("fp16") or bare.achieved_dense_flops)
    assert shape_for(_llama_8b(), bare).bf16_rate == 0.0
    runner = CliRunner()
    for args in (["fit", "llama-3.1-8b", "--gpu", "my-spark", "--ctx", "8k"],
                 ["simulate", "llama-3.1-8b", "--gpu", "my-spark", "--workload", "chat", "--qps", "1",
                  "--duration", "2"],
                 ["sweep", "-m", "llama-3.1-8b", "--gpu", "my-spark,h100-sxm", "--ctx", "8k"]):
        res = runner.invoke(whole_app(), [*args, "--hw-profiles", str(hw)])
        assert res.exit_code == 0, res.output
        lines = [ln for ln in res.stderr.splitlines() if "matmul rate" in ln]
        assert lines == ["note: GPU my-spark's profile states no bf16 or fp16 matmul rate (dense_flops): prefill GEMMs "
                         "and attention cost no time on it, so its TTFT and prefill figures are lower bounds (give the "
                         "rate in a profile of your own, --hw-profiles)"], res.stderr
    # an H100 has its rate: no such line
    res = runner.invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", "h100-sxm", "--ctx", "8k"])
    assert res.exit_code == 0 and "matmul rate" not in res.stderr


def test_gb10_runs_at_the_measured_mmapeak_rates_said_as_measured_and_the_roofline_at_its_datasheet():
    # ai-dynamo/aiconfigurator@f0f1266353c5249725df470ce2f6c74e6f152566 src/aiconfigurator/systems/gb10.yaml:
    # float16_tc_flops 213e12 ('~213 TFLOPS empirical (mmapeak); NVIDIA publishes only FP4 sparse'), fp4_tc_flops
    # 427e12 ('~427 TFLOPS dense (mmapeak)'); the datasheet: 1 PFLOP FP4 with sparsity, 500 T dense, no 16-bit rate.
    spark = find_gpu("gb10")
    assert dict(spark.achieved_dense_flops) == {"fp16": 213 * T, "fp4": 427 * T}
    assert dict(spark.dense_flops) == {"fp4": 500 * T}
    s = shape_for(_llama_8b(), spark)
    # 16-bit GEMMs and attention at the measured 213 T; the roofline's bf16 rate stays the datasheet's: none (0)
    assert (s.gemm_rate, s.bf16_rate, s.peak_bf16_rate) == (213e12, 213e12, 0.0)
    # a 1,000-token prefill of Llama 3.1 8B's GEMMs: 1.3960226865e13 FLOPs (the H100 test above) / 213e12 = 65.54 ms
    assert features(s, 1000, 1, 0, 0)[TERMS.index("gemm")] == pytest.approx(1.3960226865e13 / 213e12)
    assert shape_for(_llama_8b(), spark, weight_dtype="nvfp4").gemm_rate == 427e12  # fp4 weights: measured fp4
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", "gb10", "--ctx", "8k"])
    assert res.exit_code == 0, res.output
    said = [ln for ln in res.stderr.splitlines() if "16-bit GEMMs and attention priced" in ln]
    assert len(said) == 1 and "at its measured fp16 rate, 213.0 TFLOP/s (achieved_dense_flops: a matmul benchmark's " \
        "figure standing in where the datasheet states no 16-bit rate, not a datasheet peak" in said[0], res.stderr
    assert "cost no time" not in res.stderr
    # said once: rate_gaps' line for sweep, cheapest and the roofline is not printed beside it
    assert [ln for ln in res.stderr.splitlines() if "213.0 TFLOP/s" in ln] == said, res.stderr


def test_a_measured_precision_the_datasheet_does_not_rate_stands_in_and_is_not_capped():
    gpu = parse_profile(_h100_text(achieved_dense_flops="{fp4: 1000}", achieved_dense_flops_source='"x"'), "x.yaml")
    assert dict(gpu.achieved_dense_flops) == {"fp4": 1000}
    with pytest.raises(KvplanError, match="unknown precision 'fp6'"):
        parse_profile(_h100_text(achieved_dense_flops="{fp6: 1000}", achieved_dense_flops_source='"x"'), "x.yaml")
