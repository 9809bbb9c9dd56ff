"""check-log's plan at the CUDA-graph settings a vLLM log states (issue 22): the capture shape it profiles, the
max_num_seqs it states or its FULL graphs bound, enforce_eager; each read from the log or said to be assumed.

The line's format is vLLM's own: gpu_model_runner.py profile_cudagraph_memory logs "Profiling CUDA graph memory: %s"
joined from `f"{mode.name}={len(descs)} (largest={descs[0].num_tokens})"` for each mode with graphs, PIECEWISE
first, then FULL (vllm 0.18.0 wheel L5607-5614, 0.21.0 L6063-6070; cudagraph_dispatcher.py 0.21.0 get_capture_descs
L325-349 sorts each mode's descriptors largest first); from 0.23.0 (L6398-6412) an "ENCODER=N (largest=L)" group may
follow. Records used are training records of tests/fixtures/logs/corpus (benchmarks/budget_corpus.py's split).
"""

from __future__ import annotations

import pytest
from conftest import training_log

from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.engines.vllm import cudagraphs as cg
from kvplan.engines.vllm.log_graphs import seqs_bound
from kvplan.sources.catalog import require_in_catalog

A5000 = "lmcache-3430-qwen3-8b-a5000-v021"
SHAPE_A5000 = (("PIECEWISE", 51, 512), ("FULL", 35, 256))
MIB, GIB = 2**20, 2**30


def test_the_a5000_log_states_its_capture_shape():
    """LMCache#3430 (vLLM 0.21.0, RTX A5000): "PIECEWISE=51 (largest=512), FULL=35 (largest=256)". vLLM's default
    sizes (config/vllm.py 0.21.0 L1559-1587) up to 512 are [1, 2, 4] (3) + 8..248 by 8 (31) + 256..512 by 16 (17) = 51;
    up to 256, 3 + 31 + 1 = 35: the default list, FULL graphs to 256."""
    rec = parse_log(training_log(A5000))
    assert rec.graph_shape == SHAPE_A5000
    assert len(cg.capture_sizes(512)) == 3 + 31 + 17 == 51
    assert len([s for s in cg.capture_sizes(512) if s <= 256]) == 3 + 31 + 1 == 35


def test_check_log_prices_the_a5000_graphs_at_the_logged_shape():
    """kvplan's rule at the logged shape: Qwen3-8B's 36 layers x 0.126 MiB = 4.54 MiB a further graph, up to the 2 MiB
    page = 6 MiB; FA3's accumulator at 256 tokens (no GPU given: kept) is 32 splits x 4 B x 256 x 32 heads x 128 =
    128 MiB, + 6 = 134 MiB, below the 209 MiB first PIECEWISE capture; 209 + (50 + 34) x 6 = 713 MiB = 0.70 GiB
    against the printed 0.52 (+33.9%). Before, check-log assumed max_num_seqs 1024 (an 80 GiB GPU's default): FULL
    graphs to 512 (51), accumulator 256 MiB + 6 = 262, 262 + (50 + 50) x 6 = 862 MiB = 0.84 GiB (+61.9%). The log's
    FULL graphs stop at 256, so max_num_seqs was 256..271 (the next size is 272): 1024 is ruled out, 256 planned."""
    rec = parse_log(training_log(A5000))
    model = require_in_catalog("qwen3-8b")
    assert cg.per_graph_cost(model, 36) == 6 * MIB
    assert cg.fa_split_accumulator(model, 1, 256) == 32 * 4 * 256 * 32 * 128 == 128 * MIB
    assert cg.cudagraph_estimate(36, model, 1, 1024, None, shape=SHAPE_A5000) == (209 + 84 * 6) * MIB
    assert cg.cudagraph_estimate(36, model, 1, 1024, None) == (256 + 6 + 100 * 6) * MIB  # the assumed default's
    res = reconcile(rec, model, None, "0.21.0")
    row = next(r for r in res.rows if r.quantity.startswith("CUDA graphs"))
    assert (row.reported, row.predicted) == ("0.52 GiB", "0.70 GiB (estimate)")
    assert row.error == pytest.approx(713 * MIB / (0.52 * GIB) - 1)
    notes = "\n".join(res.notes)
    assert "capture shape from the log: PIECEWISE=51 (largest=512), FULL=35 (largest=256)" in notes
    assert "max_num_seqs 256 inferred" in notes and "256..271" in notes and "default 1024" in notes


