"""llama-bench's micro-batch as llama.cpp runs it: -ub clamped to -b (kvplan.speed.ggml.micro_batch).

llama_context's constructor sets `n_ubatch = min(n_batch, n_ubatch)` (ggml-org/llama.cpp@4c7103b9
src/llama-context.cpp:101) and llama-bench's default -b is 2048 (`cmd_params_defaults`, ggml-org/llama.cpp@050fc7f3
tools/llama-bench/llama-bench.cpp), while its table and JSON print the -ub asked (`test`'s `n_ubatch = inst.n_ubatch`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.bench.llamabench import parse_rows
from kvplan.speed.ggml import micro_batch
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def test_an_ubatch_above_the_batch_runs_at_the_batch():
    assert micro_batch(4096, None) == 2048  # -ub 4096 at the default -b 2048: min(2048, 4096)
    assert micro_batch(4096, 8192) == 4096  # -b 8192 stated: min(8192, 4096)
    assert micro_batch(512, None) == 512  # the defaults: min(2048, 512)
    assert micro_batch(128, 64) == 64  # -b 64 -ub 128: min(64, 128)


def test_the_mi100_ub4096_point_of_llamacpp_14624_reads_2048_token_micro_batches():
    """IMbackK's MI100 table (llama.cpp#14624) gives -ub 256 ... 4096 with no -b: the 4096 row ran at 2048, so its
    pp4096 is two micro-batches of 2048 tokens, as the ub2048 row's."""
    cases, _ = speed_cases()
    ub = {c.id: c.load.ubatch for c in cases if c.source == "llamacpp-pr-14624"}
    if not ub:
        pytest.skip("llama.cpp#14624 / #6017 not in the corpus")
    assert ub["llama7b-q4_0-ub4096-pp4096"] == 2048
    assert ub["llama7b-q4_0-ub2048-pp4096"] == 2048
    assert ub["llama7b-q4_0-ub1024-pp4096"] == 1024


def test_a_llama_bench_json_row_states_the_tokens_a_step_it_ran():
    """`kvplan bench` simulates a llama-bench file's test at its tokens a step (Settings.max_tokens): the clamped
    micro-batch, not the printed -ub."""
    row = {"model_filename": "m.gguf", "n_batch": 2048, "n_ubatch": 4096, "n_prompt": 4096, "n_gen": 0,
           "n_depth": 0, "avg_ts": 1722.21}
    (run,) = parse_rows(json.loads(json.dumps([row])))
    assert run.settings.max_tokens == 2048  # min(2048, 4096)
    (run,) = parse_rows([{**row, "n_batch": 8192}])
    assert run.settings.max_tokens == 4096  # min(8192, 4096)
    (run,) = parse_rows([{k: v for k, v in row.items() if k != "n_ubatch"}])
    assert run.settings.max_tokens is None  # not stated: not invented
