"""Integer arithmetic every layer of kvplan shares: ceiling division, rounding up to a multiple, divisors.

Blocks, pages, shards and per-rank shares are counted in whole units, so sizes round up; written
once here instead of as `-(-a // b)` in each module. Primitive: imports nothing from kvplan.
"""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for integers (b > 0), exact at any size (no float)."""
    return -(-a // b)


def round_up(a: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is at least `a`."""
    return cdiv(a, multiple) * multiple


def divisors(n: int) -> list[int]:
    """Every d in 1..n that divides n, ascending (a layout's tp and pp sizes, a model's heads' tp sizes)."""
    return [d for d in range(1, n + 1) if n % d == 0]
