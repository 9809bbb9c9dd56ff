"""vLLM's V2 model runner's per-request x vocabulary sampling states in the KV budget, read from the wheels
(pip download vllm==0.22.0 ... 0.33.0).

Golden figures come from the sources, never from kvplan:
* PenaltiesState allocates output_bin_counts = torch.zeros(max_num_reqs, vocab_size, int32) and prompt_bin_mask =
  torch.zeros(max_num_reqs, cdiv(vocab_size, 32), int32) on the GPU (gpu/sample/penalties.py 0.22.0 L32-42, 0.31.0
  L40-47, 0.33.0 L43-50); StructuredOutputsWorker grammar_bitmask = torch.zeros((max_num_reqs x decode_query_len,
  cdiv(vocab_size, 32)), int32) (gpu/structured_outputs.py 0.27.0 L17-18, 0.33.0 L63-64). Both are built with the
  runner (gpu/model_runner.py 0.27.0 L352, L375; 0.33.0 L495, L528), after the start-up snapshot (gpu_worker.py
  0.27.0 L395, 0.33.0 L541) and before the profile run.
* From 0.27.0 the budget's non-KV memory is the free-memory drop since that snapshot plus the transient peak
  (utils/mem_utils.py 0.27.0 L317-326, 0.33.0 L312-321): the states count. 0.22.0-0.26.0 subtract weights (the
  loader's window, gpu/model_runner.py 0.24.0 L279-298, which the Sampler follows at L325) + torch peak increase
  since the profile began + non-torch increase (gpu_worker.py 0.26.0 L509-516): the states count in none.
"""

from __future__ import annotations

import dataclasses

from kvplan.engines.vllm import overhead
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.engines.vllm.sampler import v2_state_bytes
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def _terms(version: str, **changes) -> dict:
    """Llama 3.1 8B on an H100 at 8k context, vLLM's defaults for the release, with `changes` to its settings."""
    m, g = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    st = dataclasses.replace(vllm_settings(m, g, Deployment(), Request(context=8192), version), **changes)
    return overhead.overhead_terms(m, Deployment(), st)


def test_llama_8b_h100_0_33_states():
    # max_num_seqs 1024 (vLLM's default on an H100), vocab 128,256:
    # output_bin_counts 1024 x 128,256 x 4 = 525,336,576 B
    # prompt_bin_mask and grammar_bitmask 1024 x cdiv(128,256, 32) = 4,008 x 4 = 16,416,768 B each
    # total 525,336,576 + 2 x 16,416,768 = 558,170,112 B
    assert 1024 * 128_256 * 4 == 525_336_576
    assert v2_state_bytes((0, 33, 0), 1024, 128_256) == 558_170_112
    assert _terms("0.33.0")["runner_states"] == 558_170_112
    assert _terms("0.27.0")["runner_states"] == 558_170_112


def test_states_outside_the_budget_before_0_27():
    # 0.22-0.26: weights + torch peak increase + non-torch increase, none of which holds the states
    assert v2_state_bytes((0, 26, 0), 1024, 128_256) == 0
    assert _terms("0.26.0")["runner_states"] == 0
    assert _terms("0.25.0")["runner_states"] == 0


def test_states_scale_with_max_num_seqs_and_vocab():
    # Qwen2.5 vocab 151,936 at 256 sequences: 256 x (151,936 + 2 x 4,748) x 4 = 165,306,368 B
    assert v2_state_bytes((0, 30, 0), 256, 151_936) == 165_306_368
    # a vocabulary not a multiple of 32 rounds the packed masks up: 32,001 -> 1,001 words;
    # 8 x (32,001 + 2 x 1,001) x 4 = 1,088,096 B
    assert v2_state_bytes((0, 33, 0), 8, 32_001) == 1_088_096


def test_v1_runner_has_none():
    # a run that fell back to V1 (check-log's model_runner=v1) has V1's input batch, not these states
    assert _terms("0.33.0", v1_fallback=True)["runner_states"] == 0
    # a smaller --max-num-seqs shrinks them: 256 x (128,256 + 2 x 4,008) x 4 = 139,542,528 B
    assert _terms("0.33.0", max_num_seqs=256)["runner_states"] == 139_542_528


def test_grammar_bitmask_rows_follow_the_drafter():
    # decode_query_len = speculative steps + 1 (gpu/model_runner.py 0.33.0 L439-442): with 3 draft tokens the bitmask
    # keeps 4 rows a request; 1024 x (128,256 + (2 + 3) x 4,008) x 4 = 1024 x 148,296 x 4 = 607,420,416 B
    from kvplan.planning.speculative import Speculative
    assert v2_state_bytes((0, 33, 0), 1024, 128_256, 3) == 607_420_416
    m, g = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    drafted = dataclasses.replace(m, speculative=Speculative(method="mtp", num_speculative_tokens=3))
    st = vllm_settings(m, g, Deployment(), Request(context=8192), "0.33.0")
    assert overhead.overhead_terms(drafted, Deployment(), st)["runner_states"] == 607_420_416
