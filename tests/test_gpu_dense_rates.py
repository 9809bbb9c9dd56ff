"""Dense tensor rates added to bundled profiles (issue 22's missing GPUs, priced per issue 21): each read from the
bundled file and checked against the arithmetic on the figure its source prints, not against kvplan's code."""
import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.speed.compute_dtype import read_flops

T = 10**12


def test_mi355x_rates_are_amds_dense_figures():
    # stas00/ml-engineering@744d01e1 compute/accelerator/README.md, TFLOPS table ("w/o sparsity"), row 'AMD MI355X':
    # fp16 2500 | bf16 2500 | fp8 5000 | int8 5000 | fp4 10100 (AMD's dense figures; its sparse ones are exactly 2x:
    # 5 PFLOPS FP16, 10.1 PFLOPS FP8). Its BF16 check: 2400 MHz x 512 FMA x 2 x 1024 Matrix Cores = 2516.6 T ~ 2.5 P.
    mi355x = find_gpu("mi355x")
    assert dict(mi355x.dense_flops) == {"bf16": 2500 * T, "fp16": 2500 * T, "fp8": 5000 * T, "int8": 5000 * T,
                                        "fp4": 10100 * T}
    assert abs(2400e6 * 512 * 2 * 1024 - mi355x.dense_flops["bf16"]) / mi355x.dense_flops["bf16"] < 0.01
    # fp8 is twice bf16 and not the 10.1 PFLOPS sparse figure
    assert mi355x.dense_flops["fp8"] == 2 * mi355x.dense_flops["bf16"]
    # the same README's MAMF row: 1565.0 TFLOPS measured bf16, 1565 / 2500 = 62.6% of the datasheet
    assert mi355x.achieved_dense_flops["bf16"] == 1565 * T
    assert read_flops(mi355x, "bf16") == 1565 * T


def test_mi300a_rates_are_amds_and_dense():
    # AMD's MI300A figures (vengineer.hatenablog.com, 2023-12-11): FP16 980.6 TFLOPs, bfloat16 980.6, INT8 1.96 POPs.
    # Dense: ROCm@e396b489 docs/conceptual/gpu-arch/mi300.md gives Matrix FP16/BF16 2048 and INT8 4096 FLOPS per
    # clock per CU; 228 CUs x 2048 x 2.1 GHz = 980.6 T; 228 x 4096 x 2.1 GHz = 1961.2 T, printed as 1.96 P.
    mi300a = find_gpu("mi300a")
    assert mi300a.dense_flops["bf16"] == mi300a.dense_flops["fp16"] == 980_600 * 10**9
    assert mi300a.dense_flops["bf16"] == pytest.approx(228 * 2048 * 2.1e9, rel=1e-4)  # 980.6 T
    assert mi300a.dense_flops["int8"] == 1_960_000 * 10**9
    assert mi300a.dense_flops["int8"] == pytest.approx(228 * 4096 * 2.1e9, rel=1e-3)  # 1961.2 T, printed 1.96 P
    # FP8: the same ROCm table's 'Matrix FP8 4096' FLOPS per clock per CU (MI300X 2614.9 T = 304 x 4096 x 2.1 GHz):
    # 228 x 4096 x 2.1 GHz = 1,961.1648 T, written 1961.2 T
    assert mi300a.dense_flops["fp8"] == 1_961_200 * 10**9
    assert mi300a.dense_flops["fp8"] == pytest.approx(228 * 4096 * 2.1e9, rel=1e-4)
    assert 304 * 4096 * 2.1e9 == pytest.approx(2614.9e12, rel=1e-4)  # the table's own MI300X row


def test_rtx_6000_ada_16_bit_rate_is_half_its_datasheet_fp8_rate():
    # RTX 6000 Ada datasheet: "Tensor performance 1457.0 TFLOPS", footnote "Effective FP8 TFLOPS using the new
    # sparsity feature": 1457.0 / 2 = 728.5 T dense FP8. Ada runs FP8 at twice BF16 (NVIDIA's L40S datasheet, the same
    # AD102 with 142 SMs: BF16 362.05, FP8 733 T): 728.5 / 2 = 364.25 T. Clock check: 142 SMs x 2505 MHz boost x 1024
    # dense FP16 FLOP per SM per clock (RTX 4090: 128 x 2520 MHz x 1024 = 330.3 T, its datasheet figure) = 364.2 T.
    ada = find_gpu("rtx-6000-ada")
    assert dict(ada.dense_flops) == {"bf16": 364_250 * 10**9, "fp16": 364_250 * 10**9, "fp8": 728_500 * 10**9}
    assert 2 * ada.dense_flops["fp8"] == 1_457_000 * 10**9
    assert ada.dense_flops["bf16"] == pytest.approx(142 * 2505e6 * 1024, rel=1e-4)
    assert 128 * 2520e6 * 1024 == pytest.approx(330.3e12, rel=1e-3)
    assert read_flops(ada, "bf16") == 364.25e12  # the prefill terms are priced on it now: no zero-rate GEMM


