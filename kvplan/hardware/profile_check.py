"""A profile file's fields checked, each failure one line naming the file and the field: the base of the GPU
(kvplan.hardware.gpu_profile), host (kvplan.hardware.hosts) and link (kvplan.hardware.links) profile readers, with
the vocabulary they share (confidence levels, the lookup form of a name).
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.hardware.yaml_strict import show

CONFIDENCE_LEVELS = ("high", "medium", "low")


def norm_name(name: str) -> str:
    """Lookup form of a name: lowercase, with '-', '_' and whitespace removed."""
    return re.sub(r"[\s_-]+", "", name.strip().lower())


class ProfileChecker:
    """Validates one parsed profile file (a GPU's here, a host's in kvplan.hardware.hosts); every failure is
    one line naming the file (`what` and its path) and the field."""

    what = "hw profile"

    def __init__(self, path: str, data: Any):
        self.path = path
        if not isinstance(data, dict):
            self.fail(f"must be a mapping of fields, got {type(data).__name__} {show(data)}")
        self.data = data

    def fail(self, message: str) -> NoReturn:
        raise KvplanError(f"{self.what} {self.path}: {message}", EXIT_USAGE)

    def bad(self, name: str, want: str, value: Any) -> NoReturn:
        self.fail(f"field '{name}' must be {want}, got {show(value)}")

    def text(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            self.bad(name, "a non-empty string", value)
        return value.strip()

    def known_fields(self, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
        """Every field one the file kind knows, and every required one given."""
        for name in self.data:
            if name not in required and name not in optional:
                self.fail(f"unknown field {show(name)} (allowed: {', '.join(required + optional)})")
        for name in required:
            if name not in self.data:
                self.fail(f"missing required field '{name}'")
