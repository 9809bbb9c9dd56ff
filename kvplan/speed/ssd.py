"""The FLOPs a Mamba-2 layer's chunked SSD scan spends per prompt token on one rank (kvplan.speed.recurrent).

vLLM, SGLang and TensorRT-LLM's PyTorch backend run a Mamba-2 mixer's prompt through the same Triton SSD kernels, each
a copy of state-spaces/mamba's ops/triton (vllm-project/vllm@057727a9c6ba3fe3cd1328209790bf78de3d3516:
vllm/model_executor/layers/mamba/ops/ssd_combined.py `_mamba_chunk_scan_combined_fwd`, "Adapted from
state-spaces/mamba v2.2.4"; sgl-project/sglang@13be28e2: python/sglang/srt/layers/attention/mamba/ops/
ssd_combined.py; NVIDIA/TensorRT-LLM@09759494: tensorrt_llm/_torch/modules/mamba/ssd_combined.py), in chunks of
C tokens, C the config's `mamba_chunk_size` or `chunk_size` (vLLM's ModelConfig.get_mamba_chunk_size;
kvplan.readers.states.mamba_chunk). With H heads of head_dim P, state size N and G groups of B and C (shared by
H / G heads), the kernels' `tl.dot`s on 16-bit operands (tensor cores), line numbers at
state-spaces/mamba@e9594ce1c732d97440f0332fdc43170a2294dbfa: mamba_ssm/ops/triton/:

  _chunk_state_fwd      a chunk's state x^T (B decayed)   P x C x N a head a chunk   2 P N a token a head
                        (ssd_chunk_state.py L254, `b.to(x_ptr.dtype.element_ty)` L253)
  _bmm_chunk_fwd        CB = C B^T, not causal            C x C x N a group          2 C N a token a group
                        (ssd_bmm.py L78; ssd_combined.py L386 passes no `causal`, nor do the three copies)
  _chunk_scan_fwd       out = C prev_states               C x N x P a head           2 N P a token a head
                        (ssd_chunk_scan.py L118 / L125, prev_states cast to C's dtype)
                        out += (CB decayed, causal) x     C x C x P a head           2 C P a token a head
                        (L150; cb cast to x's dtype, L148)

so 4 P N + 2 C P a token a head and 2 C N a token a group, priced at the 16-bit rate in the `gemm` term as the Gated
DeltaNet's are. A rank runs H / tp heads and its share of the groups, a whole group where tp does not divide them
(RecurrentState.replicated_groups, as vLLM replicates B and C). Counted high: _chunk_scan_fwd's CB x loop stops at
the causal diagonal of its BLOCK_SIZE_M rows (`K_MAX = min((pid_m + 1) * BLOCK_SIZE_M, chunk_size_limit)`, L135),
P (C + BLOCK_SIZE_M) rather than 2 C P, with BLOCK_SIZE_M autotuned among 32, 64 and 128 (L32-45): at Nemotron-H's
C = 128 at most 6,144 of a head's 83,968 (7%). Left out: _state_passing_fwd's chunk-to-chunk recurrence (ssd_state_
passing.py L30, P N FP32 multiply-adds a chunk, 2 P N / C a token), chunk_state_varlen's final state (L640-694, the
last chunk of each sequence once), the dt cumsum and softplus, the D skip, the z gate and the gated RMSNorm
(elementwise), and the causal conv1d (2 x kernel x conv width a token). A decode token runs selective_state_update
(about 5 P N scalar FLOPs a token a head), priced at this chunked count too, as kvplan.speed.recurrent says for GDN.

Newer vLLM trees also carry a fused prefill path (ops/ssd_fused5.py, chosen in ops/ssd_prefill_dispatch.py), not read
here: the count above is the five-kernel path's. SGLang read NemotronH's chunk from `mamba_chunk_size` only and ran
Nemotron-3 Super at 256 rather than its config's 128 until its "fix: Nemotron chunk size alias"
(python/sglang/srt/configs/nemotron_h.py); kvplan prices the config's.
llama.cpp is not priced here: kvplan.speed.recurrent says why.
"""

from __future__ import annotations


def ssd_flops_per_head(state: int, head_dim: int, chunk: int) -> int:
    """FLOPs one Mamba-2 head spends on one prompt token in the SSD kernels' head-wise dots: 4 P N + 2 C P."""
    return 4 * head_dim * state + 2 * chunk * head_dim


def ssd_flops_per_group(state: int, chunk: int) -> int:
    """FLOPs one group of B and C spends on one prompt token in _bmm_chunk_fwd (C B^T over the whole chunk): 2 C N."""
    return 2 * chunk * state


def ssd_flops(layer, tp: int = 1) -> float:
    """A Mamba-2 layer's SSD FLOPs a prompt token on one rank: its num_heads / tp heads and its share of the
    (replicated) groups. 0 where the reader did not give the state size, head_dim and chunk (a catalog entry from
    before they were read)."""
    if not (layer.key_head_dim and layer.value_head_dim and layer.chunk):
        return 0.0
    heads = layer.num_heads / tp * ssd_flops_per_head(layer.key_head_dim, layer.value_head_dim, layer.chunk)
    groups = layer.replicated_groups(tp) / tp * ssd_flops_per_group(layer.key_head_dim, layer.chunk)
    return heads + groups
