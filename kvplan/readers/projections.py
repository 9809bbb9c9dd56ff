"""What a family's decoder calls each of its projections (q, k, v, o, gate, up, down): the module names a LoRA
target list has to use, or None where kvplan has not read them.

The names are the model's own modules as the Hugging Face checkpoint names them (the tensor
`model.layers.0.mlp.c_fc.weight` is module `c_fc`), which vLLM's model classes keep for every projection they do not
pack (its packing of q/k/v and gate/up is an engine rule: kvplan.engines.lora). Read from each family's modeling
file in transformers and its vLLM port (vllm 0.8.0 wheel, vllm/model_executor/models/: starcoder2.py L86-144,
phi.py L88-153, gpt2.py L70-121, gpt_bigcode.py L78-134, falcon.py L121-223):

* Llama's names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj): the families in LLAMA_NAMED.
* Phi-3: fused qkv_proj and gate_up_proj (transformers' modeling_phi3.py), o_proj, down_proj.
* StarCoder2: Llama's attention names, an ungated MLP c_fc -> c_proj.
* Phi (phi-1, phi-2): q_proj, k_proj, v_proj, dense; fc1 -> fc2.
* GPT-2 and GPTBigCode (StarCoder 1, SantaCoder): one fused c_attn for q, k and v; c_proj; c_fc -> c_proj (the
  attention's output and the MLP's down projection share the name c_proj).
* Falcon: one fused query_key_value; dense; dense_h_to_4h -> dense_4h_to_h.
"""

from __future__ import annotations

from kvplan.model.spec import ModelSpec

_LLAMA = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
          "down": "down_proj"}
_ATTENTION = {r: _LLAMA[r] for r in ("q", "k", "v", "o")}
_GPT2 = {"q": "c_attn", "k": "c_attn", "v": "c_attn", "o": "c_proj", "up": "c_fc", "down": "c_proj"}
_FALCON = {"q": "query_key_value", "k": "query_key_value", "v": "query_key_value", "o": "dense",
           "up": "dense_h_to_4h", "down": "dense_4h_to_h"}
# model_types whose decoder layers use Llama's projection names (transformers' modeling_<family>.py)
LLAMA_NAMED = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                         "gemma3", "gemma3_text", "cohere", "cohere2", "olmo", "olmo2", "granite", "llama4_text"})
_FAMILIES = {"phi3": {"q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "o": "o_proj", "gate": "gate_up_proj",
                      "up": "gate_up_proj", "down": "down_proj"},
             "starcoder2": {**_ATTENTION, "up": "c_fc", "down": "c_proj"},
             "phi": {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "dense", "up": "fc1", "down": "fc2"},
             "gpt2": _GPT2, "gpt_bigcode": _GPT2,
             "falcon": _FALCON, "RefinedWebModel": _FALCON, "RefinedWeb": _FALCON}


def projection_names(spec: ModelSpec) -> dict[str, str] | None:
    """{role: module name} of `spec`'s decoder projections (roles q, k, v, o, gate, up, down; an ungated MLP has no
    gate), or None where kvplan has not read its family's names."""
    if spec.family in LLAMA_NAMED:
        return dict(_LLAMA)
    names = _FAMILIES.get(spec.family)
    return dict(names) if names is not None else None
