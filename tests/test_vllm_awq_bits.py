"""vLLM's AWQ bit widths by release (issue 22): an 8-bit AWQ checkpoint is refused on a release whose AWQ configs
take 4 bits only (0.19.0 wheel quantization/awq.py L51-55 and awq_marlin.py TYPE_MAP {4} L154-156; 0.33.0
auto_awq.py TYPE_MAP {4} L182-184), planned on one whose AWQ Marlin map takes 8 (0.10.2 awq_marlin.py L44-47, 0.11.2
L70-73; 0.12.0's is {4}, L72-74); SGLang's AWQ Marlin takes 8 bits (0.5.15 awq/awq.py L218-221), so it plans it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan import api
from kvplan.core.errors import KvplanError
from kvplan.sources.importer import build_spec

SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "float16", "tie_word_embeddings": False}


def _awq(bits: int):
    qc = {"quant_method": "awq", "bits": bits, "group_size": 32, "zero_point": True, "version": "gemm"}
    return build_spec(dict(SMALL, quantization_config=qc), f"test/small-awq{bits}", source="test")[0]


def _plan(model, engine: str, version: str):
    return api.plan(model, "h100", context=2048, batch=1, engine=engine, engine_version=version)


@pytest.mark.parametrize("version", ["0.19.1", "0.33.0"])
def test_8bit_awq_refused_where_vllm_takes_4_bits_only(version):
    with pytest.raises(KvplanError) as e:
        _plan(_awq(8), "vllm", version)
    assert "4 bits only" in str(e.value) and "\n" not in str(e.value)
    assert e.value.param == "engine_version"


def test_8bit_awq_boundary_is_0_12_0():
    # read in the wheels: awq_marlin.py TYPE_MAP {4: uint4, 8: uint8} in 0.11.0, 0.11.1 and 0.11.2; {4: uint4} in
    # 0.12.0, 0.13.0 and 0.14.0
    assert _plan(_awq(8), "vllm", "0.11.2").weight_bytes > 0
    for version in ("0.12.0", "0.15.0"):
        with pytest.raises(KvplanError, match="4 bits only"):
            _plan(_awq(8), "vllm", version)


def test_8bit_awq_planned_where_awq_marlin_takes_8_bits_and_4bit_everywhere():
    # 0.10.1 <= 0.10.2, the last release read whose AWQ Marlin TYPE_MAP is {4: uint4, 8: uint8}
    assert _plan(_awq(8), "vllm", "0.10.1").weight_bytes > 0
    assert _plan(_awq(4), "vllm", "0.33.0").weight_bytes > 0
    assert _plan(_awq(8), "sglang", None).weight_bytes > 0


def test_cli_refusal_is_one_line_and_non_zero(tmp_path, kvplan_home):
    import json
    folder = tmp_path / "awq8"
    folder.mkdir()
    qc = {"quant_method": "awq", "bits": 8, "group_size": 32, "zero_point": True, "version": "gemm"}
    (folder / "config.json").write_text(json.dumps(dict(SMALL, quantization_config=qc)))
    out = subprocess.run([sys.executable, "-m", "kvplan", "fit", str(folder), "--gpu", "h100", "--ctx", "2k",
                          "--engine", "vllm"], capture_output=True, text=True)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "4 bits only" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
