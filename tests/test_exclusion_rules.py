"""Each quantization method's exclusion list matched as the engine loading it matches names
(kvplan.readers.exclusion_rules): fp8, fbgemm_fp8 and compressed-tensors keep a layer only where an entry is its full
name (vLLM 0.33.0 `quantization/utils/quant_utils.py` is_layer_skipped L619-693, exact mode; compressed-tensors
`utils/config_utils.py` is_equal_or_regex_match L432-452), a fused layer's name standing for its shards and an entry
under a layer's experts for that layer's RoutedExperts; bitsandbytes and AWQ test an entry as a substring
(`humming.py` L196-215, `auto_awq.py` L294-299), kvplan's reading of a name's words. Where SGLang's fp8 reading
(dotted-path boundaries, sgl-project/sglang#23467) keeps more, a note says so. Sizes are hand arithmetic from the
small configs below.
"""

from __future__ import annotations

import copy

import pytest

from kvplan.model.weights import weight_bytes
from kvplan.core.errors import KvplanError
from kvplan.readers.exclusion_rules import boundary_matcher, exact_matcher
from kvplan.sources.importer import build_spec

# A small Llama: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100.
# attention per layer = q 64x64 + k, v 2 x 64x32 + o 64x64 = 12,288; MLP per layer = 3 x 64x128 = 24,576
SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
# The same as a Mixtral of 4 experts (w1, w2, w3 of 64 x 128 each): 4 x 3 x 8,192 = 98,304 expert parameters a layer
MOE = dict(SMALL, model_type="mixtral", architectures=["MixtralForCausalLM"], num_local_experts=4,
           num_experts_per_tok=2)
CT_GROUPS = {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}}


def _q(qc: dict, base: dict = SMALL):
    config = copy.deepcopy(base)
    config["quantization_config"] = qc
    return build_spec(config, "test/small", source="test")[0]


def test_the_matchers():
    exact, boundary = exact_matcher("model.layers.0.self_attn.qkv_proj"), boundary_matcher("linear_attn")
    assert exact("model.layers.0.self_attn.k_proj") and not exact("model.layers.0.self_attn.o_proj")
    assert not exact_matcher("self_attn")("model.layers.0.self_attn.q_proj")
    assert exact_matcher("model.layers.3.mlp.experts.7.down_proj")("model.layers.3.mlp.experts.0.gate_proj")
    assert not exact_matcher("model.layers.3.mlp.experts.7.down_proj")("model.layers.30.mlp.experts.0.gate_proj")
    assert boundary("model.layers.0.linear_attn.in_proj_qkv") and not boundary("model.layers.0.linear_attnx.o")
    assert not boundary_matcher("mlp.gate")("model.layers.0.mlp.gate_up_proj")  # sglang#23467's own case


@pytest.mark.parametrize("method", ["fp8", "fbgemm_fp8"])
def test_a_bare_module_name_is_quantized_by_vllm_and_kept_by_sglang(method):
    # `self_attn` equals no linear layer's name: vLLM quantizes all attention, the bytes of the plain checkpoint;
    # SGLang keeps both layers' attention, 2 x 12,288 = 24,576 parameters, said in a note
    key = "ignored_layers" if method == "fp8" else "modules_to_not_convert"
    bound = {"activation_scale_ub": 1200.0} if method == "fbgemm_fp8" else {}  # fbgemm_fp8's config needs it
    bare = _q({"quant_method": method, key: ["self_attn"], **bound})
    assert bare.quantization.kept == ()
    assert weight_bytes(bare) == weight_bytes(_q({"quant_method": method, key: [], **bound}))
    assert len(bare.quantization.notes) == 1 and "keeps 24,576 more parameters" in bare.quantization.notes[0]


