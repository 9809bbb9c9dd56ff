"""A user catalog entry written before round 41: a compressed-tensors FP8 checkpoint stored without `weight_only`
(round 41's W8A16 flag) and without `input_quant` (round 39's, W8A8's) does not say whether its activations are
quantized. Read as unknown (kvplan.sources.catalog.entry_quantization), never as W8A8 by default: vLLM, which loads
the two apart (CompressedTensorsW8A8Fp8 or CompressedTensorsW8A16Fp8, kvplan.engines.vllm.marlin_fp8), refuses it in
one line; what the entry does say is read as before."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import LLAMA_31_8B, llm_compressor_w8a8
from kvplan import api
from kvplan.cli import app
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.sources.catalog import spec_from_dict, spec_to_dict
from kvplan.sources.importer import build_spec


def _entry(w8a16: bool) -> dict:
    """Llama-3.1-8B's config with llm-compressor's FP8 scheme (input_activations null for W8A16), as an entry."""
    q = llm_compressor_w8a8("float")
    if w8a16:
        q["config_groups"]["group_0"]["input_activations"] = None
    spec = build_spec(dict(LLAMA_31_8B, quantization_config=q), "test/llama-fp8", source="test")[0]
    return spec_to_dict(spec)


def _before_round_41(entry: dict) -> dict:
    """The entry as kvplan wrote it before round 41 (before 39 for W8A8): neither field."""
    old = json.loads(json.dumps(entry))
    old["quantization"].pop("weight_only", None)
    old["quantization"].pop("input_quant", None)
    return old


def test_what_an_entry_says_is_read_and_what_it_does_not_is_unknown():
    w8a16, w8a8 = _entry(True), _entry(False)
    assert w8a16["quantization"]["weight_only"] is True and "input_quant" in w8a8["quantization"]
    assert spec_from_dict(w8a16, "t").quantization.weight_only is True  # round 41 on
    assert spec_from_dict(w8a8, "t").quantization.weight_only is False  # its input_activations stored (round 39 on)
    for old in (_before_round_41(w8a16), _before_round_41(w8a8)):
        q = spec_from_dict(old, "t").quantization
        assert q.weight_only is None and q.method == "fp8" and q.quant_method == "compressed-tensors"
        assert "weight_only" not in spec_to_dict(spec_from_dict(old, "t"))["quantization"]  # written back unchanged


def test_vllm_refuses_the_unknown_in_one_line_and_other_engines_plan_it():
    old = spec_from_dict(_before_round_41(_entry(True)), "t")
    with pytest.raises(KvplanError, match="does not say whether its compressed-tensors FP8 scheme quantizes") as e:
        api.plan(old, gpu="h100-sxm", engine="vllm", engine_version="0.19.0", context=4096)
    assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value) and "kvplan models import" in str(e.value)
    # SGLang reads no weight_only: the entry plans as it did
    sg = api.plan(old, gpu="h100-sxm", engine="sglang", context=4096)
    assert sg.kv_cache_tokens > 0
    # a W8A16 entry of round 41 plans under vLLM as its own test pins (tests/test_vllm_marlin_fp8.py)
    api.plan(spec_from_dict(_entry(True), "t"), gpu="h100-sxm", engine="vllm", engine_version="0.19.0", context=4096)


def test_the_refusal_from_a_user_catalog_on_the_command_line(kvplan_home):
    folder = kvplan_home / "models"
    folder.mkdir(parents=True)
    old = _before_round_41(_entry(True))
    old["name"], old["aliases"], old["hf_repo"] = "old-llama-fp8", [], None
    (folder / "old-llama-fp8.json").write_text(json.dumps(old))
    r = CliRunner().invoke(app, ["fit", "old-llama-fp8", "--gpu", "h100", "--engine", "vllm", "--engine-version",
                                 "0.19.0", "--ctx", "4k"])
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert r.exit_code == EXIT_USAGE and len(errors) == 1 and "written before kvplan's round 41" in errors[0]
    assert "Traceback" not in r.output
