"""A TensorRT-LLM run that turns its piecewise CUDA graph on pays no launch cost per MoE layer in its context steps
(`pmoe`, issue 21).

TensorRT-LLM's PyTorch backend runs a step with context requests eagerly unless `torch_compile_config`
.enable_piecewise_cuda_graph is set; then a context or mixed step of at most the largest `capture_num_tokens` entry is
padded to the next captured count and replayed as CUDA-graph pieces split only at the attention ops, the MoE blocks
inside them (NVIDIA/TensorRT-LLM@05fff03d90c7f5ff23b19d3f25da4018e3d864ad:tensorrt_llm/_torch/compilation/
piecewise_optimizer.py, `piecewise_optimizer` splits at attn_custom_op_inplace / mla_custom_op_inplace;
@1a0dc5f70054f66d892df6a964996fc5ead6f81e:tensorrt_llm/_torch/pyexecutor/model_engine.py `_get_padding_params`).
InferenceX's DeepSeek-R1 scripts capture up to max_num_tokens (SemiAnalysisAI/InferenceX@
ec7bafaae743babbb160a1c7ee9c2a82feaf3f5f:benchmarks/dsr1_fp8_b200_trt.sh), which the corpus writes
`capture_num_tokens_max`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.case_request import case_prefill_graph
from kvplan.bench.running import running
from kvplan.speed import model as speed
from kvplan.speed.fit import Built, _gpu, _spec
from kvplan.speed.terms import TERMS
from conftest import speed_cases

CORPUS = Path(__file__).resolve().parent / "fixtures" / "speed"
NVFP4 = "inferencex-run-21640806486"  # DeepSeek-R1 NVFP4 on B200, TensorRT-LLM 1.2.0rc6.post2
FP8 = "inferencex-run-21484110885"  # DeepSeek-R1 FP8 on B200, the same release


def _case(source: str, point: str):
    return next(c for c in speed_cases()[0] if c.source == source and c.id == point)


def _graphed(case) -> bool:
    return case_prefill_graph(case, _spec(case.model), _gpu(case.gpu))


@pytest.mark.parametrize(("source", "point", "graphed"), [
    (NVFP4, "tp8ep8-1k1k-c64", True),  # piecewise on, captured up to 8,192 = max_num_tokens
    (NVFP4, "tp8ep8-1k8k-c64", False),  # the same layout at 1k / 8k: the script leaves it off, eager
    (FP8, "tp8-8k1k-c256", True),  # max_num_tokens 8,512 (8,192 + 256 + 64 rounded), the script appends it
    (FP8, "tp8-1k1k-c4", False),
])
def test_which_runs_replay_their_context_steps(source, point, graphed):
    assert _graphed(_case(source, point)) is graphed


def test_a_capture_list_short_of_the_step_budget_is_eager():
    # TensorRT-LLM's own default list ends at 3,072 tokens (2^0..2^7, then 256..3,072 by 256): an 8,192-token step
    # runs eagerly; a list not stated at all is not read as covering it
    case = _case(NVFP4, "tp8ep8-1k1k-c64")
    assert _graphed(replace(case, flags={**case.flags, "capture_num_tokens_max": 3072})) is False
    unstated = {k: v for k, v in case.flags.items() if k != "capture_num_tokens_max"}
    assert _graphed(replace(case, flags=unstated)) is False
    assert _graphed(replace(case, flags={**case.flags, "enable_piecewise_cuda_graph": False})) is False


def test_under_attention_dp_a_context_step_replays_only_with_every_rank_prefilling():
    # _get_padding_params (@1a0dc5f7 model_engine.py): under attention DP each rank's num_ctx_requests != 0 is
    # allgathered and the piecewise graph runs only if every rank's holds. InferenceX's dp-attention point (8 ranks,
    # 8,192 captured = max_num_tokens) turns attention_dp_config.enable_balance on, which holds context requests back
    # until every rank has one: replayed. The same run unbalanced has context steps with some rank empty: eager. One
    # rank (dp 1) has no other rank to wait for.
    case = _case("inferencex-run-26016880548", "tp8ep8-dpa-1k1k-c128")
    assert (case.dp, case.flags["enable_attention_dp"], case.flags["attention_dp_enable_balance"]) == (8, True, True)
    assert _graphed(case) is True
    unbalanced = replace(case, flags={**case.flags, "attention_dp_enable_balance": False})
    assert _graphed(unbalanced) is False
    assert _graphed(replace(unbalanced, dp=1)) is True


def test_a_graphed_run_prices_no_moe_launches_and_keeps_the_layers():
    # DeepSeek-R1: 61 layers, the first 3 dense (first_k_dense_replace), 58 MoE. One 1,000-token prompt within the
    # 8,192-token budget is one context step: eagerly 61 layer launches (`player`) and 58 MoE-block launches (`pmoe`);
    # replayed from the piecewise graph the attention ops still run eagerly a layer, the MoE blocks do not: 61 and 0
    on, off = (Built(_case(NVFP4, p), running) for p in ("tp8ep8-1k1k-c64", "tp8ep8-1k8k-c64"))
    assert (on.shape.prefill_graph, off.shape.prefill_graph) == (True, False)
    fon, foff = (dict(zip(TERMS, speed.prefill_features(b.shape, 1_000))) for b in (on, off))
    assert (foff["player"], foff["pmoe"]) == (61, 58)
    assert (fon["player"], fon["pmoe"]) == (61, 0)