def test_substring_methods_keep_what_a_bare_name_names():
    # bitsandbytes int8 `llm_int8_skip_modules: [self_attn]`: both layers' attention kept, 24,576 parameters;
    # sharded linear bytes 24,576 x 2 B + MLP 49,152 x 1 B = 98,304
    q = _q({"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["self_attn"]})
    assert q.quantization.kept == (("attention", 24_576),) and q.quantization.notes == ()
    assert weight_bytes(q).sharded == 24_576 * 2 + 49_152


def test_compressed_tensors_reads_alike_in_both_engines():
    # `ignore: [self_attn]` names no layer in vLLM's and SGLang's should_ignore_layer alike: nothing kept, no note
    q = _q({"quant_method": "compressed-tensors", "config_groups": CT_GROUPS, "ignore": ["self_attn"]})
    assert q.quantization.kept == () and q.quantization.notes == ()


def test_fused_names_stand_for_their_shards():
    # Step-3.5-Flash-style lists name the fused layer (is_layer_skipped's first clause): qkv_proj + o_proj of
    # layer 1 = its whole attention, 12,288; gate_up_proj + down_proj of layer 0 = its MLP, 24,576
    names = ["model.layers.1.self_attn.qkv_proj", "model.layers.1.self_attn.o_proj", "model.layers.0.mlp.gate_up_proj",
             "model.layers.0.mlp.down_proj"]
    q = _q({"quant_method": "fp8", "ignored_layers": names}).quantization
    assert dict(q.kept) == {"attention": 12_288, "mlp": 24_576} and q.notes == ()


def test_one_expert_named_keeps_its_layers_experts():
    # vLLM's RoutedExperts clause: layer 1's prefix `model.layers.1.block_sparse_moe.experts` lies in the entry, so
    # all 4 experts of layer 1 stay 16-bit: 98,304 of the 196,608 expert parameters
    entry = "model.layers.1.block_sparse_moe.experts.0.w1"
    q = _q({"quant_method": "fp8", "ignored_layers": [entry]}, MOE).quantization
    assert q.kept == (("experts", 98_304),)


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False, "sym": True}


def test_gptq_dynamic_negative_rules_keep_their_modules():
    # GPTQModel `dynamic`: `-:` keys are modules vLLM leaves unquantized (get_dynamic_override -> False):
    # `-:.*\.0\.mlp\..*` keeps layer 0's MLP, 24,576 parameters; a `+:` key repeating the base changes nothing
    q = _q({**GPTQ, "dynamic": {r"-:.*\.0\.mlp\..*": {}, r"+:.*\.1\..*": {"bits": 4}}}).quantization
    assert q.kept == (("mlp", 24_576),)


def test_gptq_dynamic_overrides_of_the_format_are_refused():
    from kvplan.core.errors import KvplanError
    with pytest.raises(KvplanError, match=r"sets bits 8 for the modules it matches"):
        _q({**GPTQ, "dynamic": {r"+:.*\.1\..*": {"bits": 8}}})


def test_quant_method_read_in_one_spelling():
    # vLLM 0.33.0 lower-cases quant_method and spells compressed_tensors compressed-tensors before any method reads it
    # (transformers_utils/model_arch_config_convertor.py L272-281); every branch of kvplan's reader reads that spelling.
    # `GPTQ` with GPTQModel's `-:` rule for layer 0's attention keeps its 12,288 parameters as `gptq` does
    dynamic = {"-:model\\.layers\\.0\\.self_attn\\..*": {}}
    upper = _q({"quant_method": "GPTQ", "bits": 4, "group_size": 32, "dynamic": dynamic}).quantization
    assert upper.kept == (("attention", 12_288),) == _q({"quant_method": "gptq", "bits": 4, "group_size": 32,
                                                         "dynamic": dynamic}).quantization.kept
    assert upper.quant_method == "gptq"
    # `compressed_tensors` is compressed-tensors (it was planned as the bf16 checkpoint): fp8 weights, its `ignore` read
    snake = _q({"quant_method": "compressed_tensors", "config_groups": CT_GROUPS,
                "ignore": [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"]}).quantization
    assert (snake.method, snake.quant_method, snake.kept) == ("fp8", "compressed-tensors", (("attention", 12_288),))


def test_a_literal_entry_asked_of_its_own_layer_only_keeps_what_asking_every_layer_keeps():
    # kvplan.readers.unquantized._literal_layer asks an SGLang entry naming `layers.N.` only layer N's modules (the
    # 405B FP8 list's 508 entries x 126 layers took 12 s); the oracle is the same matcher asked of every layer
    from kvplan.readers.exclusion_rules import Named, sglang_matcher
    from kvplan.readers.module_names import ModuleNames
    from kvplan.readers.unquantized import _literal_layer, matched
    qkvo = ("q_proj", "k_proj", "v_proj", "o_proj")
    m = ModuleNames(attention=(qkvo,) * 12, mlp=("gate_proj", "up_proj", "down_proj"), dense=frozenset(range(6)),
                    moe=frozenset(range(6, 12)), num_experts=4, shared=True)
    entries = ["model.layers.1.self_attn.q_proj", "model.layers.1.self_attn", "layers.1.", "layers.11.mlp",
               "model.layers.7.mlp.experts", "model.layers.7.mlp.shared_experts", "model.layers.9.mlp.experts.2",
               "model.layers.3.mlp.gate_proj", "1.self_attn.q_proj", "model.layers.1", "self_attn.o_proj",
               "model.layers.2.self_attn.q_proj,model.layers.4.self_attn.q_proj", "model.layers.12.self_attn"]

    def outcome(test):
        try:
            return matched([test], 12, None, "test", m)
        except KvplanError as exc:
            return exc.message

    restricted = 0
    for entry in entries:
        for dotted in (True, False):
            literal = sglang_matcher(entry, dotted)
            restricted += _literal_layer(literal) is not None
            assert outcome(literal) == outcome(Named(entry, literal)), (entry, dotted)
    assert restricted == 2 * 9  # the entries naming one `layers.N.` were asked of layer N only
