"""What every tower counter shares: the `Towers` result, a checked integer from a tower config, one ViT block."""

from __future__ import annotations

from typing import NamedTuple


class Towers(NamedTuple):
    """Parameters of the towers and projectors, and how many of them every tp rank holds whole."""

    params: int
    replicated: int = 0
    what: str = "vision tower and projector"


def _int(vc: dict, key: str, default: int | None = None) -> int | None:
    v = vc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 10**7:
        return None
    return v


def vit_block(d: int, i: int) -> int:
    """One pre-norm ViT encoder layer with biases: two LayerNorms, q/k/v and output projections, a
    two-matrix MLP of width i (SigLIP, Llama 4's encoder, Qwen3.5's and Kimi's towers)."""
    return 2 * 2 * d + 4 * (d * d + d) + (d * i + i) + (i * d + d)
