"""What the CLI calls each input the core names: `tp` is `--tp`, `context` is `--ctx`.

The core names an input only by its Python API keyword (kvplan.core.errors.arg); while a command runs,
`kvplan.cli._common.cli_errors` has every message, note and label call it by the flag this table gives.
A keyword is its flag with dashes (`engine_version` is `--engine-version`) unless FLAGS says otherwise.
"""

from __future__ import annotations

# Keywords whose flag is not `--` + the keyword with dashes.
FLAGS = {
    "context": "--ctx",
    "engine_opts": "--engine-opt",
}

# Commands that call an input otherwise (by the command function's name).
PER_COMMAND: dict[str, dict[str, str]] = {}


def flag(name: str, command: str | None = None) -> str:
    """The flag of the input the core calls `name`, as `command` spells it."""
    return PER_COMMAND.get(command or "", {}).get(name) or FLAGS.get(name) or "--" + name.replace("_", "-")
