"""Attention-DP workers that run every forward together: the GPU time per request of one worker's cycle.

A step lasts as long as its slowest worker's, so a step in which any worker prefills is prefill-paced on all of them
(SGLang's DP attention; vLLM's data-parallel ranks of a MoE model, whose chunks ride in decode steps). Which engines
run so is kvplan.engines.scheduler's `lockstep_workers` / `lockstep_mixed`; `load.py`'s `combos` adds the answer up.
Split from kvplan/speed/load.py (round 37) with its arguments named, not read from a Load; the arithmetic unchanged.
"""

from __future__ import annotations

from kvplan.speed.wave import wave_steps


def lockstep_cycle(b: float, g: float, isl: float, osl: float, chunk: int, workers: int,
                   mixed: bool) -> tuple[float, float, float]:
    """T, the GPU time per request, as (a, b, e) of t_wave, t_dec, t_grp, where `workers` data-parallel workers run
    every forward together (attention DP): a step lasts as long as its slowest worker's, so a step in which any
    worker prefills takes a prefill step's time (t_wave / P) on all of them. Each worker's cycle (its B running
    requests replaced once) is S = osl + P steps, P of them its own prefill steps: its B / G groups (G = `group`:
    requests arriving together) of ceil(G x isl / chunk) steps each, at least the K = ceil(B x isl / chunk) its
    prompts fill; the rest decode. Its prefill steps fall at independent times, so a step holds some worker's
    prefill with probability u = 1 - (1 - P / S)^n for n workers, and a cycle takes u S prefill-paced steps and
    (1 - u) S decode steps: T = (u S / P x t_wave + (1 - u) S x t_dec) / B. One worker (n = 1): u S = P, T =
    (t_wave + osl x t_dec) / B. Where the engine carries its prefill chunks inside decode steps (`mixed`: vLLM),
    every one of a cycle's S = max(osl, P) steps decodes and u S of them also carry some worker's chunk: T =
    (u S / P x t_wave + osl x t_dec) / B, the same at n = 1."""
    k, _ = wave_steps(b, isl, osl, chunk)
    p = max(k, b / g * max(1.0, -(-g * max(1.0, isl) // max(1, chunk))))
    s = max(osl, p) if mixed else osl + p  # mixed: chunks ride in decode steps, every step decodes
    busy = s * (1 - (1 - p / s) ** workers)  # the steps holding some worker's prefill
    return busy / p / b, (osl if mixed else s - busy) / b, 0.0
