"""AWQ's own kernel forced (vLLM's --quantization awq): the fp16 weight copy its first CUDA-graph capture holds
(issue 22).

The rule is vLLM's (0.19.0 wheel): `awq_marlin.py` L248-256 keeps AWQConfig where the user asks for `awq` ("so forcing
awq"), and AWQConfig's apply dequantizes the whole weight and multiplies with torch.matmul from 256 tokens a step
(`awq.py` L268-273). The record is a training record of the memory corpus (kuuroooo/MindSafe@0083e2df
logs/vllm_server.log: Meta-Llama-3.1-70B-Instruct-AWQ-INT4, tp 2, --quantization awq, a 40 GB A100 inferred; its
lines "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)" and "Estimated CUDA graph
memory: 1.88 GiB total").
"""

from __future__ import annotations

import dataclasses

import pytest
from conftest import training_log

from kvplan.core.errors import KvplanError
from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.engines.vllm import awq_dequant, cudagraphs as cg
from kvplan.hardware.gpus import find_gpu
from kvplan.model.spec import Quantization
from kvplan.sources.catalog import require_in_catalog

A100_AWQ = "vllm-mindsafe-llama31-70b-awq-tp2-a100"
SHAPE = (("PIECEWISE", 51, 512), ("FULL", 35, 256))
MIB, GIB = 2**20, 2**30


def test_the_largest_dequantized_linear_of_a_rank():
    """Llama-3.1-70B at tp 2: gate_up is 8,192 x 2 x 28,672 / 2 = 234,881,024 fp16 elements = 448 MiB; qkv is 8,192 x
    (64 + 2 x 8) x 128 / 2 = 41,943,040, smaller. Below 256 tokens, or where Marlin runs: nothing."""
    model = require_in_catalog("llama-3.1-70b")
    assert awq_dequant.largest_linear(model, 2) == 8192 * 2 * 28672 // 2 == 234_881_024
    assert awq_dequant.dequant_bytes(model, 2, 512, True) == 448 * MIB
    assert awq_dequant.dequant_bytes(model, 2, 248, True) == 0  # the 256-token threshold (awq.py L269)
    assert awq_dequant.dequant_bytes(model, 2, 512, False) == 0


def test_the_a100_record_at_its_logged_shape():
    """kvplan at the log's shape on the A100 (FA2: no split-KV accumulator): 80 layers x 0.126 MiB = 10.08 MiB, up to
    the 2 MiB page = 12 MiB a further graph; before, 209 MiB + (50 + 34) x 12 = 1,217 MiB = 1.19 GiB against the
    printed 1.88 (-36.8%); with the forced kernel's copy, 209 + 448 + 84 x 12 = 1,665 MiB = 1.63 GiB (-13.5%). The
    log's own lines name the forced kernel and the backend; check-log reads `quantization: awq` from its arguments."""
    model, gpu = require_in_catalog("llama-3.1-70b"), find_gpu("a100-sxm-40")
    assert cg.per_graph_cost(model, 80, "int4") == 12 * MIB
    before = cg.cudagraph_estimate(80, model, 2, 256, gpu, "int4", SHAPE)
    after = cg.cudagraph_estimate(80, model, 2, 256, gpu, "int4", SHAPE, awq_forced=True)
    assert (before, after) == ((209 + 84 * 12) * MIB, (209 + 448 + 84 * 12) * MIB)
    assert round(after / (1.88 * GIB) - 1, 3) == -0.135
    text = training_log(A100_AWQ)
    assert "specified quantization=awq explicitly, so forcing awq" in text and "Using FlashAttention version 2" in text
    res = reconcile(parse_log(text), model, gpu, "0.19.0", weight_dtype="int4")
    row = next(r for r in res.rows if r.quantity.startswith("CUDA graphs"))
    assert (row.reported, row.predicted) == ("1.88 GiB", "1.63 GiB (estimate)")
    assert any("first capture (512 tokens) holds a rank's largest linear, 448 MiB" in n for n in res.notes)


def test_a_plan_forcing_the_kernel_prices_it_and_says_so():
    """A plan with engine option awq_kernel=awq at 0.20.1 (the estimate subtracted): 448 MiB more overhead a GPU than
    Marlin's, and the plan's graph notes say why."""
    from kvplan import api
    from kvplan.engines.vllm.engine import Vllm
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request

    common = dict(gpu="a100-sxm-40", tp=2, engine="vllm", engine_version="0.20.1", weight_dtype="int4", context=8192)
    marlin = api.plan("llama-3.1-70b", **common)
    forced = api.plan("llama-3.1-70b", engine_opts={"awq_kernel": "awq"}, **common)
    assert forced.overhead_bytes_per_gpu - marlin.overhead_bytes_per_gpu == 448 * MIB
    model, dep = require_in_catalog("llama-3.1-70b"), Deployment(2)
    st = Vllm("0.20.1", {"awq_kernel": "awq"}, {}).settings(model, find_gpu("a100-sxm-40"), dep,
                                                          Request(context=8192, weight_dtype="int4"))
    notes = "\n".join(cg.graph_notes(model, dep, st))
    assert "AWQ's own kernel (awq_kernel awq" in notes and "first capture (512 tokens)" in notes and "448 MiB" in notes


