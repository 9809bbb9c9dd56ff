"""A model's weight tensors on one rank, in the order an engine's model constructor allocates them.

What PyTorch's caching allocator holds for the weights depends on each tensor's size, not only on their sum
(kvplan.core.caching_allocator): an engine that builds its model on the GPU (SGLang's DefaultModelLoader under
`with torch.device("cuda")`, 0.4.3.post4 `model_loader/loader.py` L348-360) allocates every parameter at its
full per-rank shape as the constructor reaches it: the token embedding, then each decoder layer's attention
(fused qkv, o), its MLP (fused gate_up, down) or MoE block (router, fused w13 and w2 of the rank's experts,
shared experts) and its two norms, then the final norm and the LM head.

Sizes restate SGLang's tensor-parallel layers: qkv [(H_q / tp + 2 max(1, H_kv / tp)) d, hidden] (KV heads
replicated where tp exceeds them), o [hidden, H_q / tp x d_v], gate_up [2 I / tp, hidden], down [hidden, I / tp],
the vocabulary padded to 64 rows and split over tp (`pad_vocab_size`, `DEFAULT_VOCAB_PADDING_SIZE = 64`,
0.4.3.post4 `layers/vocab_parallel_embedding.py` L24, L65). The MLP and expert widths come from the spec's
parameter counts by role. Listed only where kvplan knows the element size: 16/32-bit tensors, and fp8/int8
linear weights (one byte; their scales, small, are left out); packed 4-bit formats (int4, MXFP4, NVFP4, GGUF),
MLA and recurrent-state projections and vision towers are not listed, so their rounding is not counted.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.intmath import cdiv, round_up
from kvplan.model.layers import kv_heads_per_rank
from kvplan.model.spec import ModelSpec
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.planning.deploy import stages_or_one
from kvplan.readers.mlp_layout import expert_width as routed_expert_width, ffn_kinds, gated_mlp

VOCAB_PAD = 64  # SGLang's and vLLM's DEFAULT_VOCAB_PADDING_SIZE
ONE_BYTE = ("fp8", "int8")


def _elem_bytes(method: str) -> int | None:
    """Bytes of one linear weight stored as `method`; None for packed formats (not listed)."""
    return PLAIN_BYTES.get(method) or (1 if method in ONE_BYTE else None)


def _formats(model: ModelSpec, weight_dtype: str | None) -> tuple[int, int | None, int | None]:
    """(plain, dense linear, expert) bytes per element, as kvplan.model.spec's weight bytes read the format."""
    q = model.quantization
    base = model.dtype if model.dtype in PLAIN_BYTES else "bf16"
    if weight_dtype is None or weight_dtype == q.method:
        method, experts_only, experts = q.method, q.experts_only, q.experts_method or q.method
    else:
        method, experts_only, experts = weight_dtype, False, weight_dtype
        base = weight_dtype if weight_dtype in PLAIN_BYTES else base
    plain = PLAIN_BYTES[base]
    return plain, plain if experts_only else _elem_bytes(method), _elem_bytes(experts)


def rank_tensors(model: ModelSpec, tp: int = 1, ep: int = 1, ranges: list[tuple[int, int]] | None = None,
                 weight_dtype: str | None = None, rope_bytes: int = 0) -> tuple[int, ...]:
    """Bytes of each weight tensor the first pipeline stage's rank allocates, in construction order (module
    docstring); `ranges`: the pipeline stages (kvplan.planning.deploy.stage_ranges; None: one); `rope_bytes`: the
    RoPE table the first attention layer builds, listed after its projections."""
    if model.draft is not None:  # a draft model served beside it: the target's tensors, then the draft's own, on one
        # stage (a drafter at pp > 1 is refused: kvplan.planning.speculative.check_deployment)
        target = replace(model, layers=model.layers[:model.num_layers - model.draft.num_layers], draft=None)
        return rank_tensors(target, tp, ep, None, weight_dtype, rope_bytes) + rank_tensors(model.draft, tp)
    p, hidden, n = model.params, model.hidden_size, model.num_layers
    plain, dense_b, expert_b = _formats(model, weight_dtype)
    start, end = stages_or_one(model, ranges)[0]
    kinds = ffn_kinds(model, n)
    gated = gated_mlp(model)
    mats = 3 if gated else 2
    n_dense = kinds.count("dense")
    width = p.mlp // (n_dense * mats * hidden) if n_dense and p.mlp else 0
    moe_layers, experts = p.num_moe_layers, p.num_experts
    expert_width = routed_expert_width(model)
    shared_width = p.shared_experts // (moe_layers * mats * hidden) if moe_layers else 0
    moe_tp = max(1, tp // ep)
    out = [round_up(model.vocab_size, VOCAB_PAD) // tp * hidden * plain] if p.embedding else []
    rope_left = rope_bytes
    for i in range(start, end):
        layer = model.layers[i]
        d, heads = getattr(layer, "head_dim", 0), getattr(layer, "num_kv_heads", 0)
        if d and heads and dense_b:
            q, kv = model.num_attention_heads // tp, kv_heads_per_rank(heads, tp)
            v = getattr(layer, "v_head_dim", 0) or d
            out += [(q * d + kv * d + kv * v) * hidden * dense_b, hidden * q * v * dense_b]
            if rope_left:
                out.append(rope_left)
                rope_left = 0
        if kinds[i] == "dense" and width and dense_b:
            out += [(mats - 1) * cdiv(width, tp) * hidden * dense_b, hidden * cdiv(width, tp) * dense_b]
        elif kinds[i] == "moe" and expert_width:
            out.append(experts * hidden * plain)  # the router, kept whole in 16 bits
            local = cdiv(experts, ep)
            if expert_b:
                w = cdiv(expert_width, moe_tp)
                out += [local * (mats - 1) * w * hidden * expert_b, local * hidden * w * expert_b]
            if shared_width and dense_b:
                w = cdiv(shared_width, tp)
                out += [(mats - 1) * w * hidden * dense_b, hidden * w * dense_b]
        out += [hidden * plain, hidden * plain]  # input and post-attention norms
    if rope_left:
        out.append(rope_left)
    if end == n:
        out.append(hidden * plain)  # the final norm
        if p.lm_head:
            out.append(round_up(model.vocab_size, VOCAB_PAD) // tp * hidden * plain)
    return tuple(out)
