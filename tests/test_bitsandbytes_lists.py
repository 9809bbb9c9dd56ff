"""bitsandbytes' exclusion list read as the engines that load it read it (kvplan.readers.exclusion_rules), and vLLM's
releases without bitsandbytes refused (kvplan.engines.vllm.quant_methods).

vLLM 0.27.1 wheel `model_executor/layers/quantization/bitsandbytes.py`: from_config reads `llm_int8_skip_modules`
alone (L140-142); get_quant_method (L160-169) leaves a LinearBase unquantized where is_layer_skipped_bnb (L178-192)
finds an entry equal to one dotted word of its name or to a leading run of its words, and gives RoutedExperts
BitsAndBytesMoEMethod unasked. SGLang 0.5.23 `srt/layers/quantization/bitsandbytes.py` is the same (L136-138,
L156-167, L170-184). vLLM 0.28.0's QuantizationMethods has no bitsandbytes (config/model.py L1280-1285 raises "Unknown
quantization method"). Sizes: the small Llama and Mixtral of tests/test_exclusion_rules.py (attention 12,288, MLP
24,576 and experts 98,304 parameters a layer, 2 layers).
"""

from __future__ import annotations

import pytest
from test_exclusion_rules import MOE, SMALL, _q

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.importer import build_spec

BNB = {"quant_method": "bitsandbytes", "load_in_8bit": True}


def _kept(skip: list[str], base=None, **more):
    qc = dict(BNB, llm_int8_skip_modules=skip, **more)
    return (_q(qc) if base is None else _q(qc, base)).quantization


def test_only_llm_int8_skip_modules_is_read():
    # `modules_to_not_convert: [self_attn]` beside it is read by neither engine: nothing kept, and the note names it
    q = _kept(["lm_head"], modules_to_not_convert=["self_attn"])
    assert q.kept == () and len(q.notes) == 1
    assert "reads `llm_int8_skip_modules` (vLLM 0.27.1 and SGLang 0.5.23 from_config)" in q.notes[0]
    assert "`modules_to_not_convert` (1 entry)" in q.notes[0]


def test_a_word_or_a_leading_run_of_words():
    # `self_attn` is a word of every attention projection's name: 2 x 12,288 = 24,576; `model.layers.1.mlp` a leading
    # run of layer 1's MLP projections' names: 24,576
    assert _kept(["self_attn"]).kept == (("attention", 24_576),)
    assert _kept(["model.layers.1.mlp"]).kept == (("mlp", 24_576),)
    # `mlp.down_proj` is neither one word nor a leading run of `model.layers.0.mlp.down_proj`, and layer 0's q_proj
    # is no leading run of the layer vLLM builds, `model.layers.0.self_attn.qkv_proj`: both quantized, nothing kept
    # (kvplan's earlier reading of the words refused both: one projection of a module)
    assert _kept(["mlp.down_proj"]).kept == ()
    assert _kept(["model.layers.0.self_attn.q_proj"]).kept == ()
    # both shards' names together name no fused layer either; `qkv_proj` does: 2 x (q 4,096 + k, v 2 x 2,048) = 16,384
    # (the earlier reading refused both lists)
    assert _kept(["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"]).kept == ()
    assert _kept(["qkv_proj"]).kept == (("attention", 16_384),)


def test_routed_experts_are_always_quantized():
    # RoutedExperts / FusedMoE get BitsAndBytesMoEMethod whatever the list says: `experts` keeps nothing (kvplan's
    # earlier reading kept 2 x 98,304); `model.layers.0` keeps layer 0's attention, 12,288, and not its experts
    # (earlier: 98,304 more)
    assert _kept(["experts"], MOE).kept == ()
    assert _kept(["model.layers.0"], MOE).kept == (("attention", 12_288),)


def test_vllm_without_bitsandbytes_refuses_it():
    model = _q(dict(BNB, llm_int8_skip_modules=["lm_head"]))
    gpu, dep, req = find_gpu("h100-sxm"), Deployment(), Request(context=1024)
    with pytest.raises(KvplanError, match=r"vLLM 0\.28\.0 registers no bitsandbytes .* 0\.27\.1 or earlier"):
        resolve_engine("vllm", "0.28.0", []).result(model, gpu, dep, req)
    with pytest.raises(KvplanError, match=r"kvplan's default; none was given"):
        resolve_engine("vllm").result(model, gpu, dep, req)
    assert resolve_engine("vllm", "0.27.1", []).result(model, gpu, dep, req).plan.weight_bytes_per_gpu > 0
    # NF4 asked of a 16-bit checkpoint is vLLM's --quantization bitsandbytes: refused from 0.28.0 as well
    plain, nf4 = build_spec(dict(SMALL), "test/small", source="test")[0], Request(context=1024, weight_dtype="nf4")
    with pytest.raises(KvplanError, match=r"vLLM 0\.28\.0 registers no bitsandbytes .* cannot run weight_dtype nf4"):
        resolve_engine("vllm", "0.28.0", []).result(plain, gpu, dep, nf4)
    assert resolve_engine("vllm", "0.27.1", []).result(plain, gpu, dep, nf4).plan.weight_bytes_per_gpu > 0
