"""The catalog entries and GPU profile added so the speed corpus (tests/fixtures/speed) prices the points
it used to skip (issue 21's coverage), and the corpus's names all resolving.

Figures are the sources' own: llama-bench's "params" column in the corpus rows, the Gemma 4 31B shapes of
tests/fixtures/families/gemma-4-31b.json (a public lock file's, independent of the catalog's copy).
"""

import json
from collections import Counter
from pathlib import Path

import pytest

from conftest import speed_corpus_points
from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import Kind
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import find_in_catalog

TESTS = Path(__file__).parent
CORPUS = TESTS / "fixtures" / "speed"


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_every_corpus_model_and_gpu_names_a_catalog_entry_and_a_profile():
    # each distinct name looked up once (2,454 points name a few dozen), reported with the first point naming it
    models, gpus = {}, {}
    for source, p in speed_corpus_points():
        if p.get("kvplan_model"):
            models.setdefault(p["kvplan_model"], (source, p["id"]))
        if p.get("gpu"):
            gpus.setdefault(p["gpu"], (source, p["id"]))
    assert len(models) > 10 and len(gpus) > 5
    for name, where in models.items():
        assert find_in_catalog(name) is not None, (where, name)
    for name, where in gpus.items():
        assert find_gpu(name).key == name, (where, name)  # a key, not an alias


@pytest.mark.parametrize("name, params", [
    # llama.cpp PR 5021's row "llama 7B Q5_K - Medium | 4.78 GiB | 7.24 B": Mistral 7B v0.1's untied weights
    ("mistral-7b-v0.1", 7.24),
    # PR 12183's row "qwen2 3B Q4_0 | 1.86 GiB | 3.40 B": Qwen2.5-3B ties its embedding; the GGUF stores it twice
    ("qwen2.5-3b", 3.40),
])
def test_llama_bench_params_match_the_catalog_entry(name, params):
    spec = find_in_catalog(name)
    total = spec.params.total + (spec.params.embedding if spec.params.lm_head == 0 else 0)
    assert round(total / 1e9, 2) == params


def test_mistral_7b_v01_slides_and_v03_does_not():
    v01, v03 = find_in_catalog("mistral-7b-v0.1"), find_in_catalog("mistral-7b-instruct-v0.3")
    assert Counter((l.kind, l.window) for l in v01.layers) == {(Kind.SLIDING, 4096): 32}
    assert Counter(l.kind for l in v03.layers) == {Kind.FULL: 32} and v03.vocab_size == 32768


def test_llama2_70b_is_gqa_with_8_kv_heads():
    spec = find_in_catalog("llama-2-70b-hf")
    assert Counter((l.kind, l.num_kv_heads, l.head_dim) for l in spec.layers) == {(Kind.FULL, 8, 128): 80}
    assert spec.max_context == 4096


def test_gemma4_31b_entry_has_the_lock_files_shapes():
    fixture, _ = spec_from_config(json.loads((TESTS / "fixtures" / "families" / "gemma-4-31b.json").read_text()), "g")
    entry = find_in_catalog("gemma-4-31b-it")
    assert sorted(map(repr, entry.layers)) == sorted(map(repr, fixture.layers))
    assert entry.params.total - entry.params.vision == fixture.params.total
