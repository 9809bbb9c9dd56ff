"""vLLM's V2 model runner at start-up in 0.30-0.33, read from the wheels (pip download vllm==0.30.0 ... 0.33.0).

Golden figures come from the sources, never from kvplan:
* the dummy sampler run keeps the model-dtype logits only from 0.28.0 (gpu/sample/sampler.py 0.30.0 L220-221,
  0.32.0 L238-239: no row needs processing, no fp32 copy): 2 B per logit;
* 0.33.0 samples again with SamplingParams.for_sampler_warmup() (gpu/model_runner.py L993-1015): the fp32 copy
  (4 B) and, in FlashInfer's top_k_top_p_sampling_from_logits (flashinfer-python 0.7.2.post1 sampling.py
  L1795-1796, top_k_mask_logits L502), two more fp32 tensors (8 B): 14 B per logit; without FlashInfer the
  Triton top-k/top-p (topk_topp_sampler.py L501-521) with its buffer of min(next_pow2(min(SMs, rows)), SMs) fp32
  vocabulary rows (topk_topp_triton.py L1690-1698): 6 B per logit and the buffer;
* ROCm keeps DeepseekV32, DeepseekV4 and, from 0.30.0, GlmMoeDsa on V1 (config/vllm.py 0.30.0 L73-75), no
  architecture from 0.32.0 (use_v2_model_runner L703-739);
* the CUDA-graph estimate is profiled on ROCm from 0.26.0 (gpu_worker.py 0.26.0 L495-503 is_cuda_alike; 0.25.0
  L479 is_cuda).
"""

from __future__ import annotations

from kvplan.engines.vllm import overhead, runner
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

LOGITS = 1024 * 128_256  # Llama 3.1 8B: S = min(max_num_seqs 1024, max_num_batched_tokens 8192) rows x vocab


def _sampler(version: tuple[int, ...], gpu: str = "h100", flashinfer: bool | None = None) -> int:
    """The sampler's share of the V2 activation peak: the last stage's peak less a middle stage's (no sampler)."""
    m, g = find_in_catalog("llama-3.1-8b"), find_gpu(gpu)
    peak = [overhead.activation_peak(m, 1, 8192, 1024, last, version, g, flashinfer, v2=True)
            for last in (True, False)]
    return peak[0] - peak[1]


def test_v2_sampler_0_30_to_0_32_keeps_the_logits_only():
    # 2 B x 1024 x 128,256 = 262,668,288 B on each release
    for v in ((0, 30, 0), (0, 31, 0), (0, 32, 0)):
        assert abs(_sampler(v) - 2 * LOGITS) <= 1 and 2 * LOGITS == 262_668_288


def test_v2_sampler_0_33_warmup_pass():
    # H100 (capability 9.0, 132 SMs): FlashInfer's sampler, (2 + 4 + 8) x 131,334,144 = 1,838,678,016 B
    assert abs(_sampler((0, 33, 0)) - 1_838_678_016) <= 1
    # A log saying FlashInfer's sampler is off: Triton, 6 x 131,334,144 = 788,004,864 B plus 132 rows (next_pow2(132)
    # = 256, capped at 132 SMs) x 128,256 x 4 B = 67,719,168 B: 855,724,032 B
    assert abs(_sampler((0, 33, 0), flashinfer=False) - 855_724_032) <= 1
    # MI300X (ROCm, 304 compute units): never FlashInfer; 788,004,864 + 304 x 128,256 x 4 (155,959,296) = 943,964,160
    assert abs(_sampler((0, 33, 0), "mi300x") - 943_964_160) <= 1


def _budget(version: str) -> int:
    m, g = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    st = vllm_settings(m, g, Deployment(), Request(context=8192), version)
    return sum(overhead.overhead_terms(m, Deployment(), st).values())


