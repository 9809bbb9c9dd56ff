"""vLLM's V2 model runner at start-up: its profile run's sampler and encoder terms, and the runner the plan names.

Golden figures from the wheels' sources (pip download vllm==0.22.0 ... 0.33.0), never from kvplan:
* the V2 dummy sampler keeps top_k = vocab, top_p = 1.0 (gpu/sample/states.py 0.22.0 L29-32), so top-k/top-p is
  skipped (L94-97); per logit the model-dtype logits (2 B, bf16) and their fp32 copy (gpu/sample/sampler.py 0.22.0
  L132-133: 4 B) stay; 0.26.0 has no copy (L162-168);
* V2 profiles no encoder before 0.27.0 (gpu/model_runner.py 0.25.0 profile_run L648-664; 0.27.0 L702-715 does).
"""

from __future__ import annotations

import dataclasses

from kvplan.engines.vllm import overhead, runner
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def _sampler(name: str, version: tuple[int, ...], v2: bool) -> int:
    """The sampler's share of the activation peak: the last stage's peak less a middle stage's (no sampler)."""
    m, gpu = find_in_catalog(name), find_gpu("h100")
    peak = [overhead.activation_peak(m, 1, 8192, 1024, last, version, gpu, v2=v2) for last in (True, False)]
    return peak[0] - peak[1]


def test_v2_sampler_bytes_per_logit():
    # Llama 3.1 8B, vocab 128,256; S = min(max_num_seqs 1024, max_num_batched_tokens 8192) = 1024 rows:
    # 0.25.0 V2: (2 + 4) x 1024 x 128,256 = 788,004,864 B; 0.26.0 (in place): 2 x 1024 x 128,256 = 262,668,288 B
    assert abs(_sampler("llama-3.1-8b", (0, 25, 0), True) - 788_004_864) <= 1
    assert abs(_sampler("llama-3.1-8b", (0, 26, 0), True) - 262_668_288) <= 1
    # 0.27.0 copies again (L158-159); from 0.28.0 apply_sampling_params returns the logits untouched where no row
    # needs processing (0.28.0 L192-193, 0.29.0 L218-219), and the dummy rows never do: 2 B, 262,668,288 B again
    assert abs(_sampler("llama-3.1-8b", (0, 27, 0), True) - 788_004_864) <= 1
    assert abs(_sampler("llama-3.1-8b", (0, 29, 0), True) - 262_668_288) <= 1
    # V1 on the same release keeps its Triton top-k/top-p buffer (132 SMs -> 132 rows x 128,256 x 4 B = 67,719,168)
    # and the fitted 14.12 B per logit: 14.12 x 131,334,144 = 1,854,438,113 B
    assert abs(_sampler("llama-3.1-8b", (0, 25, 0), False) - (1_854_438_113 + 67_719_168)) <= 1


def _terms(name: str, version: str, gpu: str = "h100") -> dict:
    m, g = find_in_catalog(name), find_gpu(gpu)
    st = vllm_settings(m, g, Deployment(), Request(context=8192), version)
    return overhead.overhead_terms(m, Deployment(), st)


def test_plan_prices_the_runner_it_assumes():
    # Llama 3.1 8B runs V1 by default on 0.21.0 and V2 on 0.25.0 (every dense model); the forward term is the same,
    # so the peaks differ by V1's sampler less V2's: 1,854,438,113 + 67,719,168 - 788,004,864 = 1,134,152,417 B
    drop = _terms("llama-3.1-8b", "0.21.0")["activation_peak"] - _terms("llama-3.1-8b", "0.25.0")["activation_peak"]
    assert abs(drop - 1_134_152_417) <= 2
    # Qwen3-30B-A3B is MoE and not listed: V1 on 0.25.0, its Triton buffer's sm_count still read
    assert not runner.runs_v2(find_in_catalog("qwen3-30b-a3b"), (0, 25, 0), find_gpu("h100"))