@pytest.mark.parametrize("model_name, version, weight, why", [
    ("llama-3.1-70b", "0.25.0", "int4", "through vLLM 0.23 only"),
    ("qwen3-8b", "0.20.1", None, "needs 4-bit AWQ weights"),
    ("qwen3-30b-a3b", "0.9.2", "int4", "MoE models from vLLM 0.10.0 only"),
    ("deepseek-v2-lite", "0.20.1", "int4", "plain attention layers only"),
])
def test_refused_where_kvplan_did_not_read_the_path(model_name, version, weight, why):
    """Refused with a reason: AutoAWQConfig (0.24.0+) not read, weights that are not 4-bit AWQ, a MoE model before
    0.10.0 (AWQConfig's FusedMoE branch not read), an MLA model."""
    from kvplan import api

    with pytest.raises(KvplanError, match=why):
        api.plan(model_name, gpu="a100-sxm-80", engine="vllm", engine_version=version, weight_dtype=weight,
                 context=8192, engine_opts={"awq_kernel": "awq"})


def test_the_command_asks_for_the_forced_kernel():
    """An AWQ checkpoint (Llama-3.1-8B's shapes with an AWQ int4 config) planned with awq_kernel=awq: vLLM's command
    carries `--quantization awq`, the flag that forces AWQConfig; without the option it carries no --quantization
    (vLLM then picks awq_marlin itself)."""
    import dataclasses

    from kvplan.engines.vllm.engine import Vllm
    from kvplan.model.spec import Quantization
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request

    base = require_in_catalog("llama-3.1-8b")
    awq = dataclasses.replace(base, quantization=Quantization(method="int4", group_size=128, quant_method="awq"))
    gpu = find_gpu("a100-sxm-80")
    for opts, flag in (({"awq_kernel": "awq"}, ["--quantization", "awq"]), ({}, None)):
        eng = Vllm("0.20.1", opts, {})
        res = eng.result(awq, gpu, Deployment(), Request(context=8192))
        args = eng.emit_args(res.plan, awq, res.settings, gpu)
        if flag:
            assert args[args.index("--quantization"):args.index("--quantization") + 2] == flag
        else:
            assert "--quantization" not in args


@pytest.mark.parametrize("model_name, version, priced", [
    ("llama-3.1-70b", "0.20.1", True),
    ("llama-3.1-70b", "0.25.0", False),  # AutoAWQConfig from 0.24.0, not read
    ("qwen3-30b-a3b", "0.20.1", True),  # experts on AWQ Marlin MoE / MoeWNA16: attention's copy priced
    ("qwen3-30b-a3b", "0.9.2", False),  # AWQConfig's FusedMoE branch read from 0.10.0 only
    ("deepseek-v2-lite", "0.20.1", False),  # MLA: its projections' forced path not read
])
def test_check_log_takes_a_forced_awq_only_where_it_is_priced(model_name, version, priced):
    """A log stating `quantization: awq` is a real run: check-log prices the forced kernel where kvplan read its path,
    and elsewhere says why not instead of refusing the user's log over an option they never gave."""
    from kvplan.engines.logcheck import Reconciliation
    from kvplan.engines.vllm.reconcile import _forced_awq

    out = Reconciliation("vllm", version, model_name, "a100-sxm-80")
    opts = _forced_awq(out, {"quantization": "awq"}, require_in_catalog(model_name), "int4", version)
    assert (opts == ["awq_kernel=awq"]) is priced
    assert any("not priced" in n for n in out.notes) is not priced


def test_an_ungated_mlp_dequantizes_its_up_projection_alone():
    """StarCoder2-7B (bigcode/starcoder2-7b config.json: hidden 4,608, 36 heads of 128, 4 KV heads, intermediate
    18,432): vLLM's Starcoder2MLP is c_fc (hidden -> I) then c_proj, no gate, so the largest linear at tp 2 is
    c_fc's 4,608 x 18,432 / 2 = 42,467,328 elements (qkv: 4,608 x (4,608 + 2 x 4 x 128) / 2 = 12,976,128), not a
    merged gate_up's twice that."""
    from kvplan.sources.importer import build_spec

    cfg = {"model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"], "hidden_size": 4608,
           "num_hidden_layers": 32, "num_attention_heads": 36, "num_key_value_heads": 4, "intermediate_size": 18432,
           "vocab_size": 49152, "max_position_embeddings": 16384, "torch_dtype": "bfloat16"}
    model = build_spec(cfg, "test/starcoder2-7b", source="test")[0]
    assert awq_dequant.largest_linear(model, 2) == 4608 * 18432 // 2 == 42_467_328


