"""The speed corpus against the KV cache its quantized checkpoints declare (issues 21 and 22).

A point that leaves the cache to the engine (`kv_dtype` auto or unstated, no KV dtype among its flags) ran whatever
the engine's `auto` gives its checkpoint: the declared cache where the engine's release follows the declaration,
else the model dtype. tests/fixtures/speed/checkpoints/declared_kv.yaml holds the declarations kvplan knows (each
cited); kvplan's reader reads them (kvplan.readers.kv_quant) and the engine's own rule, the one `kvplan plan` applies
(Engine.checkpoint_kv_rule), resolves them at the point's version. The speed fit reads `kv_dtype` as written (the
corpus reader sits below the engines' layer), so these tests are what keeps the two in step.

Hand-checked thresholds (the rules' cited sources):
* SGLang: 0.5.1.post3's auto is the model dtype (sglang-0.5.1.post3 wheel, model_runner.py L1168-1169,
  `if self.server_args.kv_cache_dtype == "auto": self.kv_cache_dtype = self.dtype`); 0.5.3's takes a ModelOpt
  kv_cache_quant_algo "FP8" as float8_e4m3fn (0.5.3 wheel, model_runner.py L1397-1409).
* vLLM: 0.13.0 passes "auto" through (vllm/engine/arg_utils.py L1364, `cache_dtype=self.kv_cache_dtype`); 0.14.0
  resolves it from a ModelOpt config first (vllm-project/vllm#30785; 0.14.0 arg_utils.py L1397-1400,
  resolve_kv_cache_dtype_string; torch_utils.py L57-61 maps "fp8" to fp8_e4m3).
* TensorRT-LLM (PyTorch backend): auto takes ModelOpt's kv_cache_quant_algo in every modelled release
  (NVIDIA/TensorRT-LLM@004b733e: tensorrt_llm/_torch/pyexecutor/model_loader.py, validate_and_set_kv_cache_quant).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import SPEED_CORPUS, speed_corpus_points
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.readers.cfg import Cfg
from kvplan.readers.kv_quant import read_checkpoint_kv

CORPUS = SPEED_CORPUS
TABLE = CORPUS / "checkpoints" / "declared_kv.yaml"
EVIDENCE = ("read", "engine-test", "log", "bound")
# The flags a corpus point names its engine's KV cache dtype with (dashes read as underscores, as the reader does).
KV_FLAGS = ("kv_cache_dtype", "kv_cache_config.dtype", "kv_cache_config_dtype")
LEFT_TO_ENGINE = (None, "auto")


def declared(table: Path = TABLE) -> dict:
    """{checkpoint or alias: (CheckpointKV, entry)} of the table, each declaration read by kvplan's reader."""
    out = {}
    for name, entry in yaml.safe_load(table.read_text()).items():
        ckv = read_checkpoint_kv(Cfg({"quantization_config": entry["quantization_config"]}, f"{table.name}: {name}"))
        for key in (name, *entry.get("aliases", ())):
            out[key] = (ckv, entry)
    return out


