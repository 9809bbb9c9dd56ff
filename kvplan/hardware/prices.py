"""GPU prices the user supplies (kvplan bundles none): a YAML map of GPU name to price per GPU-hour.

    # prices.yaml: any currency, per GPU per hour
    currency: USD        # optional label, shown in headers
    h100: 2.49
    h200: 3.10
    a100-80: 1.29

Names resolve like --gpu (keys or aliases, case and '-'/'_' ignored). A profile's own
`price_per_hour` (a user's --hw-profiles file) is used for GPUs the file does not name.
Every problem is one line naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvplan.core.capped import read_capped
from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.hardware.yaml_strict import load_yaml_strict

MAX_PRICES_BYTES = 1 << 20
MAX_PRICE = 1e9  # per GPU-hour, in any currency; a 400-digit price once overflowed float()


@dataclass(frozen=True)
class Prices:
    """Price per GPU-hour by GPU key, from a file and/or the profiles."""

    by_gpu: dict = field(default_factory=dict)  # GPU key -> price per GPU-hour
    currency: str = ""
    source: str = ""

    def price(self, gpu) -> float | None:
        """The file's price for this GPU, else its profile's price_per_hour, else None."""
        hit = self.by_gpu.get(gpu.key)
        return hit if hit is not None else gpu.price_per_hour

    @property
    def unit(self) -> str:
        """'USD' or 'price units' for labels."""
        return self.currency or "price units"


def load_prices(path: str | Path | None, hw_dirs=()) -> Prices:
    """Read and validate a prices file against the GPU catalog (plus profiles in hw_dirs)."""
    if path is None:
        return Prices()

    p = Path(path).expanduser()
    where = f"prices file {path}"
    if not p.is_file():
        what = "is not a file" if p.exists() else "does not exist"
        raise KvplanError(f"{where} {what}", EXIT_NOT_FOUND)
    try:
        text = read_capped(p, MAX_PRICES_BYTES, where, "a prices file").decode("utf-8")
    except UnicodeDecodeError:
        raise KvplanError(f"{where}: not UTF-8 text", EXIT_USAGE) from None
    except OSError as exc:
        raise KvplanError(f"{where}: cannot read: {exc.strerror or exc}", EXIT_USAGE) from None
    data = load_yaml_strict(text, where)  # a GPU named twice (`h100: 2.49`, `h100: 3.0`) is an error here
    if data is None:
        raise KvplanError(f"{where}: empty; expected lines like `h100: 2.49` (price per GPU-hour)", EXIT_USAGE)
    if not isinstance(data, dict):
        raise KvplanError(f"{where}: expected a mapping of GPU name to price per GPU-hour "
                          f"(like `h100: 2.49`), got {type(data).__name__}", EXIT_USAGE)
    currency = data.pop("currency", "")
    if not isinstance(currency, str):
        raise KvplanError(f"{where}: key 'currency' must be a text label like USD, got {currency!r}", EXIT_USAGE)
    by_gpu: dict[str, float] = {}
    named: dict[str, str] = {}  # GPU key -> the name the file used
    for key, value in data.items():
        name = str(key)
        try:
            gpu = find_gpu(name, hw_dirs)
        except KvplanError as exc:
            raise KvplanError(f"{where}: key {name!r}: {exc.message}", EXIT_USAGE) from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < MAX_PRICE):
            raise KvplanError(f"{where}: key {name!r}: price must be a positive number per GPU-hour, "
                              f"got {value!r}", EXIT_USAGE)
        if gpu.key in named and by_gpu[gpu.key] != float(value):
            raise KvplanError(f"{where}: key {name!r}: {gpu.key} already priced {by_gpu[gpu.key]:g} "
                              f"as {named[gpu.key]!r}", EXIT_USAGE)
        by_gpu[gpu.key] = float(value)
        named[gpu.key] = name
    return Prices(by_gpu, currency.strip(), str(path))
