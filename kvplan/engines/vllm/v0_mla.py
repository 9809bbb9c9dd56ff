"""vLLM's V0 MLA backend before 0.8.0, for a DeepSeek MLA model: the absorbed decode weights it builds after loading
and the peak of its eager profile forward, source-derived (docs/engines.md 1.2).

1. Absorbed weights (vllm 0.7.1 / 0.7.3 wheels, `attention/backends/mla/utils.py` `process_weights_after_loading`,
   0.7.3 L232-389, with VLLM_MLA_PERFORM_MATRIX_ABSORPTION and requantization on, the defaults: `envs.py` L85-86).
   Per MLA layer and rank (n = heads / tp, Lq = q_lora_rank or the hidden size H where the query is not compressed,
   Lkv = kv_lora_rank, P / R / V the nope / rope / value head widths), beside the checkpoint's own projections:
     W_Q_UK = einsum(W_Q (Lq, n, P), W_UK (Lkv, n, P)) -> (Lq, n x Lkv), and
     W_UV_O = einsum(W_UV (Lkv, n, V), W_O (H, n, V)) -> (n x Lkv, H),
   requantized to fp8 with 128 x 128 block scales for an fp8 checkpoint (`scaled_quantize`, then `.T.contiguous()`),
   else kept in the model dtype; W_QR = the query's rope columns (Lq, n x R) in the model dtype (`.contiguous()`, a
   copy); and for a quantized checkpoint the dequantized kv_b_proj (Lkv, n x (P + V)) in the model dtype, which
   `self.W_UK` / `self.W_UV` keep alive as views (an unquantized one's are views of the parameter itself). All of it
   is built inside `get_model` (`model_loader/loader.py` `_process_weights_after_loading`), so "Loading model weights
   took" (`max_memory_allocated` after the load: `platforms/cuda.py` `get_current_memory_usage`) holds it.
   vllm-project/vllm#14770 ("MLA get rid of materialization", opened 2025-03-13) dropped W_Q_UK / W_UV_O for bf16
   W_UK_T / W_UV views of the dequantized kv_b_proj (vllm 0.8.0 wheel `attention/backends/mla/common.py` L1097-1122).
2. Profile peak: with MLA, V0 runs no chunked prefill before 0.8 (vllm 0.8.0 wheel `engine/arg_utils.py`
   `_set_default_args_v0` L1611-1614), so `profile_run` (`worker/model_runner.py` L1239-1354) prefills
   max_num_batched_tokens = max_model_len tokens (T) at once, eagerly, with an empty cache. The largest set of live
   tensors is in an MLA layer's prefill (0.8.0 `attention/backends/mla/common.py` `forward` L1329-1420,
   `_forward_prefill` L1226-1327; `models/deepseek_v2.py` `DeepseekV2MLAAttention.forward` L464-480), per token in
   the model dtype: the residual and the normed input (2H), q_a_proj's output and its norm (2 Lq, with a compressed
   query), kv_a_proj's output (Lkv + R) and the normed latent (Lkv), q_b_proj's query (n(P + R)), the layer's output
   buffer (H), kv_b_proj's K/V (n(P + V)), K and the zero-padded V (2n(P + R)), the attention output without its
   padding (nV), o_proj's result (H); plus, for fp8, o_proj's fp8 input and its per-128 fp32 scales while the GEMM
   runs, or, with tensor parallelism, o_proj's all-reduced copy (H) once it returns: vLLM's all-reduce is out of place
   (0.7.3 and 0.8.0 wheels, `distributed/parallel_state.py` `GroupCoordinator.all_reduce` L287-313 "we always make
   the all-reduce operation out-of-place"; `device_communicators/pynccl.py` `all_reduce` L122 `torch.empty_like`;
   `model_executor/layers/linear.py` `RowParallelLinear.forward` 0.8.0 L1258-1262 keeps its input until it returns,
   and `_forward_prefill`'s K/V tensors live until o_proj returns). A MoE layer
   (`DeepseekV2MoE.forward` L151-177, `fused_moe.py` `fused_experts_impl` L1326-1459) holds the residual, its input
   and the shared experts' output (3H), the router's logits (E) and top-k ids and weights (2k fp32), and, for a chunk
   of M = min(T, VLLM_FUSED_MOE_CHUNK_SIZE 32,768) tokens, fused_moe's caches (cache13 M k max(N, H) and cache2
   M k N/2, N = 2 I_e / tp) with the chunk's fp8 input (M H + M H/128 x 4); then the routed output scaled and summed
   with the shared one (5H in all). The peak is the larger side: MoE below ~62K tokens for DeepSeek-R1 at TP 8, the
   attention above. The 0.7.1-0.7.3 releases' forward has no
   output buffer (H less), and those releases profile only 2,048 tokens (their `config.py` forces chunked prefill off
   after `arg_utils.py` set its 2,048-token budget): the nightlies between 0.7.3 and 0.8.0 are modelled.
"""