def corpus_points(folder: Path = CORPUS):
    """(file name, point with its file's defaults) of every corpus file (the shipped corpus parsed once per session:
    conftest.speed_corpus)."""
    if folder == CORPUS:
        yield from speed_corpus_points()
        return
    for f in sorted(folder.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        for point in doc.get("points") or ():
            yield f.name, {**(doc.get("defaults") or {}), **point}


def auto_cache(engine: str, version, ckv) -> str | None:
    """The cache `engine` `version`'s auto gives a checkpoint declaring `ckv`: its dtype where the rule follows it,
    "" where it does not (the model dtype), None where kvplan cannot tell (an engine or release it does not model; an
    unstated release whose modelled first and last releases disagree)."""
    try:
        engine_obj = resolve_engine(engine, None if version is None else str(version))
    except KvplanError:
        return None
    if version is None:
        ends = {resolve_engine(engine, v).checkpoint_kv_rule(ckv).follows for v in (engine_obj.versions[0],
                                                                                     engine_obj.versions[-1])}
        if len(ends) > 1:
            return None
        follows = ends.pop()
    else:
        follows = engine_obj.checkpoint_kv_rule(ckv).follows
    return ckv.dtype if follows else ""


def _named_kv(p: dict) -> str | None:
    flags = {str(k).replace("-", "_"): v for k, v in (p.get("flags") or {}).items()}
    return next((str(flags[k]) for k in KV_FLAGS if flags.get(k) is not None), None)


def mismatches(points, known: dict) -> list[str]:
    """The points naming a known checkpoint whose kv_dtype does not say what the engine's auto ran (module
    docstring): left to the engine but not the declared cache where the rule follows it, or the declared cache
    where the rule does not follow it and no flag asked for it."""
    bad = []
    for where, p in points:
        name = p.get("checkpoint") or p.get("model")
        if name not in known:
            continue
        ckv, _ = known[name]
        auto = auto_cache(p.get("engine"), p.get("version"), ckv)
        if auto is None:
            continue
        stated, named = p.get("kv_dtype"), _named_kv(p)
        if auto and named is None and stated != auto:
            bad.append(f"{where} {p.get('id')}: {name} under {p.get('engine')} {p.get('version')} ran a {auto} cache "
                       f"(auto follows {ckv.describe()}), kv_dtype says {stated!r}")
        if not auto and named is None and stated == ckv.dtype:
            bad.append(f"{where} {p.get('id')}: {p.get('engine')} {p.get('version')}'s auto does not follow "
                       f"{ckv.describe()}, yet kv_dtype says {stated!r} with no flag naming it")
    return bad


FP8_KV = read_checkpoint_kv(Cfg({"quantization_config": {"producer": {"name": "modelopt"},
                                                         "quantization": {"kv_cache_quant_algo": "FP8"}}}, "test"))


@pytest.mark.parametrize("engine, version, cache", [
    ("sglang", "0.5.1.post3", ""), ("sglang", "0.5.3", "fp8"),  # FOLLOWS = 0.5.3 (module docstring)
    ("vllm", "0.13.0", ""), ("vllm", "0.14.0", "fp8"),  # vllm-project/vllm#30785, from 0.14.0
    ("trtllm", "0.20.0", "fp8"), ("trtllm", "1.2.0", "fp8"),  # every modelled PyTorch-backend release
    ("trtllm", None, "fp8"),  # unstated: the first and last modelled releases agree
    ("sglang", None, None),  # unstated: 0.5.1.post3 and the newest disagree, kvplan cannot tell
    ("trtllm", "0.17", None),  # the TensorRT-engine era, outside the modelled range
])
def test_auto_cache_at_the_rules_threshold(engine, version, cache):
    assert FP8_KV.kind == "FP8" and FP8_KV.dtype == "fp8"
    assert auto_cache(engine, version, FP8_KV) == cache


def test_checker_reads_a_corpus_file_on_both_sides_of_a_threshold(tmp_path):
    # One point each side of SGLang's 0.5.3 threshold, both left to auto: 0.5.3's ran fp8, 0.5.1.post3's bf16.
    f = tmp_path / "src.yaml"
    point = {"model": "nvidia/Llama-3.1-8B-Instruct-FP8", "engine": "sglang"}
    f.write_text(yaml.safe_dump({"source": {"id": "src"}, "points": [
        {**point, "id": "new", "version": "0.5.3", "kv_dtype": "fp8"},
        {**point, "id": "old", "version": "0.5.1.post3", "kv_dtype": "auto"},
        {**point, "id": "asked", "version": "0.5.1.post3", "kv_dtype": "fp8", "flags": {"kv-cache-dtype": "fp8_e4m3"}},
    ]}))
    known = declared()
    assert mismatches(corpus_points(tmp_path), known) == []
    f.write_text(f.read_text().replace("kv_dtype: fp8\n  model", "kv_dtype: auto\n  model", 1))
    assert [m.split(":")[0] for m in mismatches(corpus_points(tmp_path), known)] == ["src.yaml new"]
    f.write_text(yaml.safe_dump({"source": {"id": "src"}, "points": [
        {**point, "id": "old", "version": "0.5.1.post3", "kv_dtype": "fp8"}]}))
    assert [m.split(":")[0] for m in mismatches(corpus_points(tmp_path), known)] == ["src.yaml old"]


def test_every_known_declaration_is_read_and_cited():
    known = declared()
    assert known, "the table is empty"
    for name, (ckv, entry) in known.items():
        assert ckv is not None and ckv.dtype == "fp8", name
        assert entry["evidence"] in EVIDENCE and len(entry["cite"]) > 40, name


def test_corpus_points_carry_the_cache_their_checkpoint_ran():
    """Every corpus point naming a checkpoint kvplan knows to declare an FP8 KV cache says the cache its engine's
    auto then ran (issue 21)."""
    known = declared()
    assert mismatches(corpus_points(), known) == []
    # the check is not vacuous: TensorRT-LLM's perf overview names these checkpoints on hundreds of points
    named = sum(1 for _, p in corpus_points() if (p.get("checkpoint") or p.get("model")) in known)
    assert named >= 250
    # a point whose notes name a known checkpoint names it in `checkpoint` too, so the check above reaches it
    unnamed = [f"{where} {p.get('id')}" for where, p in corpus_points()
               if (p.get("checkpoint") or p.get("model")) not in known
               and any(f"model list: {name}" in str(p.get("notes")) for name in known)]
    assert unnamed == []
