"""The time llama.cpp's serial Gated DeltaNet scan takes per token (Shape.recurrent_flops of a llama.cpp Shape).

ggml's GATED_DELTA_NET on CUDA and HIP (ggml-org/ggml@d99724f2b141fed9e1a9f402213506c081433465:
src/ggml-cuda/gated_delta_net.cu) runs no chunked form ("TODO: Add chunked kernel for even faster pre-fill", L180):
`launch_gated_delta_net` (L169-184) launches a grid of H value heads x sequences x S_v / 4 blocks of four warps, one
warp a column of a head's S_v x S_v FP32 state held in registers (L50-61), and `gated_delta_net_cuda` (L63-158) walks
the tokens one after another: a token's k and q loaded (L74-82), S^T k over the warp's rows and a warp_reduce_sum
(L87-93), the delta (L96), the state update fused with S^T q and a second warp_reduce_sum (L100-107). About
7 S_v^2 FP32 FLOPs a token a head, but each token waits on the one before it (two global loads and two shuffle
reductions a token), so the kernel is bound by that chain's latency, not by the CUDA cores' FP32 rate nor by bytes:
PR ggml-org/llama.cpp#22587 (2026-05-01) timed it on an RTX 5090 at Qwen3.5-35B-A3B's shape (S_v 128, 16 key and 32
value heads, one sequence), master column: 279.6 us at 512 tokens, 525.1 us at 1,024, so (525.1 - 279.6) / 512 =
0.4795 us a token (the 256-to-512 step gives 0.484), where 7 x 128^2 x 32 = 3.67 MFLOP a token at the 5090's
FP32 rate (170 SMs x 128 lanes x 2 x 2.407 GHz = 104.8 TFLOPS) would be 0.035 us: that rate prices 7% of it, so
no FP32 rate is added to the profiles.
AMD-Ecosystem/llama.cpp#54 (2026-07-16) measured the same kernel at 18% of Qwen3.5-35B-A3B's prefill GPU time on
gfx1151 and calls it "latency bound rather than limited by bandwidth or arithmetic".

Priced so: `SERIAL_STEP_S` a token for each Gated DeltaNet layer, whatever the GPU, carried as the FLOPs that time
takes at the Shape's 16-bit rate (scan_flops: gemm_seconds divides the recurrent FLOPs by that rate), no coefficient
of its own. What it leaves out, each making it a floor: the per-token chain runs at the GPU's clock and memory
latency, which no profile carries (a GPU of a lower clock than the 5090's 2.407 GHz, or of 64-lane wavefronts, runs
it slower); a grid of more blocks than the GPU holds at once (more value heads) runs in more than one wave. Where it
may be high: every sequence's tokens are priced, as the tokens the GEMM term reads: a step's sequences run side by
side in the grid, which one sequence of 32 value heads already about fills (1,024 blocks of 128 threads; an RTX
4090's 128 SMs hold at most 1,536, at 1,536 threads an SM), so a batch of sequences is priced high only where one
sequence's grid leaves the GPU idle (fewer value heads, more SMs). The microbenchmark's fixed part (24-28 us a call
at 1 to 8 tokens) is the step's and layer's own terms' and the state's bytes (the `kv` term). The timing is the
warp-a-column kernel of ggml-org/llama.cpp#20391 (March 2026), the one llama.cpp ran from then until at least that
PR; a later chunked kernel would run faster. KDA layers (the kernel's KDA branch, a gate a row) and Mamba-2's
SSM_SCAN (kvplan.speed.recurrent) are not measured and stay unpriced.
"""

from __future__ import annotations

from kvplan.model.recurrent import recurrent_states

SERIAL_STEP_S = (525.1 - 279.6) / 512 * 1e-6  # a token's step of one layer's scan: llama.cpp#22587, master column


def scan_seconds(layers) -> float:
    """Seconds llama.cpp's serial scans take per token over these layers: SERIAL_STEP_S for each Gated DeltaNet."""
    return sum(SERIAL_STEP_S for layer in recurrent_states(layers) if layer.variant == "gated_deltanet")


def scan_flops(layers, rate: float) -> float:
    """The scans' time a token (scan_seconds) as the FLOPs it takes at `rate`, the Shape's 16-bit rate that
    gemm_seconds prices a llama.cpp Shape's recurrent FLOPs at."""
    return scan_seconds(layers) * rate