from __future__ import annotations

from kvplan.model.layers import Kind
from kvplan.planning.deploy import stages_or_one

ABSORBED = ((0, 7, 1), (0, 8, 0))  # V0's MLA backend materialising W_Q_UK / W_UV_O (0.7.1 wheel: utils.py L327-389)
BLOCK = 128  # fp8 requantization group (the checkpoint's weight_block_size, DeepSeek's [128, 128])
SCALE_BYTES = 4  # an fp32 block scale
ACT = 2  # bytes of the model dtype vLLM loads DeepSeek's MLA models at (bf16 / fp16)
CHUNK = 32768  # VLLM_FUSED_MOE_CHUNK_SIZE's default (0.7.3 envs.py L430, 0.8.0 L449)
# vllm#14842's DeepSeek-R1 TP8 V0 log (a main build of 2025-03-14) holds this much more non-KV memory a GPU than
# kvplan books from the source (tests/test_vllm_v0_mla_memory.py): said, not added. Its pool, 4,739 blocks of 64,
# is 12% smaller than kvplan's 5,368 there
UNEXPLAINED_GIB = 2.9
SMALLER_PCT = 12


def mla_layer(model):
    """The model's MLA attention with the widths the rules need (qk_nope / v head widths read), or None."""
    for layer in model.layers:
        la = getattr(layer, "attention", layer)
        if la.kind == Kind.MLA and getattr(la, "qk_nope_head_dim", 0) and getattr(la, "v_head_dim", 0):
            return la
    return None


def in_absorbed_releases(version: tuple[int, ...]) -> bool:
    return ABSORBED[0] <= version < ABSORBED[1]


def _fp8(model, weight_dtype) -> bool:
    """Whether the attention projections load as fp8 (the checkpoint's own fp8, not re-quantized to another dtype)."""
    name = getattr(weight_dtype, "name", weight_dtype)
    return model.quantization.method == "fp8" and (name is None or str(name).startswith("fp8"))


def mla_layers_on_rank(model, ranges: list[tuple[int, int]] | None = None) -> int:
    """MLA layers of the pipeline stage of `ranges` (kvplan.planning.deploy.stage_ranges; None: one) holding the
    most."""
    kinds = [getattr(la, "attention", la).kind for la in model.layers]
    return max(sum(k == Kind.MLA for k in kinds[a:b]) for a, b in stages_or_one(model, ranges))


