"""Fuzz: real configs with one value mutated are read, or refused with a KvplanError; never a crash.

Every config.json kvplan has (../shared/configs when present, the catalog's extra configs, the family
fixtures) is mutated many times with a seeded generator: a key set to a value of the wrong type or an
absurd size, or removed, at any depth (block_configs, text_config, quantization_config included).
Whatever spec_from_config accepts must then plan through `kvplan fit` without an internal error.

Each config gets one mutation of every kind (each HOSTILE value once, and one deletion), at seeded
random places, then MUTATIONS_PER_CONFIG seeded random draws. A config kvplan reads through
transformers on the meta device (kvplan.readers.derive: a model_type without a reader, MiniMax-M2.x here)
is cut to DERIVED_LAYERS layers first (a read's forward costs per layer: _fewer_layers) and gets only the
one-of-every-kind set, unless KVPLAN_FUZZ_FULL=1 (then the random draws too).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.readers.configs import spec_from_config
from kvplan.core.errors import KvplanError

REPO = Path(__file__).resolve().parents[1]
SOURCES = [REPO.parent / "shared" / "configs", REPO / "scripts" / "catalog_extra",
           Path(__file__).parent / "fixtures" / "families"]
HOSTILE = [None, -1, 0, 1, 3, 2**40, -(2**63), 1.5, float("inf"), float("-inf"), float("nan"), "x", "", "auto",
           [], [1], ["a"], [None], {}, {"a": 1}, True, False, [[[]]], "M*-E", [0.5, "x"]]
MUTATIONS_PER_CONFIG = 60
PLANNED_PER_CONFIG = 3


def _configs() -> list[Path]:
    return sorted(p for d in SOURCES if d.is_dir() for p in d.glob("*.json"))


def _paths(obj, prefix=()):
    """Every (container, key) a mutation can hit, nested dicts and lists included."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield prefix + (k,)
        if isinstance(v, (dict, list)) and len(prefix) < 4:
            yield from _paths(v, prefix + (k,))


DELETE = len(HOSTILE)  # the kind "remove the key" (a dict's key only), after the HOSTILE values' indices
FULL = os.environ.get("KVPLAN_FUZZ_FULL") == "1"


def _mutate(cfg: dict, rng: random.Random, kind: int | None = None) -> dict:
    """`cfg` with one value changed: HOSTILE[kind], or the key removed (kind DELETE); a random kind when None."""
    cfg = json.loads(json.dumps(cfg))
    paths = list(_paths(cfg))
    if kind == DELETE:
        paths = [p for p in paths if isinstance(_parent(cfg, p), dict)]
    path = rng.choice(paths)
    parent = _parent(cfg, path)
    if kind is None:
        # (randrange(n) draws what choice() of n items draws: the random draws are the ones this test always made)
        kind = DELETE if isinstance(parent, dict) and rng.random() < 0.2 else rng.randrange(len(HOSTILE))
    if kind == DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = HOSTILE[kind]
    return cfg


def _parent(cfg, path):
    for k in path[:-1]:
        cfg = cfg[k]
    return cfg


class _ReadsThroughTransformers(BaseException):  # not an Exception: kvplan's derive turns those into KvplanErrors
    pass


def _derives(base: dict) -> bool:
    """Whether kvplan reads `base` through transformers (it asks AutoConfig.for_model; stopped there, nothing built).
    Without transformers no config does: a config that would is refused at once, so it is cheap to mutate."""
    try:
        import transformers
    except ImportError:
        return False

    def stop(*args, **kwargs):
        raise _ReadsThroughTransformers

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(transformers.AutoConfig, "for_model", stop)
        try:
            spec_from_config(base, "probe")
        except _ReadsThroughTransformers:
            return True
        except KvplanError:
            return False
    return False


DERIVED_LAYERS = 2


def _fewer_layers(base: dict) -> dict:
    """`base` with DERIVED_LAYERS decoder layers, its per-layer lists cut to match. For the configs read through
    transformers: derive runs a meta-device forward through every layer (~1 CPU-s a read for MiniMax-M2.x's 62, most
    of it per layer), and this test's point, a hostile value at any key read or refused but never a crash, does
    not hang on how many identical layers there are; every key is still there to be mutated."""
    n = base.get("num_hidden_layers")
    if not isinstance(n, int) or n <= DERIVED_LAYERS:
        return base
    return {k: v[:DERIVED_LAYERS] if isinstance(v, list) and len(v) == n else v for k, v in base.items()} | \
        {"num_hidden_layers": DERIVED_LAYERS}


def _mutations(path: Path) -> list[dict]:
    base = json.loads(path.read_text())
    derives = _derives(base)
    if derives:
        base = _fewer_layers(base)
    kinds = random.Random(f"kvplan-fuzz-kinds-{path.stem}")
    every_kind = [_mutate(base, kinds, kind) for kind in range(len(HOSTILE) + 1)]
    if derives and not FULL:
        return every_kind
    rng = random.Random(f"kvplan-fuzz-{path.stem}")
    return every_kind + [_mutate(base, rng) for _ in range(MUTATIONS_PER_CONFIG)]


def test_every_kind_of_hostile_input_is_tried_on_every_config():
    # The one-of-every-kind set: each HOSTILE value (by identity: 0 == False and nan != nan) placed once, one key
    # removed; the configs reached through transformers are sampled only down to this set.
    base = {"a": 7, "b": {"c": [8, 9]}, "d": [10]}  # none of HOSTILE's objects
    rng = random.Random(0)
    placed = []
    for kind in range(len(HOSTILE)):
        cfg = _mutate(base, rng, kind)
        placed.append(next(v for p in _paths(cfg) for v in [_parent(cfg, p)[p[-1]]] if v is HOSTILE[kind]))
    assert len(placed) == len(HOSTILE)
    removed = _mutate(base, rng, DELETE)
    assert len(list(_paths(removed))) < len(list(_paths(base)))
    minimax = next(p for p in _configs() if p.stem == "MiniMaxAI__MiniMax-M2.7")
    assert _derives(json.loads(minimax.read_text()))
    assert len(_mutations(minimax)) == len(HOSTILE) + 1 + (MUTATIONS_PER_CONFIG if FULL else 0)
    # ... each on a config of DERIVED_LAYERS layers, keeping every key (the per-layer list cut to match)
    small = _fewer_layers(json.loads(minimax.read_text()))
    assert small["num_hidden_layers"] == len(small["attn_type_list"]) == DERIVED_LAYERS
    assert small.keys() == json.loads(minimax.read_text()).keys()
    assert len(spec_from_config(small, "fuzz")[0].layers) == DERIVED_LAYERS  # still read through transformers


@pytest.mark.parametrize("path", _configs(), ids=lambda p: p.stem)
def test_mutated_real_configs_never_crash(path, tmp_path, kvplan_home):
    accepted = []
    for cfg in _mutations(path):
        try:
            spec_from_config(cfg, "fuzz")
        except KvplanError as exc:
            assert exc.message and "\n" not in exc.message
            continue
        accepted.append(cfg)
    runner = CliRunner()
    for cfg in accepted[:PLANNED_PER_CONFIG]:
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        r = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h200", "--ctx", "4k", "--json"])
        assert r.exit_code in (0, 2, 6), r.output
        assert "internal error" not in r.output and "Traceback" not in r.output, r.output
