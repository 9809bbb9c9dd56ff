"""llama.cpp without FlashAttention: the attention scores' bytes in the kv term (issue 21, round 40), by hand.

llama.cpp's graph without FlashAttention (ggml-org/llama.cpp@00395eb285c7c6821ff372e3ca41dae9da33c2c7
src/llama-graph.cpp `build_attn_mha`) writes K.Q in F32 ([n_kv, n_tokens, n_head]), softmaxes it in place of a new
tensor and multiplies V by it through batched cuBLAS, which converts the F32 scores to F16 first (ggml-org/ggml@c1afe76e
src/ggml-cuda/ggml-cuda.cu:1857-1870 and :2052-2055): 4 written + 4 read + 4 written + 4 read + 2 written + 2 read =
20 bytes a score. Each micro-batch scores every cell of the cache view it sees, its own later tokens too.

Llama-2-7B: 32 layers of 32 query heads of 128: 524,288 attention FLOPs a query-key pair (4 x 32 x 128 x 32) and
20 x 32 x 32 = 20,480 bytes of scores a pair, 20,480 / 524,288 = 5 / 128 bytes a FLOP.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.ggml import materializes_scores, score_bytes_per_flop
from kvplan.speed.model import StepModel, decode_features, prefill_features
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import TERMS
from conftest import speed_cases

SPEC = find_in_catalog("llama-2-7b-hf")
FIXTURES = Path(__file__).parent / "fixtures" / "speed"
KV = TERMS.index("kv")


def test_a_run_without_flashattention_as_stated_or_by_its_builds_default():
    assert materializes_scores({"fa": 0}, "2026-04-25")  # stated off
    assert materializes_scores({"flash_attn": "off"}, None)
    assert not materializes_scores({"fa": 1}, "2024-01-10")  # stated on, before the default changed
    assert not materializes_scores({"flash_attn": "auto"}, "2025-07-22")
    # unstated: llama-bench's own default `flash_attn` { false } until llama.cpp#23714 (commit aa46bda89, in a build of
    # 2026-06-12), auto since; llama.cpp#15434 (2025-08-30) changed the other tools' default, not llama-bench's (its
    # b8407 build of March 2026 printed `-fa, --flash-attn <0|1> (default: 0)`)
    assert materializes_scores({"ngl": 99}, "2025-07-22")
    assert materializes_scores({}, "2025-09-05")  # llama.cpp#15802's mmvq rows: after #15434, still llama-bench's off
    assert materializes_scores({}, "2026-05-28")  # #23714's review still asking for the switch
    assert not materializes_scores({}, "2026-06-12")
    assert not materializes_scores({}, None)  # no date: the current build


@pytest.mark.parametrize("source", ["llamacpp-pr-17505", "llamacpp-pr-22880"])
def test_a_flashattention_kernels_own_table_is_read_with_it(source):
    # #17505 (CUDA mma FA, Volta) and #22880 (RDNA3 mma FA) benchmark their FlashAttention kernels, before and after,
    # while llama-bench's default was off: their fixtures infer fa 1, and no point of theirs is priced without it
    cases = [c for c in speed_cases()[0] if c.source == source]
    assert cases and not any(materializes_scores(c.flags, c.date) for c in cases)


def test_score_bytes_per_attention_flop_of_llama_2_7b():
    mi100 = find_gpu("mi100")
    s = shape_for(SPEC, mi100, engine="llama.cpp", weight_dtype="q4_0", date="2025-07-22")
    assert s.attn_flops_per_pair == 524_288  # 4 x 32 heads x 128 x 32 layers
    assert score_bytes_per_flop(SPEC, 1, s.attn_flops_per_pair) == 5 / 128  # 20 x 32 x 32 = 20,480 B a pair
    assert s.score_bytes_per_flop == 0.0  # a Shape carries them only where the corpus reads the run so


def test_a_4096_token_prompt_in_1024_token_micro_batches_on_the_mi100():
    # llama.cpp#14624's pp4096 at -ub 1024 (MI100, before FlashAttention was the default): micro-batch j of 4 scores
    # 1,024 queries against j x 1,024 cells, 1,024^2 x (1 + 2 + 3 + 4) = 10,485,760 scores a head a layer;
    # x 32 heads x 32 layers x 20 B = 214,748,364,800 B, at the profile's 779.229 GB/s (FluidX3D) 0.275590 s
    mi100 = find_gpu("mi100")
    s = shape_for(SPEC, mi100, engine="llama.cpp", weight_dtype="q4_0", date="2025-07-22")
    s = replace(s, kv_bytes_per_token=0)  # the scores alone in the kv term
    with_scores = replace(s, score_bytes_per_flop=5 / 128)
    assert prefill_features(s, 4096, 0.0, 1024, request=0.0)[KV] == 0.0
    got = prefill_features(with_scores, 4096, 0.0, 1024, request=0.0)[KV]
    assert got == pytest.approx(214_748_364_800 / 779_229_000_000, rel=1e-12)
    assert got == pytest.approx(0.275590, abs=1e-6)


def test_a_decode_step_scores_its_one_query_against_the_cache():
    # tg at depth 4,096: one query a step, 4,097 cells (the cache and its own), no masked pairs:
    # 4,097 x 32 x 32 x 20 B = 83,906,560 B a step, 0.107679 ms at 779.229 GB/s
    mi100 = find_gpu("mi100")
    s = replace(shape_for(SPEC, mi100, engine="llama.cpp", weight_dtype="q4_0"), kv_bytes_per_token=0,
                score_bytes_per_flop=5 / 128)
    assert decode_features(s, 1, 4096)[KV] == pytest.approx(83_906_560 / 779_229_000_000, rel=1e-12)


def test_the_simulators_folded_step_refuses_a_shape_with_scores():
    s = replace(shape_for(SPEC, find_gpu("mi100"), engine="llama.cpp", weight_dtype="q4_0"),
                score_bytes_per_flop=5 / 128)
    with pytest.raises(ValueError, match="materialized attention scores"):
        StepModel(s, (1.0,) * len(TERMS))
