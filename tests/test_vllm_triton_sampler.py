"""vLLM's Triton top-k/top-p buffer in the profile run (kvplan.engines.vllm.sampler), sized by the GPU profile's
`sm_count`: issue 22's RTX 4090 case, the rule's edges, and the profiles' counts against the vendors' tables.

Source: vllm 0.17.0 / 0.19.0 v1/sample/ops/topk_topp_triton.py `apply_top_k_top_p_triton` (NUM_PROGRAMS =
min(num_sm, batch); the cached buffer is min(next_power_of_2(NUM_PROGRAMS), num_sm) fp32 rows of the vocabulary),
reached from topk_topp_sampler.py `apply_top_k_top_p` when HAS_TRITON and the batch has 8 or more rows; absent in
0.16.0 (vllm-project/vllm#33538).
"""

from __future__ import annotations

import pytest

from kvplan.engines import resolve_engine
from kvplan.engines.vllm import overhead as vo
from kvplan.engines.vllm import sampler as vs
from kvplan.hardware.gpus import find_gpu, load_gpus
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

LLAMA = find_in_catalog("llama-3.1-8b")


def test_the_4090_buffer_by_hand():
    # Llama 3.1's 128,256-token vocabulary x 4 B (fp32) x 128 SMs (NVIDIA Ada whitepaper: RTX 4090, 128 SMs):
    # the dummy run samples min(256, 2048) = 256 rows (max_num_seqs 256 below 70 GiB); NUM_PROGRAMS = min(128, 256)
    # = 128, next_power_of_2(128) = 128, capped at 128: 128 x 128,256 x 4 = 65,667,072 B = 62.625 MiB
    rtx4090 = find_gpu("rtx-4090")
    assert LLAMA.vocab_size == 128_256 and rtx4090.sm_count == 128
    assert vs.triton_buffer_bytes((0, 19, 0), 256, LLAMA.vocab_size, rtx4090) == 65_667_072
    # the same run on an H100 SXM (132 SMs, Hopper whitepaper): min(next_pow2(132) = 256, 132) = 132 rows
    assert vs.triton_buffer_bytes((0, 19, 0), 256, 128_256, find_gpu("h100-sxm")) == 132 * 128_256 * 4


@pytest.mark.parametrize("rows, sms, want", [
    (1024, 132, 132),  # H100, vLLM's 1,024 rows: capped at the SM count
    (100, 132, 128),  # next_power_of_2(100) = 128 < 132
    (8, 132, 8),  # the smallest batch the Triton path takes
    (7, 132, 0),  # below 8 rows apply_top_k_top_p takes the PyTorch sort
    (1024, 304, 304),  # MI300X, 304 compute units (ROCm's table): next_power_of_2(304) = 512, capped at 304
    (256, 58, 58),  # L4, 58 SMs
])
def test_the_rows_rule(rows, sms, want):
    assert vs.triton_rows(rows, sms) == want


def test_which_releases_and_paths_allocate_it():
    gpu = find_gpu("rtx-4090")
    assert vs.triton_buffer_bytes((0, 16, 0), 256, 128_256, gpu) == 0  # no topk_topp_triton.py before 0.17.0
    assert vs.triton_buffer_bytes((0, 17, 0), 256, 128_256, gpu) == 65_667_072
    assert vs.triton_buffer_bytes((0, 19, 0), 256, 128_256, gpu, flashinfer=False) == 65_667_072
    # VLLM_USE_FLASHINFER_SAMPLER=1: TopKTopPSampler.forward_cuda -> flashinfer_sample, no Triton kernel
    assert vs.triton_buffer_bytes((0, 19, 0), 256, 128_256, gpu, flashinfer=True) == 0
    assert vs.triton_buffer_bytes((0, 19, 0), 256, 128_256, find_gpu("gaudi2")) == 0  # no Triton sampler on Gaudi


def test_issue_22_activation_peak_by_hand():
    # vLLM 0.19.0 on one RTX 4090 (vllm serve's defaults below 70 GiB: 2,048 batched tokens, 256 sequences):
    # 14.12 B x 256 x 128,256 (logits, fp32 copy, probabilities, exponential draw; fitted on the training split)
    # = 463,609,528.32 B, + 65,667,072 B (the buffer above), + 2,048 x (0.095 x 14,336 + 2.69 x 4,096) =
    # 25,354,567.68 B (the forward pass): 554,631,168 B
    res = resolve_engine("vllm", "0.19.0").result(LLAMA, find_gpu("rtx-4090"), Deployment(1), Request(context=8192))
    want = 14.12 * 256 * 128_256 + 65_667_072 + 2048 * (0.095 * 14_336 + 2.69 * 4096)
    assert res.settings["overhead_activation_peak"] == int(want) == 554_631_168
    # FlashInfer's sampler allocates no buffer: the same plan is 65,667,072 B lighter
    fi = resolve_engine("vllm", "0.19.0", ["flashinfer_sampler=true"]).result(
        LLAMA, find_gpu("rtx-4090"), Deployment(1), Request(context=8192))
    assert res.settings["overhead_activation_peak"] - fi.settings["overhead_activation_peak"] == 65_667_072


