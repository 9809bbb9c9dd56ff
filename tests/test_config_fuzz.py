"""Fuzz: real configs with one value mutated are read, or refused with a KvplanError; never a crash.

Every config.json kvplan has (../shared/configs when present, the catalog's extra configs, the family
fixtures) is mutated many times with a seeded generator: a key set to a value of the wrong type or an
absurd size, or removed, at any depth (block_configs, text_config, quantization_config included).
Whatever spec_from_config accepts must then plan through `kvplan fit` without an internal error.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.readers.configs import spec_from_config
from kvplan.core.errors import KvplanError

REPO = Path(__file__).resolve().parents[1]
SOURCES = [REPO.parent / "shared" / "configs", REPO / "scripts" / "catalog_extra", Path(__file__).parent / "fixtures" / "families"]
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


def _mutate(cfg: dict, rng: random.Random) -> dict:
    cfg = json.loads(json.dumps(cfg))
    paths = list(_paths(cfg))
    path = rng.choice(paths)
    parent = cfg
    for k in path[:-1]:
        parent = parent[k]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(HOSTILE)
    return cfg


@pytest.mark.parametrize("path", _configs(), ids=lambda p: p.stem)
def test_mutated_real_configs_never_crash(path, tmp_path, kvplan_home):
    base = json.loads(path.read_text())
    rng = random.Random(f"kvplan-fuzz-{path.stem}")
    accepted = []
    for _ in range(MUTATIONS_PER_CONFIG):
        cfg = _mutate(base, rng)
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