def test_rtx_a4500_16_bit_rate_is_ga102s_per_sm_rate_at_its_sms_and_clock():
    # GA102's professional cards: NVIDIA's A40 datasheet 'Peak BF16 Tensor TFLOPS with FP32 Accumulate 149.7 | 299.4*'
    # at 84 SMs (10,752 CUDA cores / 128) and 1740 MHz boost: 149.7e12 / (84 x 1.74e9) = 1,024 FLOP per SM per clock;
    # RTX A6000 154.8 T = 84 x 1800 MHz x 1024. The A4500: 56 SMs (7,168 CUDA cores) x 1650 MHz x 1024 = 94.6176 T.
    assert 149.7e12 / (84 * 1.74e9) == pytest.approx(1024, rel=1e-3)
    assert find_gpu("rtx-a6000").dense_flops["fp16"] == pytest.approx(84 * 1800e6 * 1024, rel=1e-3)
    a4500 = find_gpu("rtx-a4500")
    assert dict(a4500.dense_flops) == {"bf16": 94_617_600 * 10**6, "fp16": 94_617_600 * 10**6}
    assert a4500.dense_flops["bf16"] == 56 * 1650 * 10**6 * 1024 and a4500.sm_count == 56
    assert 2 * a4500.dense_flops["bf16"] == pytest.approx(189.2e12, rel=1e-3)  # 189.2 T with sparsity
    assert a4500.fp8 is False and "fp8" not in a4500.dense_flops  # Ampere: no FP8 tensor math


def test_rtx_a5000_16_bit_rate_is_its_sparse_headline_halved_and_ga102s_per_sm_rate():
    # NVIDIA's RTX A5000 datasheet (round 35, LMCache#3430's card): tensor performance 222.2 TFLOPS, a 2:4-sparse
    # figure, so dense = 111.1 T; 8,192 CUDA cores / 128 = 64 SMs, and GA102's 1,024 FLOP per SM per clock (above)
    # puts it at 111.1e12 / (64 x 1024) = 1695 MHz, the clock a 64-SM GA102 needs for it.
    a5000 = find_gpu("a5000")
    assert dict(a5000.dense_flops) == {"bf16": 111_100 * 10**9, "fp16": 111_100 * 10**9}
    assert a5000.sm_count == 8192 // 128 == 64
    assert a5000.dense_flops["bf16"] == pytest.approx(222.2e12 / 2, rel=1e-9)
    assert a5000.dense_flops["bf16"] == pytest.approx(64 * 1695e6 * 1024, rel=1e-3)
    assert a5000.fp8 is False and "fp8" not in a5000.dense_flops  # Ampere: no FP8 tensor math


def test_h800_and_l20_fp8_rates_follow_their_architectures_ratios():
    # Hopper: FP8 = 2 x BF16 = INT8 (H100 whitepaper, SXM5: 989.4 / 1978.9 / 1978.9 T); the H800 is the H100 SXM5's
    # GH100 (BF16 989 T, INT8 1979 T in llm-prof): FP8 1979 T.
    h800 = find_gpu("h800")
    assert h800.dense_flops["fp8"] == h800.dense_flops["int8"] == 1_979 * T
    assert h800.dense_flops["fp8"] == pytest.approx(2 * h800.dense_flops["bf16"], rel=1e-3)
    # Ada: BF16 = FP16 and FP8 = INT8 = 2 x FP16 (L40S datasheet 362.05 / 362.05 / 733 / 733 T; L4 121 / 242 / 242):
    # the L20's llm-prof FP16 119.5 T and INT8 239 T give BF16 119.5 T and FP8 239 T.
    l20 = find_gpu("l20")
    assert dict(l20.dense_flops) == {"bf16": 119_500 * 10**9, "fp16": 119_500 * 10**9, "fp8": 239 * T, "int8": 239 * T}
    assert l20.dense_flops["fp8"] == 2 * l20.dense_flops["fp16"]


