"""The FLOPs a Gated DeltaNet layer's chunked recurrence spends per token on one rank (Shape.recurrent_flops).

vLLM and SGLang run a Gated DeltaNet layer's prompt through flash-linear-attention's `chunk_gated_delta_rule`
(vendored: sgl-project/sglang@06beed9248805850f62d1d41c90f37dbc0b4c9d9:python/sglang/srt/layers/attention/fla/
chunk.py, `chunk_gated_delta_rule_fwd`; fla-org/flash-linear-attention@f03cb3ae6a6a4dc0c3a7792ae1dcb6c42de2d2d2:
fla/ops/gated_delta_rule/chunk.py L19-70), in chunks of C = 64 tokens, each kernel a `tl.dot` on tensor cores with
16-bit inputs, per value head (the key heads' q and k are shared by i_h // (H // Hg), not by fewer dots);
TensorRT-LLM's PyTorch backend vendors the same kernels (NVIDIA/TensorRT-LLM@0249976575050d2c624a5f285683c66de311a3b7:
tensorrt_llm/_torch/modules/fla/chunk.py), as vLLM does (vllm-project/vllm@8744bb0924a53c0d16867426b8b17428d41e4002:
vllm/model_executor/layers/fla/ops/chunk.py), so every engine but llama.cpp is priced so:

  chunk_scaled_dot_kkt_fwd   A = beta K K^T            C x C x d_k per chunk   2 C d_k a token
  recompute_w_u_fwd          w = A (k beta g), u = A (v beta)                  2 C d_k + 2 C d_v
  chunk_gated_delta_rule_fwd_h  v_new = u - w h, h += k^T v_new               2 d_k d_v + 2 d_k d_v
  chunk_fwd_o                o = q h + (q k^T, causal) v_new                   2 d_k d_v + 2 C d_k + 2 C d_v

(fla@f03cb3ae: fla/ops/common/chunk_scaled_dot_kkt.py L61, fla/ops/gated_delta_rule/wy_fast.py L180 and L188,
fla/ops/common/chunk_delta_h.py L128-176, fla/ops/common/chunk_o.py L89, L91 and L110; SGLang's copies:
chunk_scaled_dot_kkt.py@d1d84280, wy_fast.py@454e84da, chunk_o.py@b21002eb): 6 C d_k + 4 C d_v + 6 d_k d_v FLOPs a
token a value head, priced at the 16-bit rate (Shape.bf16_rate) in the `gemm` term. Left out, each under 2% of it at
Qwen3-Next's d_k = d_v = 128: solve_tril's inverse of the C x C triangle (fla/ops/utils/solve_tril.py L175-195,
sixteen 16 x 16 x 16 FP32 dots and four 16 x 16 substitutions a chunk, about 2,300 FLOPs a token), the gating and the
cumulative sums (elementwise), and the causal conv1d (2 x kernel x conv width a token). chunk_fwd_o forms q K^T
once for each of its d_v / BV value blocks: SGLang's copy fixes BV = 64 (chunk_o.py@b21002eb `chunk_fwd_o`), so at
d_v = 128 it does so twice, 2 C d_k more a token (9% of the count), not counted (fla's own autotunes BV). A
decode token runs `fused_recurrent` (about 7 d_k d_v scalar FLOPs a token a head), priced here at the chunked count
too: a decode step is bound by the state's read (the `kv` term), and these FLOPs are a small part of its GEMM's.

llama.cpp runs no chunked kernel: ggml's GATED_DELTA_NET on CUDA and HIP scans the tokens one after another in FP32
on the CUDA cores (ggml-org/ggml@36ae4059ee87885f0e606a2ec7b1a227ad0caf85:src/ggml-cuda/gated_delta_net.cu L50-80,
synced from ggml-org/llama.cpp#19504, March 2026; "TODO: Add chunked kernel for even faster pre-fill" at
ggml-org/ggml@d99724f2:src/ggml-cuda/gated_delta_net.cu L180), 7 d_k d_v FLOPs a token a head, under 1% of a step's
time at the CUDA-core FP32 rate: its cost is its serial chain over the tokens, which FLOPs do not price, so a llama.cpp
Shape carries no FLOPs for any recurrent layer, the Gated DeltaNet scan's measured time instead (kvplan.speed.ggml_scan,
on NVIDIA GPUs; kvplan.speed.shape.on_gpu). Its Mamba-2 SSM_SCAN is serial in FP32 too
(ggml@d99724f2:src/ggml-cuda/ssm-scan.cu `ssm_scan_f32_group` L143-237, one token after another) but for a prompt of
129 to 8,192 tokens a sequence on NVIDIA Turing and newer, where since ggml 260279d2 (llama.cpp#22675, 2026-07-28) a
chunked SSD runs in cuBLAS at C = 256 (L15-24, L576-764, `use_ssd` L829-834): C B^T and C times the state in FP32
(CUBLAS_COMPUTE_32F on FP32 operands), the intra-chunk product and the state update in FP16. Not priced: the
profiles carry no FP32 GEMM rate, no timing a token is published, and which path a build runs follows its date.

The other chunked kernels, each in its own module: Mamba-2's SSD scan (kvplan.speed.ssd: vLLM, SGLang, TensorRT-LLM),
Kimi-Linear's KDA (kvplan.speed.kda: vLLM, SGLang) and MiniMax's lightning attention (kvplan.speed.lightning: vLLM),
each from the head widths and chunk the reader gives the layer (RecurrentState.key_head_dim, value_head_dim, chunk;
0 FLOPs where a catalog entry from before carries none). Mamba-1 (Jamba, Falcon-Mamba: a selective scan, not a chunked
matrix form) and LFM2's short convolution count 0.
"""