def test_kv_budget_0_33_loses_the_warmup_pass():
    # Llama 3.1 8B on an H100, 8k context, V2 on both: 0.33.0's non-KV terms exceed 0.32.0's by the sampler alone,
    # 1,838,678,016 - 262,668,288 = 1,576,009,728 B (1.468 GiB) less KV budget
    assert abs((_budget("0.33.0") - _budget("0.32.0")) - 1_576_009_728) <= 2


def test_rocm_v1_architectures_by_release():
    glm, ds, mi300x, h100 = (find_in_catalog("glm-5"), find_in_catalog("deepseek-v3.2"), find_gpu("mi300x"),
                             find_gpu("h100"))
    assert runner.runs_v2(glm, (0, 29, 0), mi300x)  # not in 0.29.0's list (L71-73)
    assert not runner.runs_v2(glm, (0, 30, 0), mi300x) and not runner.runs_v2(glm, (0, 31, 0), mi300x)
    assert runner.runs_v2(glm, (0, 30, 0), h100)
    assert not runner.runs_v2(ds, (0, 31, 0), mi300x) and runner.runs_v2(ds, (0, 32, 0), mi300x)
    assert runner.runs_v2(glm, (0, 33, 0), mi300x)
    assert "GlmMoeDsaForCausalLM" in runner.runner_note(glm, (0, 30, 0), mi300x)


def test_rocm_subtracts_the_graph_estimate_from_0_26():
    # V1 runner (Qwen3-30B-A3B, MoE not listed in 0.25-0.28) on an MI300X with graphs on
    moe, mi300x = find_in_catalog("qwen3-30b-a3b"), find_gpu("mi300x")
    assert not runner.estimate_subtracted(moe, (0, 25, 0), mi300x, eager=False)
    assert runner.estimate_subtracted(moe, (0, 26, 0), mi300x, eager=False)
    assert runner.estimate_subtracted(find_in_catalog("llama-3.1-8b"), (0, 33, 0), mi300x, eager=False)
    assert not runner.estimate_subtracted(moe, (0, 33, 0), mi300x, eager=True)


def test_sm_count_asked_where_0_33_reads_it():
    # 0.33's warmup pass reads the SM count where no log names the sampler: FlashInfer's needs more than 16 SMs on
    # NVIDIA (132 assumed: it runs), the Triton buffer is sized by it on AMD; a log saying FlashInfer ran reads
    # nothing; 0.32 reads it nowhere (no top-k/top-p in its dummy run)
    import dataclasses

    from kvplan.engines.vllm.sampler import v2_capability_read, v2_sm_count_missing
    nvidia = dataclasses.replace(find_gpu("h100"), sm_count=None)
    amd = dataclasses.replace(find_gpu("mi300x"), sm_count=None)
    assert v2_sm_count_missing((0, 33, 0), nvidia) and v2_sm_count_missing((0, 33, 0), amd)
    assert not v2_sm_count_missing((0, 33, 0), nvidia, flashinfer=True)
    assert not v2_sm_count_missing((0, 32, 0), amd) and not v2_sm_count_missing((0, 32, 0), nvidia)
    assert v2_capability_read((0, 33, 0), nvidia) and not v2_capability_read((0, 33, 0), amd)
    assert not v2_capability_read((0, 33, 0), nvidia, flashinfer=False)
    # with 132 SMs and capability 8.0 assumed, FlashInfer's sampler: 14 B a logit, as on a full H100 profile
    m = find_in_catalog("llama-3.1-8b")
    peaks = [overhead.activation_peak(m, 1, 8192, 1024, last, (0, 33, 0), nvidia, v2=True) for last in (True, False)]
    assert abs(peaks[0] - peaks[1] - 14 * LOGITS) <= 1