def test_rtx_pro_6000_workstation_rates():
    # NVIDIA's datasheet: "4000 AI TOPS", footnote "Effective FP4 TOPS with sparsity": 4000 / 2 = 2000 T dense FP4.
    # hmc-tech (2617 MHz, 600 W): BF16 503.8 T tensor (1.01 P sparse), FP16 503.8 T with FP32 accumulate, INT8
    # 1.01 POPS; NVIDIA's RTX Blackwell PRO whitepaper (astroC86@42c5eff6): FP8 1007.6 T = 2 x 503.8.
    # Clock check: 188 SMs x 2617 MHz x 1024 FLOP per SM per clock = 503.8 T.
    pro = find_gpu("rtx-pro-6000-workstation")
    assert dict(pro.dense_flops) == {"bf16": 503_800 * 10**9, "fp16": 503_800 * 10**9, "fp8": 1_007_600 * 10**9,
                                     "int8": 1_010 * T, "fp4": 2000 * T}
    assert pro.dense_flops["bf16"] == pytest.approx(188 * 2617e6 * 1024, rel=1e-4)  # 503.8 T
    assert pro.dense_flops["fp8"] == 2 * pro.dense_flops["bf16"]
    # the prefill terms are priced on it now: no zero-rate GEMM (at the measured torch.mm 417.98 T since round 34)
    assert read_flops(pro, "bf16") == 417_980 * 10**9


def test_rtx_4090_fp8_is_the_fp32_accumulate_rate_fp8_gemms_run_at():
    # NVIDIA Ada GPU Architecture whitepaper, GeForce RTX 4090 column: Peak FP8 Tensor TFLOPS with FP16 Accumulate
    # 660.6/1321.2, with FP32 Accumulate 330.3/660.6 (dense/sparse); Peak BF16 Tensor TFLOPS with FP32 Accumulate
    # 165.2/330.4. vLLM's sm89 FP8 GEMM accumulates in float
    # (vllm-project/vllm@554012e8dca07d4384e0bbf9505b2a93b0a51ea4: csrc/quantization/cutlass_w8a8/scaled_mm_c2x.cuh,
    # cutlass_2x_gemm's ElementAcc: int32 for int8, float else),
    # so an FP8 checkpoint's GEMMs run at 330.3 T, twice the BF16 rate, not four times.
    # Clock check: 128 SMs x 2520 MHz boost x 1024 FP8 FLOP per SM per clock (FP32 accumulate) = 330.3 T.
    from kvplan.speed.terms import gemm_rate

    g = find_gpu("rtx-4090")
    assert g.dense_flops["fp8"] == 330_300 * 10**9
    assert g.dense_flops["fp8"] == pytest.approx(128 * 2520e6 * 1024, rel=1e-3)
    # 2 x 165.2 (the printed rounding)
    assert g.dense_flops["fp8"] == pytest.approx(2 * g.dense_flops["bf16"], rel=1e-3)
    assert gemm_rate(g, "fp8") == (330_300 * 10**9, "fp8")
    # no measured FP8 matmul on the profile: the datasheet's at the measured bf16 share (torch.mm 164.81 of 165.2)
    assert read_flops(g, "fp8") == pytest.approx(330_300e9 * 164.81 / 165.2)
    assert g.dense_flops["int8"] == 660_600 * 10**9  # INT8 (int32 accumulate) is not halved on GeForce


def test_mi300x_and_mi325x_int8_is_cdna3s_fp8_rate():
    # ROCm/ROCm@e396b489 docs/conceptual/gpu-arch/mi300.md L82-89, MI300X table: Matrix FP8 4096 and Matrix INT8 4096
    # FLOPS per clock per CU, both peak 2614.9 (304 CUs x 4096 x 2.1 GHz = 2,614.9 T, dense). The MI325X is the same
    # gfx942 die with 304 CUs (docs/reference/gpu-arch-specs.rst), its FP8 2614.9 dense: INT8 the same.
    for key in ("mi300x", "mi325x"):
        g = find_gpu(key)
        assert g.dense_flops["int8"] == 2_614_900 * 10**9
        assert g.dense_flops["int8"] == g.dense_flops["fp8"]
        assert g.dense_flops["int8"] == pytest.approx(304 * 4096 * 2.1e9, rel=1e-4)
