"""One engine setting read as a flag (`opt_bool`): the words every engine's options and every corpus run's flags
share (1/yes/true/on, 0/no/false/off), with the one-line error of a value that is neither.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg


def bad_opt(key: str, value, problem: str, allowed=None) -> KvplanError:
    """'--engine-opt KEY <problem>': one engine setting's value refused (the input is `engine_opts`)."""
    return KvplanError(f"{arg('engine_opts')} {key} {problem}", EXIT_USAGE, param="engine_opts", value={key: value},
                       allowed=allowed)


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def opt_bool(opts: dict, key: str, default: bool) -> bool:
    """opts[key] as a flag, `default` where it is not given."""
    if key not in opts:
        return default
    v = str(opts[key]).strip().lower()
    if v in TRUE_WORDS:
        return True
    if v in FALSE_WORDS:
        return False
    raise bad_opt(key, opts[key], f"must be true or false, got {opts[key]!r}")