def test_v2_profiles_no_encoder_before_0_27():
    # Gemma 3 27B (vision): encoder budget max(8192, 256) tokens x hidden 5,376 x 2 B = 88,080,384 B, on V1 (0.21.0)
    # and on V2 from 0.27.0; 0 on V2 0.25.0 and 0.26.0
    assert _terms("gemma-3-27b", "0.21.0")["encoder_profile"] == 88_080_384
    assert _terms("gemma-3-27b", "0.25.0")["encoder_profile"] == 0
    assert _terms("gemma-3-27b", "0.26.0")["encoder_profile"] == 0
    assert _terms("gemma-3-27b", "0.27.0")["encoder_profile"] == 88_080_384


def test_rocm_keeps_deepseek_v3_2_on_v1_from_0_29():
    # config/vllm.py 0.29.0 L71-73 ROCM_DEFAULT_MRV1_ARCHITECTURES; use_v2_model_runner L653-660
    m = find_in_catalog("deepseek-v3.2")
    assert runner.runs_v2(m, (0, 29, 0), find_gpu("h100")) and not runner.runs_v2(m, (0, 29, 0), find_gpu("mi300x"))
    assert not runner.runs_v2(m, (0, 28, 0), find_gpu("h100"))  # MoE, not listed before 0.29


def test_the_plan_names_its_runner_and_why():
    llama, qwen_moe, gpu = find_in_catalog("llama-3.1-8b"), find_in_catalog("qwen3-30b-a3b"), find_gpu("h100")
    assert runner.runner_note(llama, (0, 21, 0), gpu) is None  # no V2 before 0.22
    v2 = runner.runner_note(llama, (0, 25, 0), gpu)
    assert v2.startswith("model runner: V2 assumed") and "estimate for V2" in v2
    v1 = runner.runner_note(llama, (0, 22, 0), gpu)
    assert v1.startswith("model runner: V1 assumed") and "Qwen3ForCausalLM" in v1
    assert "MoE" in runner.runner_note(qwen_moe, (0, 25, 0), gpu)
    assert "ROCm" in runner.runner_note(find_in_catalog("deepseek-v3.2"), (0, 29, 0), find_gpu("mi300x"))



def test_no_sm_count_asked_where_v2_samples():
    # The V2 sampler sizes no Triton buffer, so a profile without sm_count needs none (V1 on 0.21.0 does)
    llama, bare = find_in_catalog("llama-3.1-8b"), dataclasses.replace(find_gpu("h100"), sm_count=None)
    facts = {v: overhead.missing_facts(llama, Deployment(), vllm_settings(llama, bare, Deployment(),
                                                                          Request(context=8192), v))
             for v in ("0.21.0", "0.25.0")}
    assert "sm_count" in facts["0.21.0"] and "sm_count" not in facts["0.25.0"]


def test_releases_after_0_33_priced_as_v1_and_said():
    # V2's profile run was read through the 0.33.0 wheel, the last release kvplan models (a plan for 0.34.0 is
    # refused); past it the rule falls back to V1's terms and the note says the figure is an estimate
    llama, gpu = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    assert runner.priced_v2(llama, (0, 33, 0), gpu) and not runner.priced_v2(llama, (0, 34, 0), gpu)
    note = runner.runner_note(llama, (0, 34, 0), gpu)
    assert note.startswith("model runner: V2 assumed") and "priced as V1's" in note and "estimate" in note
    assert "priced as V1's" not in runner.runner_note(llama, (0, 33, 0), gpu)


def test_after_0_33_note_says_v1_buffers_counted():
    # priced as V1 past 0.33.x, overhead_terms adds V1's persistent input buffers (0.27+'s runner_buffers) and no V2
    # states: the note says both, so the term is not a silent one (issue 22, round 34)
    llama, gpu = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    st = dataclasses.replace(vllm_settings(llama, gpu, Deployment(), Request(context=8192), "0.33.0"), version="0.34.0")
    terms = overhead.overhead_terms(llama, Deployment(), st)
    assert terms["runner_buffers"] > 0 and terms["runner_states"] == 0
    note = runner.runner_note(llama, (0, 34, 0), gpu)
    assert "persistent input buffers and first block table" in note and "states are not counted" in note
    assert "persistent input buffers" not in runner.runner_note(llama, (0, 33, 0), gpu)
