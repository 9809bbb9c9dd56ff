"""The FLOPs a MiniMax lightning-attention layer's prefill spends per token on one rank (kvplan.speed.recurrent).

vLLM runs a MiniMax-Text-01 / M1 lightning layer's prompt, one sequence at a time, through `lightning_attention`
(vllm-project/vllm@030ea52effcb05071543c8c42b8f0145e94cee43: vllm/model_executor/layers/lightning_attn.py,
`_attention.forward`): blocks of BLOCK = 256 tokens, the diagonal block in sub-blocks of CBLOCK = 32, the block states
in sub-blocks of 64. Per head of key width d and value width e, its `tl.dot`s:

  _fwd_diag_kernel      each 32-row sub-block i of a block against sub-blocks 0..i: q k^T (decayed) then (q k^T) v,
                        (NC + 1) NC / 2 pairs of 2 x 32 x 32 x (d + e) a block, NC = 256 / 32    (BLOCK + CBLOCK)(d + e)
  _fwd_kv_parallel      a block's state (k decayed)^T v                                          2 d e
  _fwd_none_diag_kernel  q kv from the blocks before (decayed)                                   2 d e

so (BLOCK + CBLOCK)(d + e) + 4 d e FLOPs a token a head, 139,264 at MiniMax's d = e = 128. Their operands are FP32 (q,
k and v loaded `.to(tl.float32)`, kv accumulated in FP32), which Triton's tl.dot runs as TF32 on tensor cores by
default; the GPU profiles carry no TF32 rate, so they are priced at the 16-bit rate (`gemm` term) as the Gated
DeltaNet's, which NVIDIA's datasheets put at twice TF32's: this term is counted at about half its time; it is under 1%
of a MiniMax-M1 layer's weight FLOPs a token (64 x 139,264 = 8.9 M beside about 1.2 G). Left out: _fwd_kv_reduce's
block-to-block recurrence (d e multiply-adds a block of 256), the decay exponentials and the output gate and norm
(elementwise). A decode token runs linear_decode_forward_triton, priced at this count as kvplan.speed.recurrent says
for GDN. The count is vLLM's kernel's: other engines' lightning kernels are not read; llama.cpp's is not priced
(kvplan.speed.recurrent).
"""

from __future__ import annotations

BLOCK = 256  # lightning_attention's block_size
DIAG_BLOCK = 32  # CBLOCK of _fwd_diag_kernel


def lightning_flops_per_head(key_dim: int, value_dim: int) -> int:
    """FLOPs one lightning-attention head spends on one prompt token: (BLOCK + CBLOCK)(d + e) + 4 d e."""
    return (BLOCK + DIAG_BLOCK) * (key_dim + value_dim) + 4 * key_dim * value_dim
