"""Block-FP8 checkpoints at a tensor parallelism whose dense linear shard is not whole blocks (engines.fp8_linear).

DeepSeek-R1 (the catalog's spec; its config.json: quant_method fp8, weight_block_size [128, 128], hidden 7168, dense
intermediate_size 18432 in the first three layers, 128 heads of qk_nope 128 + rope 64, v 128; one shared expert of
moe_intermediate_size 2048). Each rank's share of the dense MLP is 18432 / tp:
* tp 8: 2304 = 18 x 128, tp 16: 1152 = 9 x 128: whole blocks, planned by every engine;
* tp 32: 576 = 4.5 x 128: refused. vLLM 0.33.0's down_proj (RowParallelLinear, its input split) raises "Weight
  input_size_per_partition = 576 is not divisible by weight quantization block_k = 128." (0.33.0 wheel
  `quantization/utils/fp8_utils.py` L1318-1327); its gate_up_proj (merged) skips the check from 0.14.0
  (`layers/linear.py` L562-581), so vLLM 0.12.0 and SGLang 0.5.23 (`layers/quantization/fp8.py` L600-610) stop at the
  gate_up_proj first: "Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128.".
  The same 576 is the shape in sgl-project/sglang#3345 ("18432 (intermediate_size) / 32 (tp) = 576 which is not
  divisible by 128", 2025-02-18). The MLA projections stay whole at tp 32: q_b 128 x 192 / 32 = 768 = 6 x 128,
  kv_b 128 x 256 / 32 = 1024, o 128 x 128 / 32 = 512; the shared expert's 2048 / 32 = 64 would fail after the dense MLP.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.engines import fp8_linear, resolve_engine
from kvplan.engines.sglang import loaded as sglang_loaded
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import one_line_error

H200 = find_gpu("h200-sxm")
R1 = find_in_catalog("deepseek-r1")
MIMO = find_in_catalog("mimo-v2-flash")
REQ = Request(context=4096)


def _plan(model, engine, version, dep):
    return resolve_engine(engine, version, []).result(model, H200, dep, REQ)


def test_r1_widths_from_the_counts():
    # 1,189,085,184 dense MLP parameters / (3 layers x 3 matrices x 7168) = 18432; 2,554,331,136 shared / (58 x 3 x
    # 7168) = 2048
    names = {(x.name, x.widths) for x in fp8_linear.linears(R1, fp8_linear.Splits(8, 8, 8),
                                                            fp8_linear.Rule("vLLM", "0.12.0"), 8)}
    assert ("down_proj of its dense MLP layers", (18432,)) in names
    assert ("gate_up_proj of its shared experts", (2048, 2048)) in names
    assert ("q_b_proj", (128 * 192,)) in names and ("kv_b_proj", (128 * 256,)) in names
    assert ("o_proj", (128 * 128,)) in names


@pytest.mark.parametrize("engine, version", [("vllm", "0.33.0"), ("vllm", "0.12.0"), ("sglang", "0.5.23")])
@pytest.mark.parametrize("tp", [8, 16])
def test_whole_blocks_plan(engine, version, tp):
    assert _plan(R1, engine, version, Deployment(tp)).plan is not None  # 18432 / 8 = 2304, / 16 = 1152


@pytest.mark.parametrize("engine, version, said", [
    ("vllm", "0.33.0", "the down_proj of its dense MLP layers splits its 18432-wide input over 32 ranks, 18432 / 32 = "
                       "576 each, not a multiple of the checkpoint's 128 x 128 FP8 block (\"Weight "
                       "input_size_per_partition = 576 is not divisible by weight quantization block_k = 128.\")"),
    ("vllm", "0.12.0", "gate_up_proj of its dense MLP layers splits its 18432-wide output over 32 ranks, 18432 / 32 = "
                       "576 each"),
    ("sglang", "0.5.23", "\"Weight output_partition_size = 576 is not divisible by weight quantization block_n = "
                         "128.\""),
])
def test_tp32_refused_with_the_engines_reason(engine, version, said):
    with pytest.raises(KvplanError) as e:
        _plan(R1, engine, version, Deployment(32))
    assert said in e.value.message and "\n" not in e.value.message and e.value.param == "tp"


def test_trtllm_has_no_such_check():
    # FP8BlockScalesLinearMethod.create_weights sizes its scales ceil(out / 128) x ceil(in / 128) and raises nothing
    assert _plan(R1, "trtllm", None, Deployment(32)).plan is not None


def test_cli_one_line():
    r = CliRunner().invoke(app, ["fit", "deepseek-r1", "--gpu", "h200-sxm", "--tp", "32", "--engine", "vllm"])
    one_line_error(r, 2, "18432 / 32 = 576 each")


def test_shared_expert_of_512_at_tp8():
    # Qwen3.6-35B-A3B-FP8's shape (vllm-project/vllm#52915, 2026-08-19: "Weight input_size_per_partition = 64 is not
    # divisible by weight quantization block_k = 128." at tensor parallelism 8): hidden 2048, one shared expert of
    # 512. Here Qwen3-30B-A3B's spec (48 MoE layers, hidden 2048) given block FP8 and a 512-wide gated shared expert:
    # 48 x 3 x 2048 x 512 parameters; 512 / 8 = 64 = 0.5 x 128 refused, 512 / 4 = 128 whole
    base = find_in_catalog("qwen3-30b-a3b")
    model = dataclasses.replace(base, name="shared512", quantization=dataclasses.replace(R1.quantization),
                                params=dataclasses.replace(base.params, shared_experts=48 * 3 * 2048 * 512))
    splits = fp8_linear.Splits
    with pytest.raises(KvplanError, match=r"down_proj of its shared experts splits its 512-wide input over 8 ranks, "
                                          r"512 / 8 = 64 each"):
        fp8_linear.check(model, splits(8, 8, 8), fp8_linear.Rule("vLLM", "0.33.0", merged=False), 8)
    fp8_linear.check(model, splits(4, 4, 4), fp8_linear.Rule("vLLM", "0.33.0", merged=False), 4)


def test_mimo_qkv_merged_rule_by_engine():
    # MiMo-V2-Flash: 64 heads of 192 (v 128); 4 KV heads in its full layers, 8 in its sliding ones. At tp 4 a rank
    # holds 16 x 192 = 3072 q rows and one 192-wide K head (4 / 4): 192 % 128 = 64. A release that checks every
    # part of a merged layer refuses; vLLM from 0.14.0 skips a merged layer with a part not whole blocks
    # (vllm-project/vllm#30836, for this model) and SGLang's mimo_v2.py passes skip_block_quant_check to its qkv_proj.
    # o_proj: 64 x 128 / 4 = 2048 = 16 x 128, whole.
    splits = fp8_linear.Splits(4, 4, 4)
    with pytest.raises(KvplanError, match=r"the k part of the qkv_proj splits its 768-wide output over 4 ranks, "
                                          r"768 / 4 = 192 each"):
        fp8_linear.check(MIMO, splits, fp8_linear.Rule("vLLM", "0.13.0", merged=True), 4)
    # At tp 8 each rank holds a replica of one of the 4 KV heads (192 wide): the message names the replica, not a
    # 1,536-wide K that the checkpoint does not have (4 x 192 = 768).
    with pytest.raises(KvplanError, match=r"the k part of the qkv_proj holds a replica of one of the checkpoint's 4 "
                                          r"KV heads on each of 8 ranks, 192 wide each"):
        fp8_linear.check(MIMO, fp8_linear.Splits(8, 8, 8), fp8_linear.Rule("vLLM", "0.13.0", merged=True), 8)
    fp8_linear.check(MIMO, splits, fp8_linear.Rule("vLLM", "0.14.0", merged=False), 4)
    assert _plan(MIMO, "sglang", "0.5.23", Deployment(4)).plan is not None
    assert _plan(MIMO, "vllm", "0.33.0", Deployment(4)).plan is not None


def test_vllm_013_refuses_mimo_as_a_model_it_lacks():
    # vLLM 0.13.0 (PyPI 2025-12-19T03:30) has no MiMoV2FlashForCausalLM: the model came with vllm-project/vllm#30836
    # ("[Model] Add MiMo-V2-Flash support", merged 2025-12-19), first in 0.14.0. A 0.13.0 plan is refused for the
    # missing model class, not for the block-FP8 rule of a model the release cannot load (issue 22, round 34).
    with pytest.raises(KvplanError, match=r"vLLM 0.13.0 has no MiMoV2FlashForCausalLM \(added in 0.14.0, "
                                          r"vllm-project/vllm#30836") as e:
        _plan(MIMO, "vllm", "0.13.0", Deployment(4))
    assert e.value.param == "engine_version" and "block" not in e.value.message
    with pytest.raises(KvplanError, match=r"has no MiMoV2FlashForCausalLM"):
        _plan(MIMO, "vllm", "0.13.0", Deployment(1))  # at any layout
    assert _plan(MIMO, "vllm", "0.14.0", Deployment(4)).plan is not None


def test_bf16_is_never_checked():
    bf16 = dataclasses.replace(R1, quantization=dataclasses.replace(R1.quantization, method="bf16", group_size=0,
                                                                     quant_method=""))
    fp8_linear.check(bf16, fp8_linear.Splits(32, 32, 32), fp8_linear.Rule("vLLM", "0.33.0"), 32)


def test_a_dense_config_folder(tmp_path):
    # Qwen3-4B's shapes (hidden 2560, intermediate 9728, 32 heads and 8 KV heads of 128; the same in several public
    # copies of its config.json) with a block-FP8 quantization_config, read as a user's folder: 9728 / 4 = 2432 =
    # 19 x 128 plans; 9728 / 8 = 1216 = 9.5 x 128 is refused by vLLM at the down_proj and by SGLang at the gate_up_proj;
    # attention stays whole (32 x 128 / 8 = 512 q rows, 1 x 128 K and V, o 512)
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
              "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": True,
              "torch_dtype": "bfloat16", "hidden_act": "silu",
              "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                      "weight_block_size": [128, 128]}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    runner = CliRunner()
    fit = ["fit", str(tmp_path), "--gpu", "h100", "--json"]
    assert runner.invoke(app, [*fit, "--tp", "4", "--engine", "vllm"]).exit_code == 0
    one_line_error(runner.invoke(app, [*fit, "--tp", "8", "--engine", "vllm"]), 2,
                   "\"Weight input_size_per_partition = 1216 is not divisible by weight quantization block_k = 128.\"")
    one_line_error(runner.invoke(app, [*fit, "--tp", "8", "--engine", "sglang"]), 2,
                   "gate_up_proj of its dense MLP layers splits its 9728-wide output over 8 ranks, 9728 / 8 = 1216")
    assert runner.invoke(app, [*fit, "--tp", "8", "--engine", "trtllm"]).exit_code == 0


@pytest.mark.parametrize("version, refused", [("0.20.0", True), ("0.22.0", True), ("0.25.0", False)])
def test_deepseek_v4_shared_expert_until_vllm_pads_it(version, refused):
    # DeepSeek-V4-Flash's one shared expert: 1,082,130,432 parameters / (43 MoE layers x 3 x 4096) = 2048 wide; at tp 32
    # 2048 / 32 = 64 = 0.5 x 128. vLLM 0.20.0 and 0.22.0 split it as any MLP (DeepseekV4MLP) and raise as for
    # DeepSeek-V4-Pro at tp 16 (3072 / 16 = 192, vllm-project/vllm#42384, 2026-05-12); 0.25.0 pads it to whole blocks a
    # rank (cdiv(2048 / 128, 32) = 1 block of 128 a rank). At tp 16, 2048 / 16 = 128: whole in every release.
    v4 = find_in_catalog("deepseek-v4-flash")
    rule = fp8_linear.Rule("vLLM", version, merged=False, v4_shared=version != "0.25.0")
    if refused:
        with pytest.raises(KvplanError, match=r"down_proj of its shared experts splits its 2048-wide input over 32 "
                                              r"ranks, 2048 / 32 = 64 each"):
            fp8_linear.check_vllm(v4, Deployment(32), version)
    else:
        fp8_linear.check_vllm(v4, Deployment(32), version)
    fp8_linear.check(v4, fp8_linear.Splits(16, 16, 16), rule, 16)


def _fp8(name):
    base = find_in_catalog(name)
    return dataclasses.replace(base, name=f"{name}-fp8", quantization=dataclasses.replace(R1.quantization))


def test_gated_deltanet_widths_from_the_config():
    # Qwen3.5-397B-A17B (the catalog spec, from its config.json): linear_num_key_heads 16, linear_num_value_heads 64,
    # linear_key_head_dim 128, linear_value_head_dim 128: K = 16 x 128 = 2048, V = 64 x 128 = 8192, Hv = 64
    names = {(x.name, x.mode, x.widths) for x in fp8_linear.linears(_fp8("qwen3.5-397b-a17b"), fp8_linear.Splits(
        8, 8, 8), fp8_linear.Rule("SGLang", "0.5.23"), 8)}
    assert ("in_proj_qkvz", fp8_linear.MERGED, (2048, 2048, 8192, 8192)) in names
    assert ("in_proj_ba", fp8_linear.MERGED, (64, 64)) in names
    assert ("out_proj", fp8_linear.ROW, (8192,)) in names


def test_sglang_refuses_qwen35_fp8_in_proj_ba_as_in_the_issue():
    # sgl-project/sglang#19045 (2026-02-21, SGLang 0.5.8.post1, Qwen3.5-397B-A17B-FP8 at --tensor-parallel-size 8):
    # "ValueError: Weight output_partition_size = 8 is not divisible by weight quantization block_n = 128." from
    # validate_block_quant_shapes on Qwen3_5GatedDeltaNet's MergedColumnParallelLinear: in_proj_ba's parts are
    # [Hv, Hv] = [64, 64] (0.5.23 wheel models/qwen3_5.py L668), 64 / 8 = 8. in_proj_qkvz's parts stay whole:
    # 2048 / 8 = 256, 8192 / 8 = 1024; out_proj 8192 / 8 = 1024.
    with pytest.raises(KvplanError) as e:
        _plan(_fp8("qwen3.5-397b-a17b"), "sglang", "0.5.23", Deployment(8))
    assert ("the b part of the in_proj_ba splits its 64-wide output over 8 ranks, 64 / 8 = 8 each" in e.value.message
            and "\"Weight output_partition_size = 8 is not divisible by weight quantization block_n = 128.\""
            in e.value.message)


def test_vllm_qwen35_merged_parts_skip_the_check():
    # vLLM 0.17.0+ builds Qwen3.5's in_proj_ba as MergedColumnParallelLinear([Hv] * 2) (0.27.0
    # layers/mamba/gdn/qwen_gdn_linear_attn.py create_ba_proj): a merged layer with a part not whole blocks skips the
    # check from 0.14.0 (vllm-project/vllm#30836), so 64 / 8 = 8 is not refused; out_proj 8192 / 8 = 1024 is whole
    assert _plan(_fp8("qwen3.5-397b-a17b"), "vllm", "0.33.0", Deployment(8)).plan is not None


def test_vllm_qwen3_next_one_part_in_proj_ba():
    # Qwen3-Next-80B-A3B (linear_num_value_heads 32): vLLM builds in_proj_ba as one output of 2 x 32 = 64
    # (ColumnParallelLinear, 0.16.0 models/qwen3_next.py L304; one-part MergedColumnParallelLinear in 0.27.0's
    # interleaved layout), checked as any column layer: 64 / 4 = 16, not whole. Its shared expert (512 wide; its count
    # holds the shared_expert_gate: 151,093,248 = 48 x (3 x 2048 x 512 + 2048)) is 512 / 4 = 128, whole.
    with pytest.raises(KvplanError, match=r"in_proj_ba splits its 64-wide output over 4 ranks, 64 / 4 = 16 each"):
        _plan(_fp8("qwen3-next-80b-a3b-thinking"), "vllm", "0.33.0", Deployment(4))


def test_shared_expert_width_with_its_gate():
    # Qwen3.5-397B-A17B: shared_expert_intermediate_size 1024, 60 MoE layers, hidden 4096, a shared_expert_gate of
    # 4096 inputs a layer: 60 x (3 x 4096 x 1024 + 4096) = 755,220,480 (the catalog's count)
    model = _fp8("qwen3.5-397b-a17b")
    assert model.params.shared_experts == 60 * (3 * 4096 * 1024 + 4096)
    names = {(x.name, x.widths) for x in fp8_linear.linears(model, fp8_linear.Splits(8, 8, 8),
                                                            fp8_linear.Rule("vLLM", "0.33.0", merged=False), 8)}
    assert ("down_proj of its shared experts", (1024,)) in names


def test_gdn_widths_not_read_are_refused():
    model = _fp8("qwen3.5-397b-a17b")
    old = [dataclasses.replace(x, value_heads=0) if getattr(x, "variant", "") == "gated_deltanet" else x
           for x in model.layers]
    with pytest.raises(KvplanError, match="Gated DeltaNet projections' widths were not read"):
        fp8_linear.check(dataclasses.replace(model, layers=tuple(old)), fp8_linear.Splits(8, 8, 8),
                         fp8_linear.Rule("SGLang", "0.5.23"), 8)


def test_vllm_books_a_merged_shards_partial_scale_rows():
    """From 0.14.0 vLLM builds a merged layer whose part is not whole blocks and gives a rank cdiv(sum of its parts,
    128) scale rows x cdiv(K, 128) (create_fp8_scale_parameter, 0.33.0 wheel `quantization/utils/fp8_utils.py`
    L1415-1421). MiMo-V2-Flash (its config.json: hidden 4,096, 64 heads of 192, v 128; 9 full layers of 4 KV heads,
    39 sliding of 8) at tp 4: a full layer's qkv rank parts 3,072 + 192 + 128 = 3,392 -> cdiv 27 rows, where the
    checkpoint's 12,288 + 768 + 512 = 13,568 is 106 rows, 106 / 4 a rank: (4 x 27 - 106) x 32 columns x 4 B / 4 = 64 B;
    a sliding layer's 3,072 + 384 + 256 = 3,712 is 29 whole rows (116 / 4): 0. 9 x 64 = 576 B. At tp 8 the full
    layers replicate their 4 KV heads (left out: replicated_kv_proj_bytes prices them) and a sliding layer's
    1,536 + 192 + 128 = 1,856 -> 15 rows against 116 / 8: (8 x 15 - 116) x 32 x 4 / 8 = 64 B, x 39 = 2,496 B.
    0.13.0 refuses such a shard, so nothing there."""
    assert fp8_linear.partial_scale_bytes(MIMO, Deployment(4), (0, 14, 0)) == 9 * 64 == 576
    assert fp8_linear.partial_scale_bytes(MIMO, Deployment(8), (0, 33, 0)) == 39 * 64 == 2496
    assert fp8_linear.partial_scale_bytes(MIMO, Deployment(2), (0, 33, 0)) == 0  # 6,144 + 384 + 256: 53 whole rows
    assert fp8_linear.partial_scale_bytes(MIMO, Deployment(4), (0, 13, 0)) == 0


def test_mimo_qkv_partial_scale_rows_under_sglang():
    """MiMo-V2-Flash (config.json: hidden 4,096, 64 heads of 192, v 128; 9 full layers of 4 KV heads, 39 sliding of 8),
    block-FP8 128 x 128. SGLang builds its qkv_proj with skip_block_quant_check (0.5.23 models/mimo_v2.py L724) and
    sizes the scales cdiv(output_size_per_partition, 128) x cdiv(4,096, 128) (0.5.23 layers/quantization/fp8.py
    L678). At attention tp 4 a full layer's rank parts are 64 x 192 / 4 + 192 + 128 = 3,392 -> 27 rows, the
    checkpoint's 12,288 + 768 + 512 = 13,568 -> 106 rows, 106 / 4 a rank: (4 x 27 - 106) x 32 x 4 B / 4 = 64 B; a
    sliding layer's 3,072 + 384 + 256 = 3,712 is 29 whole rows: 0. 9 x 64 = 576 B a GPU. At tp 8 the full layers'
    replicated KV heads are priced elsewhere and a sliding layer's 1,536 + 192 + 128 = 1,856 -> 15 rows against
    116 / 8: (8 x 15 - 116) x 32 x 4 / 8 = 64 B, x 39 = 2,496 B."""
    assert fp8_linear.sglang_partial_scale_bytes(MIMO, 4) == 9 * 64 == 576
    assert fp8_linear.sglang_partial_scale_bytes(MIMO, 8) == 39 * 64 == 2496
    assert fp8_linear.sglang_partial_scale_bytes(MIMO, 2) == 0  # 6,144 + 384 + 256 = 6,784: 53 whole rows
    assert fp8_linear.sglang_partial_scale_bytes(MIMO, 1) == 0
    # in the weights as loaded: the rows follow the attention split (DP attention's share), not --tp-size
    h200 = find_gpu("h200")
    with_rows = sglang_loaded.loaded_extra(MIMO, h200, 8, "0.5.23", attn_tp=4)
    without = sglang_loaded.loaded_extra(MIMO, h200, 8, "0.5.23", attn_tp=1)
    assert with_rows - without == 576
