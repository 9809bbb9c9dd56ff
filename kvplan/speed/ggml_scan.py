"""The measured time llama.cpp's serial Gated DeltaNet scan takes a token (Shape.measured_s_per_token, llama.cpp).

ggml's GATED_DELTA_NET on CUDA runs no chunked form ("//TODO: Add chunked kernel for even faster pre-fill" in
`launch_gated_delta_net`, ggml-org/llama.cpp@0196e69c738331b8ee6ff541f7c9ab49c2422b1d:
ggml/src/ggml-cuda/gated_delta_net.cu): a grid of value heads x sequences x S_v / 4 blocks of four warps, one warp a
column of a head's S_v x S_v FP32 state in registers, and `gated_delta_net_cuda` walks the ubatch's tokens one after
another (`for (int t = 0; t < n_tokens; t++)`: a token's k and q loaded, S^T k and a `warp_reduce_sum`, the delta,
the state update fused with S^T q and a second `warp_reduce_sum`). Each token waits on the one before, so the kernel
is bound by that chain's latency, not by a FLOP rate or bytes (AMD-Ecosystem/llama.cpp#54: "latency bound rather than
limited by bandwidth or arithmetic"): no profile rate prices it, and a fitted coefficient must not scale it (round 43
carried it as FLOPs in the `gemm` term, whose coefficient, 2.75, then priced it at 2.75 times its measured time).

Priced at its measured time: ggml-org/llama.cpp#22587 (2026-05-01) timed the kernel on an RTX 5090 at Qwen3.5-35B-A3B's
shape (S_v 128, 16 key and 32 value heads, one sequence, FP32), master column 279.6 us at 512 tokens and 525.1 us at
1,024, so (525.1 - 279.6) / 512 = 0.4795 us a token a layer (the fixed 24-28 us a call at 1 to 8 tokens is the call's
launch and copies: the `step` / `layer` terms and the state's bytes, the `kv` term). That kernel is
ggml-org/llama.cpp#20391's warp-a-column one (merged 2026-03), the one master ran at that PR's date and at the
corpus's Qwen3.5 runs (llama.cpp#22298, 2026-04-25). The time enters the `measured` term, whose coefficient is 1 in
every set, never fitted (kvplan.speed.fit.PINNED).

Carried to another GPU: unchanged, on NVIDIA GPUs only (`vendor`), for S_v = 128 only (the template timed). The chain
is the same CUDA code on 32-lane warps, its time the chain's cycles over the SM clock, which no profile carries; at the
5090's 2.407 GHz boost it is a floor on a part of a lower clock (an RTX 4090's 2.52 GHz runs it about as fast; an
A100's 1.41 GHz slower). Not on AMD (0): HIP runs it on 64-lane wavefronts on CDNA (`ggml_cuda_get_physical_warp_size`),
its shuffles through the LDS (`ds_bpermute`), a different chain, and the one AMD figure (#54's 220.9 ms for the op at
2,048 tokens a ubatch on gfx1151) states neither its layers nor its passes. Every sequence's tokens are priced (the
measured shape's one sequence is 1,024 blocks, about an RTX 4090's 1,536 resident at once, so a second sequence's blocks
wait for a second wave). Not priced, no published timing a token: the KDA branch of the same kernel (a gate a row),
Mamba-2's SSM_SCAN (llama.cpp#10558, #9126 and #22675 time llama-bench runs, not the kernel a token), RWKV's WKV.
"""

from __future__ import annotations

from kvplan.hardware.facts import vendor_of
from kvplan.model.recurrent import recurrent_states

SERIAL_STEP_S = (525.1 - 279.6) / 512 * 1e-6  # a token's step of one layer's scan: llama.cpp#22587, RTX 5090, master
TIMED_HEAD_DIM = 128  # S_v of the timed template (gated_delta_net_cuda<128, ...>)
CARRIED_TO = ("NVIDIA",)  # vendors whose GPUs run the timed CUDA kernel on 32-lane warps


def scan_seconds(layers, gpu) -> float:
    """Seconds llama.cpp's serial Gated DeltaNet scans take a token over these layers on `gpu`: SERIAL_STEP_S for each
    Gated DeltaNet layer of S_v = TIMED_HEAD_DIM on a GPU of a vendor in CARRIED_TO, 0 otherwise."""
    if vendor_of(gpu) not in CARRIED_TO:
        return 0.0
    return sum(SERIAL_STEP_S for layer in recurrent_states(layers)
               if layer.variant == "gated_deltanet" and layer.value_head_dim == TIMED_HEAD_DIM)
