"""The lists `sweep` and `cheapest` take (`--models a,b|all`, `--gpu h100,h200|all`, weight formats) and the
notes those lists need once, since neither command prints a plan's warnings (memory_caveats, weight_caveats)."""

from typing import Optional

from kvplan.cli._common import print_notes
from kvplan.core.dtypes import canonical_weight_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.hardware.gpus import find_gpu, load_gpus
from kvplan.model.weights import assumed_int4_group
from kvplan.planning.plan import int4_group_assumed, memory_warnings
from kvplan.report.text import format_warning
from kvplan.sources.catalog import load_catalog
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model

GPU_LIST_HELP = "Comma-separated GPU names or aliases, or `all` (default)."


def names(text: str, what: str) -> list[str]:
    """`a, b,a` -> ['a', 'b']; an empty list is a usage error naming the flag."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise KvplanError(f"{what} list {text!r} is empty", EXIT_USAGE)
    if len(items) > 1 and "all" in (n.lower() for n in items):  # was "unknown GPU 'all'" / "unknown model 'all'"
        raise KvplanError(f"{what} {text!r}: 'all' (every one there is) stands alone; give it by itself or a list of "
                          "names", EXIT_USAGE)
    return list(dict.fromkeys(items))


def resolve_gpus(text: str, hw_dirs) -> list:
    """`h100,h200` or `all` -> GPU objects (each once, in the order given)."""
    items = names(text, "--gpu")
    if [n.lower() for n in items] == ["all"]:
        return list(load_gpus(hw_dirs).values())
    out = {}
    for n in items:
        g = find_gpu(n, hw_dirs)
        out.setdefault(g.key, g)
    return list(out.values())


def resolve_models(text: str, revision=None, token=None, timeout: float = 10.0, engine=None) -> list:
    """`llama-3.1-70b,qwen3-32b` or `all` (the catalog) -> ModelSpecs, notes on stderr (as `engine`'s options
    leave them true: print_notes)."""
    items = names(text, "--models")
    if [n.lower() for n in items] == ["all"]:
        return sorted(load_catalog(), key=lambda s: s.name)
    specs = {}
    for n in items:
        r = resolve_model(n, revision=revision, token=token, timeout=timeout,
                          loaded_bytes=loaded_as_model_dtype)
        print_notes(r, engine)
        specs.setdefault(r.spec.name, r.spec)
    return list(specs.values())


def weight_dtypes(text: Optional[str]) -> list:
    """`bf16,int4,auto` -> canonical weight dtypes (None = the checkpoint's)."""
    if text is None:
        return [None]
    out = []
    for n in names(text, "--weight-dtype"):
        key = None if n.lower() in ("auto", "checkpoint") else canonical_weight_dtype(n)
        if key not in out:
            out.append(key)
    return out


def memory_caveats(gpus) -> list[str]:
    """For the commands that plan many GPUs at once and print no plan's warnings (sweep, cheapest): each GPU's
    memory assumptions (kvplan.planning.plan.memory_warnings), once per GPU, so a ranking that includes it says so;
    `fit` on one of them words each assumption with its figures."""
    return [f"GPU {g.key}: {format_warning(w)}" for g in gpus for w in memory_warnings(g, g.memory_usable_bytes)]


def weight_caveats(specs, weight_dtypes) -> list[str]:
    """For the commands that print no plan's warnings (sweep, cheapest): one line when a weight dtype assumes an int4
    group of models whose checkpoints state none (kvplan.model.weights.assumed_int4_group); `fit` words it per plan."""
    assumed: dict[int, list[str]] = {}
    for s in specs:
        for group in {assumed_int4_group(s, w) for w in weight_dtypes} - {0}:
            assumed.setdefault(group, []).append(s.name)
    return [f"weights int4 for {', '.join(names[:5])}" + (f" and {len(names) - 5:,} more" if len(names) > 5 else "")
            + f": {int4_group_assumed(g)}" for g, names in assumed.items()]