def absorbed_layer_bytes(model, tp: int, weight_dtype=None) -> int:
    """Bytes one MLA layer's absorbed decode weights add on one rank (module docstring, 1.)."""
    la = mla_layer(model)
    if la is None:
        return 0
    n, h = max(1, model.num_attention_heads // tp), model.hidden_size
    lq, lkv = la.q_lora_rank or h, la.kv_lora_rank
    q_uk, uv_o = lq * n * lkv, n * lkv * h  # elements
    w_qr = lq * n * la.qk_rope_head_dim * ACT
    quantized = model.quantization.method not in ("bf16", "fp16", "fp32")
    kv_b = lkv * n * (la.qk_nope_head_dim + la.v_head_dim) * ACT if quantized else 0
    if _fp8(model, weight_dtype):
        scales = ((lq // BLOCK) * (n * lkv // BLOCK) + (n * lkv // BLOCK) * (h // BLOCK)) * SCALE_BYTES
        return q_uk + uv_o + scales + w_qr + kv_b
    return (q_uk + uv_o) * ACT + w_qr + kv_b


def absorbed_bytes(model, tp: int, version: tuple[int, ...], weight_dtype=None,
                   ranges: list[tuple[int, int]] | None = None) -> int:
    """What the absorbed decode weights add to "Loading model weights took" on the fullest rank (0 outside
    ABSORBED or for a model without MLA)."""
    if not in_absorbed_releases(version):
        return 0
    return absorbed_layer_bytes(model, tp, weight_dtype) * mla_layers_on_rank(model, ranges)


def profile_peak(model, tp: int, tokens: int, version: tuple[int, ...], weight_dtype=None) -> int | None:
    """Torch peak increase of V0's eager profile forward of `tokens` tokens through an MLA model's prefill (module
    docstring, 2.), or None for a model without MLA widths or a release without the MLA backend (the planner's
    estimate then stands)."""
    la = mla_layer(model)
    if la is None or not in_absorbed_releases(version):
        return None
    n, h = max(1, model.num_attention_heads // tp), model.hidden_size
    p, r, v, lkv, lq = la.qk_nope_head_dim, la.qk_rope_head_dim, la.v_head_dim, la.kv_lora_rank, la.q_lora_rank
    elements = (2 * h + 2 * lq + (lkv + r) + lkv + n * (p + r) + h + n * (p + v) + 2 * n * (p + r) + n * v + h)
    fp8_input = n * v + n * v // BLOCK * SCALE_BYTES if _fp8(model, weight_dtype) else 0
    reduced = h * ACT if tp > 1 else 0  # o_proj's out-of-place all-reduce output, after the fp8 input is freed
    return max(tokens * (elements * ACT + max(fp8_input, reduced)), moe_peak(model, tp, tokens, weight_dtype))


def moe_peak(model, tp: int, tokens: int, weight_dtype=None) -> int:
    """Live bytes at a MoE layer's peak in V0's eager profile forward (module docstring, 2.); 0 for a dense model."""
    p = model.params
    k, e = p.experts_per_token, p.num_experts
    if not k or not e:
        return 0
    h, m = model.hidden_size, min(tokens, CHUNK)
    n = 2 * (model.intermediate_size // k) // tp  # the gate-up width of one expert on this rank
    routing = tokens * (e * ACT + 2 * k * 4)
    chunk_input = m * (h + h // BLOCK * SCALE_BYTES) if _fp8(model, weight_dtype) else 0
    in_experts = 3 * tokens * h * ACT + m * k * (max(n, h) + n // 2) * ACT + chunk_input
    return routing + max(in_experts, 5 * tokens * h * ACT)


def uncertainty_note(model, version: tuple[int, ...]) -> str | None:
    """The plan's note where V0's MLA budget is known to miss (vllm#14842's log), None elsewhere."""
    if not in_absorbed_releases(version) or mla_layer(model) is None:
        return None
    return (f"vLLM before 0.8 with MLA: booked from the source (absorbed decode weights, the eager prefill's peak), "
            f"but vllm#14842's DeepSeek-R1 TP8 log held about {UNEXPLAINED_GIB} GiB a GPU more non-KV memory than "
            f"this (its pool {SMALLER_PCT}% smaller than kvplan's there): this pool may be smaller than shown")


def speed_note(model, version: tuple[int, ...]) -> str | None:
    """The plan's note where calibrated step times are known to be optimistic: V0's MLA engine (0.7.1 up to 0.8.0 on
    an MLA model), whose only runs in the speed corpus (dstack's DeepSeek-R1 on 8 x H200 and 8 x MI300X, vLLM 0.7.3 and
    0.7.4 nightlies) measured slower steps than the coefficients of every other vLLM source price, at every load and
    for no setting found (docs/speed.md, 'The dstack kernels row'); None elsewhere."""
    if not in_absorbed_releases(version) or mla_layer(model) is None:
        return None
    return ("vLLM before 0.8 with MLA (the V0 engine): outside what the step-time model prices; its only runs in the "
            "speed corpus (DeepSeek-R1 on 8 H200 / MI300X) decoded 1.8-3.2x and prefilled 2.3-2.4x slower at 4 "
            "requests than the calibrated figures, so read its speed figures as optimistic")
