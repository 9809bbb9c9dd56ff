"""benchmarks/speed_corpus.py --spread: a coefficient set's terms over its training folds (issue 21's stability
diagnostic), and why llama.cpp's set fits no `grouped` (kvplan.speed.eras.SAME_AS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.speed.corpus import in_training
from kvplan.speed.fit import build_all
from kvplan.speed.terms import TERMS
from conftest import load_script, speed_cases

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "speed"


@pytest.fixture(scope="module")
def tool():
    return load_script("benchmarks/speed_corpus.py", "speed_corpus")


@pytest.fixture(scope="module")
def llamacpp():
    cases, _ = speed_cases()
    built, _ = build_all([c for c in cases if c.engine == "llama.cpp"], running)
    return built


def test_spread_reads_training_sources_only(tool, llamacpp):
    lines = tool.spread(llamacpp, "llama.cpp")
    train = {b.case.source for b in llamacpp if in_training(b.case.source)}
    held = {b.case.source for b in llamacpp} - train
    assert lines[0].startswith(f"llama.cpp: {len(train)} training sources")
    text = "\n".join(lines)
    assert not any(src in text for src in held)  # no held-out source is fitted on, left out or named
    terms = [line.split()[0] for line in lines[2:]]
    assert "experts" in terms and "grouped" not in terms  # a term every fold fits at 0 is not printed
    for line in lines[2:]:
        full, lo, mid, hi = (float(v) for v in line.split()[1:5])
        assert lo <= mid <= hi and full >= 0


def test_grouped_is_the_expert_read_times_one_constant(llamacpp):
    # The reason llama.cpp's set leaves `grouped` out: on one GPU and weight type its feature is the `experts`
    # feature times 2 x params x bandwidth / (rate x expert bytes), whatever the micro-batch. llama.cpp#15525's
    # DeepSeek-V2-Lite Q4_0 on an RTX 3090 (the corpus's one MoE llama.cpp source), ubatch 1 ... 512: touched experts
    # go from 6 of 64 a layer to all 64, and the ratio stays put (0.02076 at the shipped profile's rates)
    e, g = TERMS.index("experts"), TERMS.index("grouped")
    mine = [b for b in llamacpp if b.case.source == "llamacpp-pr-15525"]
    assert len(mine) >= 5
    ratios = []
    for b in mine:
        f = b.parts(None)[0] or b.parts(None)[1]
        assert f[e] > 0
        ratios.append(f[g] / f[e])
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)
