"""A GGUF file's tensors summed by the role tensor parallelism and placement give them (kvplan.model.spec.WeightBytes):
the file's own bytes for the embedding, the output head, the experts and the rest, not a quantization mix's rule.

llama.cpp names a model's tensors by role (ggml-org/llama.cpp@00395eb2 src/llama-arch.cpp LLM_TENSOR_NAMES:
`token_embd`, `output`, `output_norm`, `blk.%d.attn_q`, `blk.%d.ffn_gate_inp`, `blk.%d.ffn_up_exps`,
`blk.%d.ffn_up_shexp`, `blk.%d.attn_kv_a_mqa`, ...) and places them by it (LLM_TENSOR_INFOS: `token_embd` an input-layer
tensor, which it keeps in host memory; `output` the output layer). A quantized file's token_embd and output are
whatever types its maker chose (llama-quantize's --token-embedding-type / --output-tensor-type: bartowski's "_L"
files store both as Q8_0), so only the file's own tensors say their bytes. Each tensor counts once:

* embedding: `token_embd.*` and `position_embd.*` (the input layer);
* lm_head: `output.*` (absent where the head is tied to token_embd);
* experts: the routed experts, `blk.N.ffn_{gate,up,down,gate_up}_exps.*` (their biases too, as ParamCounts counts them);
* replicated: what kvplan keeps whole on every tensor-parallel rank: norms (`*_norm.*`, of any shape), other
  one-dimensional tensors (biases, rope factors), the expert router `ffn_gate_inp` and the MLA down-projections
  `attn_q_a` / `attn_kv_a_mqa`;
* sharded: every other matrix (attention, dense MLP, shared experts).
"""

from __future__ import annotations

import re

from kvplan.model.spec import WeightBytes

_EXPERTS = re.compile(r"blk\.\d+\.ffn_(gate|up|down|gate_up)_(exps|chexps)\.")
_REPLICATED = re.compile(r"blk\.\d+\.(ffn_gate_inp|attn_q_a|attn_kv_a_mqa)\.")


def role_of(name: str, dims: tuple[int, ...]) -> str:
    """The WeightBytes field a tensor named `name` of shape `dims` counts in."""
    if name.startswith(("token_embd.", "position_embd.")):
        return "embedding"
    if name.startswith("output."):
        return "lm_head"
    if _EXPERTS.match(name):
        return "experts"
    if len(dims) == 1 or "_norm." in name or _REPLICATED.match(name):  # Command R+'s per-head q/k norms are 2-D
        return "replicated"
    return "sharded"


def bytes_by_role(tensors) -> WeightBytes:
    """The tensors' bytes (`nbytes`, whole ggml blocks) summed by role: their total is the file's to the byte."""
    sums = dict.fromkeys(("sharded", "replicated", "experts", "embedding", "lm_head"), 0)
    for t in tensors:
        sums[role_of(t.name, t.dims)] += t.nbytes
    return WeightBytes(**sums)
