"""A burst's prefill packed into chunked steps: the sequences each step schedules (model.packed_rows), which the `seq`
term and the LM head count, are the prompts plus the ones a step boundary splits, not every prompt in every step."""

from __future__ import annotations

import pytest

from kvplan.speed.model import packed_rows, prefill_features
from kvplan.speed.terms import TERMS, Shape

SEQ = TERMS.index("seq")


@pytest.mark.parametrize("batch, isl, chunk, want", [
    # 256 prompts of 1,000 tokens in 8,192-token steps (vLLM's chunked prefill: the scheduler fills each step's token
    # budget with waiting prompts in order and chunks the one that overflows it): 256,000 / 8,192 -> 32 steps; the 31
    # boundaries at k x 8,192 fall inside a prompt unless k x 8,192 is a multiple of lcm(1,000, 8,192) = 1,024,000,
    # which none below 256,000 is: 256 + 31 = 287 scheduled sequences (every prompt in every step would be 8,192).
    (256, 1000, 8192, 287),
    # 4 prompts of exactly 8,192 tokens: one a step, each boundary a prompt's end (lcm = 8,192: 3 of them): 4.
    (4, 8192, 8192, 4),
    # 2 prompts of 16,384 in 8,192-token steps: 4 steps, boundaries at 8,192 (inside), 16,384 (an end), 24,576
    # (inside): 2 + 3 - 1 = 4 = 2 prompts x 2 chunks.
    (2, 16384, 8192, 4),
    # one prompt of 20,000: ceil(20,000 / 8,192) = 3 steps, one sequence in each: 3.
    (1, 20000, 8192, 3),
    # 3 prompts of 100 tokens fit one step: 3.
    (3, 100, 8192, 3),
])
def test_packed_rows_by_hand(batch, isl, chunk, want):
    steps = -(-batch * isl // chunk)
    assert packed_rows(batch, isl, chunk, steps) == want


def test_the_seq_term_and_the_head_count_the_packed_rows():
    # the 256 x 1,000 burst above on any shape: the seq feature is 287 (was 256 x 32 = 8,192)
    f = prefill_features(Shape(dense_bytes=1, layers=1, hidden=1, bandwidth=1.0, bf16_rate=1.0, gemm_rate=1.0,
                               head_flops=2.0), 1000, batch=256, chunk=8192, request=0.0)
    assert f[SEQ] == 287
    # the head's 2 FLOPs a row at gemm coefficient 1 and rate 1: part of the gemm feature, 287 rows -> 574 of it
    g = prefill_features(Shape(dense_bytes=1, layers=1, hidden=1, bandwidth=1.0, bf16_rate=1.0, gemm_rate=1.0),
                         1000, batch=256, chunk=8192, request=0.0)
    assert f[TERMS.index("gemm")] - g[TERMS.index("gemm")] == pytest.approx(574.0)
