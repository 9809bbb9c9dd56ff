"""fit under --engine vllm prints vLLM's own "Maximum concurrency" (its worst case, what its log prints) and, on a
sliding-window model, beside it the requests of that length the pool holds while they decode (vLLM V1 frees the blocks
wholly outside a window: 0.10.2 `v1/core/kv_cache_manager.py` L246-253, `single_type_kv_cache_manager.py` L375-391),
each said for what it is, in text and --json.

gpt-oss-120b (its config.json: 36 layers alternating sliding_attention (window 128) and full_attention, 8 KV heads of
64): vLLM 0.33.0 puts them in 2 groups of 18 layers, 16-token blocks."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

RUN = ["fit", "gpt-oss-120b", "--gpu", "h100", "--engine", "vllm", "--engine-version", "0.33.0", "--ctx", "8k"]
PRINTED = "Maximum concurrency for 8,192 tokens per request"
HELD = "requests of 8,192 tokens the pool holds decoding"


def test_both_figures_side_by_side_in_json():
    out = CliRunner().invoke(app, [*RUN, "--json"])
    assert out.exit_code == 0, out.output
    (plan,) = json.loads(out.stdout)["plans"]
    engine = plan["engine"]
    blocks = engine["blocks"]
    # a request of 8,192 tokens as vLLM prints its concurrency: the full group cdiv(8,192, 16) = 512 blocks, the
    # sliding group cdiv(min(127 + max_num_batched_tokens, 8,192), 16) + 1 = 513: 1,025 block ids. While it decodes
    # the sliding group keeps cdiv(127, 16) + 1 = 9 of them: 512 + 9 = 521.
    assert engine["max_concurrency"] == pytest.approx(blocks / 1_025)
    assert engine["resident_concurrency"] == pytest.approx(blocks / 521)
    labels = [f["label"] for f in engine["figures"]]
    assert labels.index(HELD) == labels.index(PRINTED) + 1  # beside it
    assert any("printed worst case" in n and "521 block ids" in n for n in engine["notes"])


def test_the_text_says_which_is_which():
    out = CliRunner().invoke(app, RUN)
    assert out.exit_code == 0, out.output
    assert PRINTED in out.output and HELD in out.output
    assert "Maximum concurrency is vLLM's printed worst case" in out.output


def test_no_second_figure_without_a_window():
    # Llama-3.1-8B has no sliding layer: a decoding request holds what vLLM charges it, one figure
    out = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm", "--ctx", "8k", "--json"])
    engine = json.loads(out.stdout)["plans"][0]["engine"]
    assert "requests of 8,192 tokens the pool holds decoding" not in engine["lines"]
    assert engine["resident_concurrency"] == pytest.approx(engine["max_concurrency"])
