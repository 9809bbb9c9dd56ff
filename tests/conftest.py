"""Shared fixtures: where ../shared lives (absent in a user's clone: tests that need it skip)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

# One torch (OpenMP) thread, set before any test module imports torch: the tests' tensors are small, and on a
# shared 2-core machine a second thread mostly spin-waits (test_validate.py's per-family runs took 68 CPU-s with
# the default threads and 10 with one; see benchmarks/README.md, "The test suite"). Subprocesses inherit it.
# A value already set wins (OMP_NUM_THREADS=2 pytest ... runs them threaded).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CONFIGS = SHARED / "configs"


def shared_config(name: str) -> dict:
    path = CONFIGS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"../shared/configs/{name}.json is not here (a user's clone has no ../shared)")
    return json.loads(path.read_text())


SPEED_CORPUS = REPO / "tests" / "fixtures" / "speed"


@functools.cache
def speed_corpus() -> tuple:
    """(file name, document) of every tests/fixtures/speed/*.yaml, parsed once per test process with libyaml's
    safe loader where PyYAML has it (the documents kvplan.speed.corpus.read_corpus reads; 3.4 MB, ~2 CPU-s, not
    the pure-Python loader's ~15 each time a test walked it). Shared: read it, never change it."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple((f.name, yaml.load(f.read_text(), Loader=loader)) for f in sorted(SPEED_CORPUS.glob("*.yaml")))


def speed_corpus_points():
    """(file name, point with its file's defaults) of every point of speed_corpus()."""
    for name, doc in speed_corpus():
        for point in doc.get("points") or ():
            yield name, {**(doc.get("defaults") or {}), **point}


@pytest.fixture
def kvplan_home(tmp_path, monkeypatch):
    """An empty user catalog, so tests never see the developer's own imports."""
    monkeypatch.setenv("KVPLAN_HOME", str(tmp_path / "kvplan-home"))
    return tmp_path / "kvplan-home"


def one_line_error(result, code: int, needle: str = "") -> str:
    """A CliRunner result that failed the kvplan way: exit `code`, one `Error:` line on stderr, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def meta_param_count(cfg: dict, buffers: tuple[str, ...] = ()) -> int:
    """Parameters of transformers' own model for the config `cfg`, built on the meta device (shapes only,
    no memory), each tied tensor once, plus the buffers whose names end with one of `buffers` (tensors a
    checkpoint holds that transformers keeps as buffers). Skips without torch and the [transformers] extra,
    or when this transformers has no such model_type."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", reason="needs the [transformers] extra")
    try:
        hf = transformers.AutoConfig.for_model(**cfg)
    except (ValueError, KeyError):
        pytest.skip(f"this transformers ({transformers.__version__}) has no {cfg['model_type']}")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    counted = sum({id(p): p.numel() for p in model.parameters()}.values())
    return counted + sum(b.numel() for name, b in model.named_buffers() if buffers and name.endswith(buffers))


def write_safetensors(path, tensors: dict) -> None:
    """A real safetensors file of zeros (8-byte little-endian header length, the JSON header, the data):
    {name: (dtype, shape, bytes)}."""
    import json
    import struct

    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
