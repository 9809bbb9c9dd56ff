"""The FLOPs a Kimi Delta Attention (KDA) layer's chunked prefill spends per token on one rank (kvplan.speed.recurrent).

vLLM runs a Kimi-Linear KDA layer's prompt through its copy of flash-linear-attention's chunk_kda
(vllm-project/vllm@00bb9c07e50bdfe206d2afd78975eb132a1ba364: vllm/model_executor/layers/fla/ops/kda.py,
`chunk_kda_fwd` -> `_chunk_kda_fwd_with_cumulative_g`), and SGLang a copy of vLLM's (sgl-project/sglang@0465eebc:
python/sglang/srt/layers/attention/fla/kda.py, "Adapted from vllm ... kda.py"); fla's own is
fla-org/flash-linear-attention@bc3b101d: fla/ops/kda/chunk_fwd.py `chunk_kda_fwd`. Chunks of C = FLA_CHUNK_SIZE = 64
tokens, split into sub-chunks of BC = min(16, C) (`chunk_kda_scaled_dot_kkt_fwd`). KDA is the Gated DeltaNet with a
gate per key channel, so its intra-chunk products cannot take the gate out of one C x C dot: per value head of key
width d_k and value width d_v, its `tl.dot`s on tensor cores:

  chunk_kda_scaled_dot_kkt_fwd_kernel_intra_sub_inter   A = beta K K^T and Aqk = Q K^T, gated, on the C (C - BC) / 2
                                                        pairs below the sub-chunk diagonal    2 (C - BC) d_k a token
  recompute_w_u_fwd_kernel    u = A (v beta), w = A (k beta exp g), C x C                     2 C d_v + 2 C d_k
  chunk_gated_delta_rule_fwd_h (gk)   v_new = u - w h, h += k_g^T v_new                       4 d_k d_v
  chunk_gla_fwd_kernel_o      o = (q exp g) h + Aqk v_new (causal mask applied, full C x C)   2 d_k d_v + 2 C d_v

so (4 C - 2 BC) d_k + 4 C d_v + 6 d_k d_v FLOPs a token a head, at the 16-bit rate (solve_tril gives A in k's dtype;
Aqk is cast to v's before its dot), in the `gemm` term as the Gated DeltaNet's. Left out: the sub-chunk diagonal,
which `chunk_kda_scaled_dot_kkt_fwd_kernel_intra_sub_intra` forms token by token on the CUDA cores in FP32
(`tl.sum(b_k * b_ktg, 1)`: 4 BC d_k multiply-adds and BC d_k exp2 a token a head, 8,192 and 2,048 at d_k = 128),
which no FP32 rate in a GPU profile prices; solve_tril's inverse of the C x C triangle (as for GDN); the gate's
softplus and cumsum (elementwise); the causal conv1d. A decode token runs fused_recurrent_kda, priced at this count,
as kvplan.speed.recurrent says for GDN. The count is vLLM's and SGLang's kernels': TensorRT-LLM's, if any, is not
read; llama.cpp's is not priced (kvplan.speed.recurrent).
"""

from __future__ import annotations

CHUNK = 64  # FLA_CHUNK_SIZE, the chunk chunk_kda_fwd runs at (vllm ... fla/ops/utils.py)
SUB_CHUNK = 16  # BC = min(16, BT) in chunk_kda_scaled_dot_kkt_fwd


def kda_flops_per_head(key_dim: int, value_dim: int) -> int:
    """FLOPs one KDA head spends on one prompt token in the chunked forward's tensor-core dots: the module
    docstring's (4 C - 2 BC) d_k + 4 C d_v + 6 d_k d_v."""
    return (4 * CHUNK - 2 * SUB_CHUNK) * key_dim + 4 * CHUNK * value_dim + 6 * key_dim * value_dim