def test_seqs_bound_only_where_the_shape_is_vllms_default_list():
    """The bound needs vLLM's default sizes, FULL graphs below the largest capture and no drafter: a drafter's FULL
    sizes count 1 + k tokens a request; FULL graphs up to the largest capture put max_num_seqs at or above it; counts
    off the default list (a user's cudagraph_capture_sizes, LoRA's per-adapter graphs) say nothing of it."""
    assert seqs_bound(SHAPE_A5000, False) == (256, 271)
    assert seqs_bound((("PIECEWISE", 35, 256), ("FULL", 19, 128)), False) == (128, 135)  # 3 + 15 + 1 = 19
    assert seqs_bound(SHAPE_A5000, True) is None
    assert seqs_bound((("PIECEWISE", 51, 512), ("FULL", 51, 512)), False) is None
    assert seqs_bound((("PIECEWISE", 5, 16),), False) is None
    assert seqs_bound((("PIECEWISE", 102, 512), ("FULL", 70, 256)), False) is None  # LoRA: two descriptors a size
    assert seqs_bound((("PIECEWISE", 3, 16), ("FULL", 2, 8)), False) is None  # not [1, 2, 4, 8, 16]'s counts


def test_a_stated_max_num_seqs_and_enforce_eager_are_read_and_said():
    """The EXACT repository's vLLM 0.22.1 server log (training) states `'enforce_eager': True` and `'max_num_seqs': 1`
    in its non-default args dict (log_non_default_args): check-log plans both and says so; eager, vLLM subtracts no
    graph estimate (and prints none), so no shape note."""
    rec = parse_log(training_log("vllm-exact-qwen3-8b-fp16-tp2-lora-v022"))
    assert rec.settings["enforce_eager"] is True and rec.settings["max_num_seqs"] == 1 and not rec.graph_shape
    res = reconcile(rec, require_in_catalog("qwen3-8b"), None, None)
    assert "max_num_seqs 1 (from the log)" in res.notes
    assert any(n.startswith("enforce_eager true (from the log)") for n in res.notes)
    assert not any("CUDA-graph" in n for n in res.notes)


def test_an_encoder_group_is_read_and_said_unpriced():
    """0.23.0+ appends "ENCODER=N (largest=L)" (encoder_cudagraph_manager.token_budgets[-1]); its graphs use a pool of
    their own and are added to the printed total (0.23.0 L6511-6516), which kvplan does not price: it is read, left
    out of the decoder counts, and the note says so. (A line in the source's format; no corpus log prints one.)"""
    line = ("(EngineCore pid=1) INFO 01-01 00:00:00 [gpu_model_runner.py:6412] Profiling CUDA graph memory: "
            "PIECEWISE=51 (largest=512), FULL=35 (largest=256), ENCODER=4 (largest=16384)\n"
            "(EngineCore pid=1) INFO 01-01 00:00:01 [kv_cache_utils.py:1710] GPU KV cache size: 46,368 tokens\n"
            "(EngineCore pid=1) INFO 01-01 00:00:01 [kv_cache_utils.py:1711] Maximum concurrency for 16,384 tokens "
            "per request: 2.83x\n")
    rec = parse_log(line)
    assert rec.graph_shape == (*SHAPE_A5000, ("ENCODER", 4, 16384))
    assert cg.logged_counts(rec.graph_shape) == (51, 35, 256)
    res = reconcile(rec, require_in_catalog("qwen3-8b"), None, "0.23.0")
    assert any("ENCODER graphs" in n and "not priced" in n for n in res.notes)


