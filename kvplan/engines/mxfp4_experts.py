"""The bytes one MXFP4 MoE expert of one layer takes, as stored and in the layouts engines convert it to.

gpt-oss's expert (openai/gpt-oss config and checkpoint): w13 [2 I, H] and w2 [H, I] as uint8 values (two fp4 a
byte) with one uint8 scale per 32 along the contraction axis, and bf16 biases [2 I] and [H]. vLLM's and SGLang's
Mxfp4MoEMethod allocate these shapes at their own padded I (and H) and widen the biases to fp32; each engine's
padding stays in its own module (kvplan.engines.vllm.mxfp4, kvplan.engines.sglang.loaded), the shapes and the
triton_kernels layouts they share are here, so both engines price the same library the same way.
"""

from __future__ import annotations

from kvplan.core.intmath import round_up


def stored_expert(i: int, h: int, bias_bytes: int = 2) -> int:
    """w13 [2I, H/2] + scales [2I, H/32] + bias [2I], w2 [H, I/2] + scales [H, I/32] + bias [H]: the values and
    scales 17/32 B a weight, 3 I H of them (where a tensor-parallel I leaves part of a 32-wide scale block, as 2880 /
    4 = 720 does, a rank's share of the checkpoint's scales, not whole blocks); bf16 biases as stored (`bias_bytes`
    4: widened to fp32)."""
    return 3 * i * h * 17 // 32 + bias_bytes * (2 * i + h)


def triton_hopper_expert(i: int, h: int, warps: int = 8) -> int:
    """The expert in triton_kernels' Hopper layouts (`_swizzle_mxfp4`, num_warps 8; triton-lang/triton
    python/triton_kernels/triton_kernels/tensor_details/layout_details/hopper_value.py, commit 000df03e, and
    hopper_scale.py, commit 14dd7a19): the packed values [K/2, N] padded to K/2 % 64 and N % 256, the scales [N, K/32]
    to N % (32 x warps) and K/32 % 2, one copy of them (vLLM's logs: kvplan.engines.sglang.loaded), fp32 biases.
    `i` is the engine's already padded I."""
    values = round_up(h // 2, 64) * round_up(2 * i, 256) + round_up(i // 2, 64) * round_up(h, 256)  # w13 K=H, w2 K=I
    scales = round_up(2 * i, 32 * warps) * round_up(h // 32, 2) + round_up(h, 32 * warps) * round_up(i // 32, 2)
    return values + scales + 4 * (2 * i + h)