def test_a_profile_without_sm_count_assumes_an_h100_and_says_so():
    # no source found for the H100 NVL's SM count, so its profile leaves sm_count out: 132 is assumed, and said
    h200 = find_gpu("h100-nvl")
    assert h200.sm_count is None
    plan = resolve_engine("vllm", "0.19.0").plan(LLAMA, h200, Deployment(1), Request(context=8192))
    said = [w.message for w in plan.warnings]
    assert any("gives no sm_count: vLLM's rules assumed 132 multiprocessors" in m for m in said), said
    # before 0.17 no rule reads it, nor below 8 dummy rows (the sort path)
    for version, opts in (("0.16.0", []), ("0.19.0", ["max_num_seqs=4"])):
        plan = resolve_engine("vllm", version, opts).plan(LLAMA, h200, Deployment(1), Request(context=8192))
        assert not [w for w in plan.warnings if "sm_count" in w.message], version


# Multiprocessors as the vendors' documents give them, transcribed by hand (an independent table, not the
# profiles): NVIDIA's whitepapers (Volta: V100 80; Turing: T4 40; A100: 108; GA102: RTX 3090 82, RTX A6000 84;
# Ada: RTX 4090 128, RTX 6000 Ada 142; Hopper: H100 SXM5 132, PCIe 114; RTX Blackwell: RTX 5090 170), CUDA cores
# on the datasheets / 128 FP32 cores per SM (A10 9,216; RTX A4500 7,168; L4 7,424; L40 and L40S 18,176; RTX PRO 6000
# 24,064) or / 64 on GA100 (A800 6,912), and ROCm's GPU specs table (MI100 120; MI250X 110 per GCD; MI300X and
# MI325X 304; MI300A 228) and AMD's MI355X datasheet (256).
SM_COUNT = {
    "v100-pcie-16": 80, "v100-pcie-32": 80, "v100-sxm2-16": 80, "v100-sxm2-32": 80, "t4": 2560 // 64,
    "a100-pcie-40": 108, "a100-pcie-80": 108, "a100-sxm-40": 108, "a100-sxm-80": 108, "a800": 6912 // 64,
    "a10": 9216 // 128, "rtx-3090": 82, "rtx-a6000": 84, "rtx-a4500": 7168 // 128, "l4": 7424 // 128,
    "l40": 18176 // 128, "l40s": 18176 // 128, "rtx-4090": 128, "rtx-6000-ada": 142, "h100-sxm": 132,
    "h100-pcie": 114, "gh200": 132, "gh200-144": 132, "rtx-5090": 170,
    "b200": 148, "h200-sxm": 132,  # torch's multi_processor_count in public logs (no datasheet gives them)
    "rtx-pro-6000-workstation": 24064 // 128, "rtx-pro-6000-server": 24064 // 128,
    "gb10": 6144 // 128,  # DGX Spark: 6,144 CUDA cores (NVIDIA's Computex 2025 disclosure), 48 SMs in owners' tools
    # torch's multi_processor_count or a kernel study's measured count, quoted in public code (no datasheet gives them):
    # A10G 80 (TorchCodec's CUDA decoding tutorial output), H20 78, GB200 152, B300 148 ("148 SMs (not 160 spec)")
    "a10g": 80, "h20": 78, "gb200": 152, "b300": 148,
    "l20": 11776 // 128,  # third-party spec pages: 11,776 CUDA cores, 92 RT cores (one an Ada SM)
    "h200-nvl": 132,  # a third-party H200 page: 132 SMs, 16,896 CUDA cores, for both the SXM5 and PCIe (NVL) boards
    "mi100": 120, "mi250x": 110, "mi300x": 304, "mi300a": 228, "mi325x": 304, "mi355x": 256,
    # ROCm@e396b489 docs/reference/gpu-arch-specs.rst, Compute Units (issue 22's RDNA3 cards)
    "radeon-pro-w7900": 96, "rx-7900-xtx": 96,
    "rtx-5080": 10752 // 128,  # issue 22: Notebookcheck's spec page, 10,752 CUDA cores (84 SMs)
    "rtx-a5000": 8192 // 128,  # round 35: NVIDIA's RTX A5000 datasheet, 8,192 CUDA cores
}
# No vendor datasheet or whitepaper with the count was found (kvplan/hardware/profiles/README.md says which)
NO_SOURCE = {"h100-nvl", "h800", "gb300", "gaudi2", "gaudi3"}