from __future__ import annotations

from kvplan.model.recurrent import recurrent_states
from kvplan.speed.kda import kda_flops_per_head
from kvplan.speed.lightning import lightning_flops_per_head
from kvplan.speed.ssd import ssd_flops

CHUNK = 64  # chunk_gated_delta_rule_fwd's chunk_size (chunk_local_cumsum(g, chunk_size=64), BT = 64)


def gdn_flops_per_head(key_dim: int, value_dim: int) -> int:
    """FLOPs one value head of a Gated DeltaNet layer spends on one prompt token in fla's chunked forward: the
    module docstring's 6 C d_k + 4 C d_v + 6 d_k d_v."""
    return 6 * CHUNK * key_dim + 4 * CHUNK * value_dim + 6 * key_dim * value_dim


def recurrent_flops(layers, tp: int = 1) -> float:
    """FLOPs a token spends on one rank in the chunked recurrences of these layers (layer_flops, summed)."""
    return sum(layer_flops(layer, tp) for layer in recurrent_states(layers))


def layer_flops(layer, tp: int = 1) -> float:
    """One recurrent layer's chunked-prefill FLOPs a token on one rank, its heads sharded over tp as vLLM and SGLang
    shard them: a Gated DeltaNet's value heads x gdn_flops_per_head, a KDA's or lightning layer's heads x its kernel's
    count a head, a Mamba-2 layer's heads and groups (ssd_flops); 0 for any other kind, or where its widths were not
    read."""
    if not layer.key_head_dim:
        return 0.0
    if layer.variant == "gated_deltanet" and layer.value_heads:
        return layer.value_heads / tp * gdn_flops_per_head(layer.key_head_dim, layer.value_head_dim)
    if layer.variant == "mamba2":
        return ssd_flops(layer, tp)
    per_head = {"kda": kda_flops_per_head, "linear_attention": lightning_flops_per_head}.get(layer.variant)
    return layer.num_heads / tp * per_head(layer.key_head_dim, layer.value_head_dim) if per_head else 0.0