def test_a_log_saying_flashinfer_sampling_is_off_is_read():
    # topk_topp_sampler.py 0.29.0 L69-72 / 0.33.0 L156-160: "FlashInfer top-p/top-k sampling unavailable: %s; falling
    # back."; L46-49 / L120-125 "... disabled via VLLM_USE_FLASHINFER_SAMPLER=0." (hand-written around that text)
    from kvplan.engines.logparse import parse_log
    log = ("(EngineCore_DP0 pid=4188) INFO 11-03 09:14:10 [core.py:93] Initializing a V1 LLM engine (v0.33.0) with "
           "config: model='meta-llama/Llama-3.1-8B-Instruct', max_seq_len=8192, tensor_parallel_size=1\n"
           "(EngineCore_DP0 pid=4188) INFO 11-03 09:15:02 [gpu_worker.py:773] Available KV cache memory: 52.00 GiB\n")
    off = ("(EngineCore_DP0 pid=4188) WARNING 11-03 09:14:20 [topk_topp_sampler.py:156] FlashInfer top-p/top-k "
           "sampling unavailable: top-k masking requires more than 16 SMs; device has 16; falling back.\n")
    assert parse_log(off + log).settings["flashinfer_sampler"] is False
    assert "flashinfer_sampler" not in parse_log(log).settings


def test_v2_still_profiles_the_encoder_0_30_to_0_33():
    # gpu/model_runner.py 0.30.0 L938-955, 0.33.0 L1022-1034: profile_encoder_cache before the text dummy run;
    # Gemma 3 27B: max(8192, 256) tokens x hidden 5,376 x 2 B = 88,080,384 B
    m, g = find_in_catalog("gemma-3-27b"), find_gpu("h100")
    for v in ("0.30.0", "0.33.0"):
        st = vllm_settings(m, g, Deployment(), Request(context=8192), v)
        assert runner.priced_v2(m, st.v, g)
        assert overhead.overhead_terms(m, Deployment(), st)["encoder_profile"] == 88_080_384


def test_check_log_0_30_t4_v2_reconciles():
    # The corpus' 0.30.0 V2 record (training, eslam-ahmed43/llm-lab@0f01b470 logs/vllm_server.log): Qwen2.5-1.5B fp16
    # on a T4. V2's dummy sampler keeps the fp16 logits only (2 B x 256 rows x 151,936 = 77,791,232 B; V1's terms
    # before: 14.12 B a logit + 40 SMs x 151,936 x 4 B), and the log's closing "0.46 GiB for peak activation" is the
    # transient peak plus the 0.34 GiB graph estimate vLLM subtracted (gpu_worker.py 0.30.0 L616-618), so kvplan's
    # row adds its own estimate. Available KV: 8.67 GiB printed; 8.17 before round 33 (-5.7%), 8.63 after v2run33
    # (-0.4%), 8.48 with V2's penalty and grammar states in the 0.27+ budget (v2pen33: 256 x (151,936 + 2 x 4,748)
    # x 4 B = 0.154 GiB, gpu/sample/penalties.py 0.30.0 L32-42, mem_utils.py L312-321). The log's closing line puts
    # 3.24 - 2.98 = 0.26 GiB of consumed memory beside the loaded weights; kvplan's 0.24 non-torch (the V1 0.18+ fit,
    # with its inferred graph-profiling residue, which 0.27+ profiles outside the window) + 0.154 states is 0.39:
    # the gap left (-0.19 GiB, -2.2%) is that constant and the graph estimate (+0.19), not the states.
    from pathlib import Path

    from kvplan.engines.logparse import parse_log
    from kvplan.engines.reconcile import reconcile
    log = Path(__file__).parent / "fixtures/logs/corpus/vllm-llmlab-qwen25-15b-t4-v030.log"
    rec = parse_log(log.read_text())
    assert rec.settings.get("peak_from_summary") and rec.settings.get("flashinfer_sampler") is False
    out = reconcile(rec, find_in_catalog("qwen2.5-1.5b-instruct"), find_gpu("t4"))
    kv = next(r for r in out.rows if r.quantity.startswith("available KV"))
    assert abs(float(kv.predicted.split()[0]) - 8.67) <= 0.20 and kv.ok
    assert any(r.quantity.startswith("peak activation as printed") for r in out.rows)