def test_bundled_sm_counts_match_the_vendor_tables():
    gpus = load_gpus()
    assert set(SM_COUNT) | NO_SOURCE == set(gpus) and not set(SM_COUNT) & NO_SOURCE
    for key, count in SM_COUNT.items():
        assert gpus[key].sm_count == count, key
    for key in NO_SOURCE:
        assert gpus[key].sm_count is None, key


def test_a_bad_sm_count_is_one_line(tmp_path):
    from pathlib import Path

    from kvplan.core.errors import KvplanError
    from kvplan.hardware.gpu_profile import parse_profile

    text = Path(find_gpu("rtx-4090").path).read_text().replace("sm_count: 128", "sm_count: 0")
    with pytest.raises(KvplanError, match=r"field 'sm_count' must be a positive integer or null, got 0"):
        parse_profile(text, str(tmp_path / "x.yaml"))


def test_overhead_re_exports_the_sampler_rules():
    assert vo.SAMPLER_BYTES == vs.SAMPLER_BYTES and vo.sort_sampler is vs.sort_sampler


def test_check_log_without_gpu_says_which_sm_count_it_took():
    # A v0.19 log (llm-d's Qwen2.5-7B-Instruct at tp 2, training split) with no --gpu: the Triton buffer is counted
    # with an H100's 132 SMs and the output says so; Qwen2.5-7B at S = min(1024, 8192) = 1024 rows: 132 x 152,064 x
    # 4 B = 80,289,792 B = 0.075 GiB
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    log = "tests/fixtures/logs/corpus/llmd-qwen-qwen2-5-7b-instruct-h100-80gb-tp2pp1dp1-8192.log"
    runner = CliRunner()
    bare = json.loads(runner.invoke(app, ["check-log", log, "--model", "qwen2.5-7b-instruct", "--json"]).stdout)
    named = json.loads(runner.invoke(app, ["check-log", log, "--model", "qwen2.5-7b-instruct", "--gpu", "h100",
                                           "--json"]).stdout)
    note = "no --gpu: vLLM's Triton top-k/top-p buffer (0.075 GiB) counted with an H100's 132 multiprocessors"
    assert any(n.startswith(note) for n in bare["notes"]), bare["notes"]
    assert not any("Triton" in n for n in named["notes"])


def test_fewer_than_eight_rows_sort_from_0_17():
    # apply_top_k_top_p sends a batch below 8 rows to apply_top_k_top_p_pytorch (the sort): --max-num-seqs 4 on a
    # 4090 samples 4 rows, so no Triton buffer and 38.14 B per logit: 38.14 x 4 x 128,256 = 19,566,735.36 B, plus the
    # forward pass 2,048 x (0.095 x 14,336 + 2.69 x 4,096) = 25,354,567.68 B
    assert vs.sort_sampler((0, 19, 0), None, 4) and not vs.sort_sampler((0, 19, 0), None, 8)
    assert not vs.sort_sampler((0, 19, 0), True, 4)  # FlashInfer's sampler takes any batch
    peak = vo.activation_peak(LLAMA, 1, 2048, 4, version=(0, 19, 0), gpu=find_gpu("rtx-4090"))
    assert peak == int(38.14 * 4 * 128_256 + 2048 * (0.095 * 14_336 + 2.69 * 4096))



@pytest.mark.parametrize("key, rows", [("a10g", 80), ("h20", 78), ("l20", 92), ("h200-nvl", 132), ("gb200", 152),
                                       ("b300", 148)])
def test_the_parts_given_sm_counts_size_the_buffer_by_their_own(key, rows):
    # issue 22's parts that gained sm_count: vLLM 0.19's dummy sampler run at S = min(1024, 8192) = 1024 rows sizes
    # min(next_pow2(min(SMs, 1024)), SMs) fp32 vocabulary rows: A10G min(128, 80) = 80, H20 min(128, 78) = 78,
    # L20 min(128, 92) = 92, H200 NVL min(256, 132) = 132, GB200 min(256, 152) = 152, B300 min(256, 148) = 148;
    # x 128,256 x 4 B each (an H100's 132 assumed before, and a plan warning said so)
    gpu = find_gpu(key)
    assert vs.triton_rows(1024, gpu.sm_count) == rows
    assert vs.triton_buffer_bytes((0, 19, 0), 1024, 128_256, gpu) == rows * 128_256 * 4
    plan = resolve_engine("vllm", "0.19.0").plan(LLAMA, gpu, Deployment(1), Request(context=8192))
    assert not [w for w in plan.warnings if "sm_count" in w.message], key