def test_without_a_shape_line_the_counts_are_kvplans_and_said():
    """The A5000 record with its shape line cut (as a log of 0.20.x excerpted without it): priced at kvplan's counts
    for the max_num_seqs it assumes (1024, an 80 GiB GPU's default: sizes to min(2 x 1024, 512) = 512, FULL ones up to
    1024, so 51 and 51), and the note gives them."""
    text = "\n".join(line for line in training_log(A5000).splitlines() if "Profiling CUDA graph memory" not in line)
    rec = parse_log(text)
    assert rec.graph_shape == ()
    res = reconcile(rec, require_in_catalog("qwen3-8b"), None, "0.21.0")
    assert "max_num_seqs 1024 assumed (the release's default for the GPU; the log does not state it)" in res.notes
    assert any(n.startswith("the log does not print its CUDA-graph capture shape: kvplan's counts at max_num_seqs "
                            "1024, PIECEWISE=51 (largest=512), FULL=51 (largest=512)") for n in res.notes)


def test_the_engine_configs_capture_sizes_are_the_piecewise_graphs():
    """llm-d's Qwen2.5-7B on an H100 (vLLM 0.19.0, training) prints no shape line but the engine-config line's resolved
    `'cudagraph_capture_sizes': [1, 2, 4, 8, ..., 512]` (51 sizes) and `'max_num_seqs': 1024`: PIECEWISE at all 51,
    FULL at the 51 up to 1024. kvplan: 28 layers x 0.126 MiB = 3.53 -> 4 MiB a graph; FA3's accumulator at 512 tokens
    is 32 x 4 B x 512 x 28 heads x 128 = 224 MiB, + 4 = 228 MiB above the 209 MiB constant; 228 + (50 + 50) x 4 =
    628 MiB = 0.61 GiB, the printed 0.61. The same line with a list of [1, 2, 4, 8] (a user's sizes; a line in the
    config's format, no corpus log prints one) gives 4 + 4 graphs: the accumulator at 8 tokens (3.5 MiB) + 4 is below
    the constant, so 209 + (3 + 3) x 4 = 233 MiB = 0.23 GiB."""
    from kvplan.hardware.gpus import find_gpu

    text = training_log("llmd-qwen-qwen2-5-7b-i-h100-80gb-tp1pp1dp1-8192-dtbf16")
    model, h100 = require_in_catalog("qwen2.5-7b-instruct"), find_gpu("h100-sxm")
    rec = parse_log(text)
    assert rec.capture_sizes == tuple(cg.capture_sizes(512)) and not rec.graph_shape
    res = reconcile(rec, model, h100, None)
    row = next(r for r in res.rows if r.quantity.startswith("CUDA graphs"))
    assert (row.reported, row.predicted) == ("0.61 GiB", "0.61 GiB (estimate)")
    assert any(n.startswith("CUDA-graph capture sizes from the log's engine config (51, largest 512), cudagraph_mode "
                            "FULL_AND_PIECEWISE (from the log's engine config; compilation mode 3, VLLM_COMPILE), "
                            "FULL decode graphs up to max_num_seqs 1024") for n in res.notes)
    full = ", ".join(str(s) for s in cg.capture_sizes(512))
    assert f"'cudagraph_capture_sizes': [{full}]" in text
    rec = parse_log(text.replace(f"'cudagraph_capture_sizes': [{full}]", "'cudagraph_capture_sizes': [1, 2, 4, 8]"))
    res = reconcile(rec, model, h100, None)
    row = next(r for r in res.rows if r.quantity.startswith("CUDA graphs"))
    assert row.predicted == "0.23 GiB (estimate)" and 233 * MIB / GIB == pytest.approx(0.2275, abs=1e-4)
    assert any("PIECEWISE=4 (largest=8), FULL=4 (largest=8)" in n for n in res.notes)
