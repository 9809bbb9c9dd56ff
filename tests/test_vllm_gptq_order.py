"""vLLM's GPTQ act-order and g_idx by release (issue 22). From 0.30.0 vLLM refuses `desc_act: true` with groups
(0.30.0 wheel quantization/utils/gptq_utils.py L32-37; a no-op at group_size -1, L29-31) and discards every `.g_idx`
tensor (base_config.py get_checkpoint_weight_mapper L244-249); 0.29.0's auto_gptq.py registers g_idx (L395, L443).
g_idx is int32 [K] per quantized linear (AutoGPTQ/AutoGPTQ@058fd80a auto_gptq/nn_modules/qlinear/qlinear_cuda.py
QuantLinear.__init__)."""

from __future__ import annotations

import pytest

from kvplan import api
from kvplan.core.errors import KvplanError
from kvplan.model.weights import weight_bytes
from kvplan.sources.importer import build_spec

# A small Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100, untied head.
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "float16", "tie_word_embeddings": False}


def _gptq(desc_act: bool, group: int = 32):
    qc = {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": desc_act, "sym": True}
    return build_spec(dict(SMALL, quantization_config=qc), "test/small-gptq", source="test")[0]


def _weights(model, version: str) -> int:
    return api.plan(model, "h100", context=2048, engine="vllm", engine_version=version).weight_bytes


def test_g_idx_loaded_through_0_29_and_discarded_from_0_30():
    # g_idx int32 [K] per linear: q, k, v, gate, up read K = 64 (5 x 64), o 64, down 128 -> 512 inputs a layer,
    # x 2 layers x 4 B = 4,096 B, in 0.29.0's weights and not in 0.30.0's (nothing else differs for this model)
    model = _gptq(False)
    assert model.quantization.index_bytes == 4_096
    assert _weights(model, "0.25.0") - _weights(model, "0.30.0") == 4_096
    assert _weights(model, "0.30.0") == _weights(model, "0.31.0")
    # from 0.32.0 on the H100 Humming goes ahead of Marlin (kvplan.engines.vllm.marlin_dense_pad), so Marlin's padding
    # of o (N 64, K 64 -> 128 at group 32: (64 x 128 - 64 x 64) x 4 / 8 + (4 - 2) x 64 x 2 B = 2,304 B a layer) is
    # no longer counted: 4,608 B less
    assert _weights(model, "0.31.0") - _weights(model, "0.33.0") == 2 * ((64 * 128 - 64 * 64) // 2 + 2 * 64 * 2)


@pytest.mark.parametrize("version", ["0.30.0", "0.33.0"])
def test_act_order_with_groups_refused_from_0_30(version):
    with pytest.raises(KvplanError) as e:
        _weights(_gptq(True), version)
    assert "act-order" in str(e.value) and "\n" not in str(e.value) and e.value.param == "engine_version"


def test_act_order_planned_before_0_30_and_at_group_minus_one():
    assert _weights(_gptq(True), "0.25.0") > 0
    # desc_act with one group over all inputs is a no-op to vLLM (gptq_utils.py L29-31): planned
    assert not _gptq(True, group=-1).quantization.act_order
    assert _weights(_gptq(True, group=-1), "0.33.0") > 0


def test_desc_act_not_a_bool_is_refused():
    with pytest.raises(KvplanError, match="desc_act must be true or false"):
        build_spec(dict(SMALL, quantization_config={"quant_method": "gptq", "bits": 4, "desc_act": "yes"}),
                   "test/bad", source="test")


def test_group_minus_one_priced_per_row_with_no_note():
    # one group per row over K inputs (AutoGPTQ QuantLinear: scales fp16 [1, N], qzeros int32 [1, N / 8]): 2.5 B a
    # row at 4 bits. SMALL's rows a layer: qkv 64 + 32 + 32 = 128, o 64, gate_up 256, down 64 = 512, x 2 layers =
    # 1,024 rows -> 2,560 B; its 73,728 linear parameters -> 36,864 B; g_idx 4,096 B (the test above)
    q = _gptq(False, group=-1).quantization
    assert q.per_row and not any("group_size -1" in n for n in q.notes)
    w = weight_bytes(_gptq(False, group=-1))
    assert w.sharded + w.replicated - 5 * 64 * 2 == 36_864 + 2_560 + 4_096  # less the fp16 norms (2 a layer + final)
    assert not _gptq(False).quantization.per_row


def test_group_minus_one_read_as_the_group_size_is():
    # `group_size: null` falls to AWQ's `q_group_size` (-1): per row there too
    qc = {"quant_method": "awq", "w_bit": 4, "group_size": None, "q_group_size": -1, "zero_point": True}
    q = build_spec(dict(SMALL, quantization_config=qc), "test/small-awq-row", source="test")[0].quantization
    assert q.per_row and q.group_size == 128


def _asym(sym):
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": sym}
    return build_spec(dict(SMALL, quantization_config=qc), "test/small-gptq", source="test")[0]


@pytest.mark.parametrize("version", ["0.22.0", "0.33.0"])
def test_asymmetric_gptq_refused_from_0_22(version):
    # AutoGPTQConfig (gptq's config from 0.22.0) keeps TYPE_MAP {(4, True), (8, True)} and raises "Unsupported
    # quantization config: bits=4, sym=False" (0.22.0 auto_gptq.py L155-158, 0.33.0 L152-155)
    with pytest.raises(KvplanError) as e:
        _weights(_asym(False), version)
    assert "bits=4, sym=False" in str(e.value) and e.value.param == "engine_version" and "\n" not in str(e.value)
    assert _weights(_asym(True), version) > 0


def test_asymmetric_gptq_through_0_21_is_the_checkpoint():
    # 0.21.0: not Marlin-compatible (gptq_marlin.py L295-296), GPTQConfig's exllama kernel keeps qweight, qzeros and
    # scales; the sym: true twin runs Marlin, whose padding starts at 0.24.0: both are the checkpoint's bytes (qzeros
    # are stored whatever sym says, so the two checkpoints weigh the same)
    assert _asym(False).quantization.asym and not _asym(True).quantization.asym
    assert _weights(_asym(False), "0.21.0") == _weights(_asym(True), "0.21.0")
    with pytest.raises(KvplanError, match=r"\.sym must be true or false"):
        _asym("no")