QWEN2_MOE = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 2048,
             "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
             "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
             "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1, "vocab_size": 151936,
             "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
             "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                     "version": "gemm"}}


def test_a_moe_models_copy_is_its_largest_non_expert_linear():
    """AWQConfig sends routed experts to AWQ Marlin MoE or MoeWNA16 (0.19.0 awq.py L107-140), which multiply the int4
    weights in place, so the fp16 copy is the largest other linear. Qwen3-30B-A3B (its config.json: hidden 2,048, 32
    heads of 128, 4 KV heads, no shared expert): qkv 2,048 x (32 x 128 + 2 x 4 x 128) = 10,485,760 elements, o
    4,096 x 2,048 = 8,388,608, so 10,485,760 x 2 B = 20 MiB at tp 1. Qwen1.5-MoE-A2.7B's shapes (its config.json:
    hidden 2,048, 16 heads of 128, 16 KV heads, shared expert 5,632): qkv 2,048 x 3 x 2,048 = 12,582,912, the shared
    expert's gate_up 2,048 x 2 x 5,632 = 23,068,672, the larger; at tp 2, 11,534,336 elements, 22 MiB."""
    from kvplan.sources.importer import build_spec

    qwen3 = require_in_catalog("qwen3-30b-a3b")
    qwen3 = dataclasses.replace(qwen3, quantization=Quantization(method="int4", group_size=128, quant_method="awq"))
    assert awq_dequant.unpriced(qwen3, None, (0, 20, 1)) is None
    assert awq_dequant.largest_linear(qwen3, 1) == 2048 * (32 * 128 + 2 * 4 * 128) == 10_485_760
    assert awq_dequant.dequant_bytes(qwen3, 1, 512, True) == 20 * MIB
    moe = build_spec(QWEN2_MOE, "test/qwen1.5-moe-awq", source="test")[0]
    assert awq_dequant.largest_linear(moe, 2) == 2048 * 2 * 5632 // 2 == 11_534_336
    assert awq_dequant.dequant_bytes(moe, 2, 512, True) == 22 * MIB


def test_a_moe_plan_with_the_forced_kernel_adds_the_copy_to_the_graph_estimate():
    """The option on Qwen3-30B-A3B at int4 and 0.20.1 (one A100 80GB): 20 MiB more a GPU (above)."""
    from kvplan import api

    common = dict(gpu="a100-sxm-80", engine="vllm", engine_version="0.20.1", weight_dtype="int4", context=8192)
    marlin = api.plan("qwen3-30b-a3b", **common)
    forced = api.plan("qwen3-30b-a3b", engine_opts={"awq_kernel": "awq"}, **common)
    assert forced.overhead_bytes_per_gpu - marlin.overhead_bytes_per_gpu == 20 * MIB


def test_a_shared_expert_width_not_exact_is_refused_by_the_plan_and_noted_by_check_log():
    """Issue 22 item 2(3): largest_linear needs a MoE model's shared-expert width exactly (its gate_up may be the
    largest linear: Qwen1.5-MoE-A2.7B's 23,068,672 elements above). Qwen1.5-MoE's counts with one parameter more in
    the shared experts (24 x (3 x 2,048 x 5,632 + 2,048) + 1: neither reading of mlp_width is whole) no longer give
    it; `unpriced` says so, so a plan asking awq_kernel=awq is refused in one line and a check-log run of a log with
    `quantization: awq` notes it and goes on (reconcile._forced_awq), instead of stopping at largest_linear."""
    from types import SimpleNamespace

    from kvplan.engines.vllm.reconcile import _forced_awq
    from kvplan.sources.importer import build_spec

    moe = build_spec(QWEN2_MOE, "test/qwen1.5-moe-awq", source="test")[0]
    assert moe.params.shared_experts == 24 * (3 * 2048 * 5632 + 2048)  # the shared_expert_gate's 2,048 a layer
    loose = dataclasses.replace(moe, params=dataclasses.replace(moe.params, shared_experts=moe.params.shared_experts
                                                                + 1))
    assert awq_dequant.unpriced(moe, None, (0, 20, 1)) is None
    why = awq_dequant.unpriced(loose, None, (0, 20, 1))
    assert why and "shared experts' width" in why
    with pytest.raises(KvplanError, match="does not follow exactly"):
        awq_dequant.forced({"awq_kernel": "awq"}, loose, None, (0, 20, 1))
    out = SimpleNamespace(notes=[])
    assert _forced_awq(out, {"quantization": "awq"}, loose, None, "0.20.1") == []
    assert "not priced" in out.notes[0] and "shared experts' width" in out.notes[0]
    assert _forced_awq(SimpleNamespace(notes=[]), {"quantization": "awq"}, moe, None, "0.20.1") == ["awq_kernel=awq"]
