"""A prefill step SGLang replays from its CUDA graph pays no launch cost per MoE layer (`pmoe`, issue 21).

From 0.5.10 SGLang captures the extend forward as a piecewise (torch.compile, to 0.5.14) or breakable (0.5.15 on) CUDA
graph, split only at attention, and replays it for any extend batch of at most the captured tokens (the chunked-prefill
size) that asks no logprobs (sgl-project/sglang@f26e4af5816523232a38500361a747fcd96ffca4:python/sglang/srt/
model_executor/piecewise_cuda_graph_runner.py, `PiecewiseCudaGraphRunner.can_run`;
sgl-project/sglang@021301685270ae9865c53e702e51093e677d6421:python/sglang/srt/model_executor/
breakable_piecewise_cuda_graph_runner.py, its module docstring and `_run_forward` with the MoE layers in the forward
context), so the MoE blocks' kernels are not launched one by one from the host. Which models, releases and layouts
keep the graph is kvplan.engines.sglang.prefill_graph's rule, the one its memory reserve already follows.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan import api
from kvplan.bench.case_request import case_prefill_graph
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed import model as speed
from kvplan.speed.fit import _gpu, _spec
from kvplan.speed.plan import plan_shape
from kvplan.speed import terms
from kvplan.speed.terms import TERMS, Shape
from conftest import speed_cases

CORPUS = Path(__file__).resolve().parent / "fixtures" / "speed"


def test_a_graphed_prefill_step_has_no_moe_launch_cost():
    # DeepSeek-V3's shape (61 layers, 61 - 3 = 58 MoE: test_speed_moe_prefill.py): a 20,000-token prompt in
    # 8,192-token chunks is ceil(20,000 / 8,192) = 3 prefill steps, 3 x 58 = 174 MoE layers eagerly, 0 from a graph;
    # the cost per prefill batch (3) and the decode terms are the same either way
    eager = Shape(dense_bytes=0, layers=61, moe_layers=58, bandwidth=1e12)
    graphed = Shape(dense_bytes=0, layers=61, moe_layers=58, bandwidth=1e12, prefill_graph=True)
    fe, fg = (dict(zip(TERMS, speed.prefill_features(s, 20_000))) for s in (eager, graphed))
    assert (fe["pstep"], fe["pmoe"]) == (3, 174)
    assert (fg["pstep"], fg["pmoe"]) == (3, 0)
    assert {k: v for k, v in fe.items() if k != "pmoe"} == {k: v for k, v in fg.items() if k != "pmoe"}


def test_the_step_model_agrees():
    # the simulator's step: pstep 2 ms + pmoe 1 ms x 58 = 60 ms for a step with prompt tokens, eagerly; 2 ms graphed
    coef = [0.0] * len(TERMS)
    coef[TERMS.index("pstep")], coef[TERMS.index("pmoe")] = 0.002, 0.001
    for graph, want in ((False, 0.060), (True, 0.002)):
        s = Shape(dense_bytes=0, layers=61, moe_layers=58, bandwidth=1e12, prefill_graph=graph)
        assert speed.StepModel(s, tuple(coef)).step(1_008, 9, 8_000, 8_008, 1) == pytest.approx(want)
        assert speed.priced(coef, speed.prefill_features(s, 1_000)) == pytest.approx(want)


def _case(source: str, point: str | None):
    return next(c for c in speed_cases()[0] if c.source == source and (point is None or c.id == point))


@pytest.mark.parametrize(("source", "point", "graphed"), [
    # 0.5.16, Qwen3.5-35B-A3B (Qwen3_5MoeForConditionalGeneration) on an H200, tp 1: on the breakable allow-list
    ("sglang-docs-qwen3.5-benchmarks-v0.5.16", "h200-35b-bf16-tp1-c1024", True),
    # 0.5.12, the torch.compile piecewise graph's default (no DP attention, pp 1, CUDA)
    ("inferencex-run-26306422380", None, True),
    # 0.5.9 (on MI355X): enable_piecewise_cuda_graph False by default, before the CUDA rule is asked
    ("inferencex-run-22469096331", None, False),
    # 0.5.15.post1, DeepSeek-V4-Flash under DP attention: the breakable graph is off for DeepSeek-V4
    ("sglang-pr-31363", "h200-fp8-ht-c1024-run2", False),
    # a run that states no release, in the older era by its date (Dec 2024): not told, none
    ("datacrunch-h200-sglang-outputs", None, False),
    # 0.5.14, GLM-5.2 at tp 8 stating --enable-dp-attention without --dp: SGLang turns tc off under DP attention
    # (0.5.13 `server_args.py` L1342-1413); kvplan's engine takes no DP attention at dp 1, so the run is priced eagerly
    ("gpustack-perflab-glm-5.2-h200", "L269-sglang", False),
])
def test_which_corpus_runs_replay_their_prefill(source, point, graphed):
    case = _case(source, point)
    assert case_prefill_graph(case, _spec(case.model), _gpu(case.gpu)) is graphed


def test_an_unstated_release_reads_as_its_era():
    # the current era's run on "main branch (as stated)": the current release's rule (Nemotron 3 Ultra, a hybrid
    # Nemotron-H, keeps the breakable graph at 0.5.23: off in 0.5.17 only); the older era's: not told
    ultra = _case("sglang-docs-nemotron3-ultra", "nvfp4-tp4-c256")
    assert case_prefill_graph(ultra, _spec(ultra.model), _gpu(ultra.gpu)) is True
    ultra = replace(ultra, era="sglang<0.5.14")
    assert case_prefill_graph(ultra, _spec(ultra.model), _gpu(ultra.gpu)) is False


def test_a_stated_off_switch_is_read():
    case = _case("sglang-docs-qwen3.5-benchmarks-v0.5.16", "h200-35b-bf16-tp1-c1024")
    case = replace(case, flags={**case.flags, "disable_piecewise_cuda_graph": True})
    assert case_prefill_graph(case, _spec(case.model), _gpu(case.gpu)) is False


@pytest.mark.parametrize(("version", "graphed"), [("0.5.16", True), ("0.5.9", False)])
def test_a_plan_reads_the_graph_its_engine_keeps(version, graphed):
    # the same rule through SGLang's request step (Request.prefill_graph) into the plan's Shape: Qwen3.5-35B-A3B on an
    # H200 keeps the breakable graph at 0.5.16 (on its allow-list), none at 0.5.9 (before 0.5.10's default)
    plan = api.plan("qwen3.5-35b-a3b", "h200", context="8k", engine="sglang", engine_version=version)
    assert plan.request.prefill_graph is graphed
    spec = find_in_catalog("qwen3.5-35b-a3b")
    assert plan_shape(plan, spec, find_gpu("h200"), "sglang", version).prefill_graph is graphed


def test_the_roofline_ignores_the_prefill_graph():
    # the graph moves only the `pmoe` feature (above); roofline_of reads weights, kv, gemm, attn and experts,
    # TERMS[:5], so kvplan.speed.terms.bound need not turn it off: the same roofline, graphed or not
    assert TERMS.index("pmoe") >= 5
    eager = Shape(dense_bytes=10**9, layers=61, moe_layers=58, bandwidth=1e12, bf16_rate=1e15, gemm_rate=1e15)
    graphed = replace(eager, prefill_graph=True)
    assert terms.bound(graphed).prefill_graph
    for args in ((20_000, 1, 20_000, 0), (8, 8, 8_000, 64_000)):
        assert terms.roofline(graphed, *args) == terms.roofline(eager, *args) > 0
