"""vLLM's AWQ configs by release and GPU (issue 22), read in the wheels (kvplan.engines.vllm.awq_bits cites the
lines): AWQConfig takes 4 bits only and compute capability 7.5+ (0.5.0-0.23.0 awq.py; AutoAWQConfig's 7.5 from
0.24.0); AWQ Marlin (compute capability 8.0+) takes 8-bit zero-point weights in 0.5.3-0.8.5.post1
(marlin_utils.py query_marlin_supported_quant_types [uint4, uint8]), 4-bit only from 0.9.0 ([uint4]) and by
TYPE_MAP from 0.12.0 ({4}); none before 0.5.3; 0.5.4 converts every Marlin-group AWQ checkpoint to awq_marlin
whatever the GPU and refuses it below sm80. SGLang's AWQ Marlin map lists 8 bits (0.5.15 awq/awq.py L218-221) but
its Marlin takes zero-point weights as uint4 alone, so from 0.5.3 it refuses 8-bit AWQ too
(tests/test_sglang_awq_rules.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from kvplan import api
from kvplan.core.errors import KvplanError
from kvplan.engines.vllm import overhead
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.importer import build_spec

SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "float16", "tie_word_embeddings": False}


def _awq(bits: int):
    qc = {"quant_method": "awq", "bits": bits, "group_size": 32, "zero_point": True, "version": "gemm"}
    return build_spec(dict(SMALL, quantization_config=qc), f"test/small-awq{bits}", source="test")[0]


def _plan(model, engine: str, version: str | None, gpu="h100"):
    return api.plan(model, gpu, context=2048, batch=1, engine=engine, engine_version=version)


@pytest.mark.parametrize("version", ["0.5.0", "0.5.2", "0.9.0", "0.10.1", "0.11.2", "0.12.0", "0.19.1", "0.33.0"])
def test_8bit_awq_refused_where_no_config_takes_8_bits(version):
    # 0.5.0-0.5.2: no awq_marlin.py; 0.9.0-0.11.2: Marlin's zero-point types [uint4]; 0.12.0+: TYPE_MAP {4}
    with pytest.raises(KvplanError) as e:
        _plan(_awq(8), "vllm", version)
    assert "4 bits only" in str(e.value) and "\n" not in str(e.value)
    assert e.value.param == "engine_version"


@pytest.mark.parametrize("version", ["0.5.3", "0.5.5", "0.8.0", "0.8.5.post1"])
def test_8bit_awq_planned_where_marlin_takes_it_on_sm80(version):
    # [uint4, uint8] with zero points in 0.5.3 (MARLIN_SUPPORTED_NUM_BITS [4, 8]), 0.5.5-0.8.5.post1; H100 is 9.0
    assert _plan(_awq(8), "vllm", version).weight_bytes > 0


@pytest.mark.parametrize("gpu", ["t4", "v100-sxm2-32"])
def test_8bit_awq_below_sm80_refused_with_the_gpus_capability(gpu):
    # Marlin needs 8.0 (AWQMarlinConfig.get_min_capability), so AWQConfig loads it and raises on 8 bits
    with pytest.raises(KvplanError) as e:
        _plan(_awq(8), "vllm", "0.8.0", gpu)
    assert "compute capability 8.0" in str(e.value) and "only 4-bit" in str(e.value) and e.value.param == "gpu"


def test_4bit_awq_by_capability_and_release():
    assert _plan(_awq(4), "vllm", "0.8.0", "t4").weight_bytes > 0  # AWQConfig on 7.5: its minimum
    with pytest.raises(KvplanError, match="Minimum capability: 75"):
        _plan(_awq(4), "vllm", "0.8.0", "v100-sxm2-32")  # 7.0 < AWQConfig's 75
    with pytest.raises(KvplanError, match="awq_marlin is not supported .* Minimum capability: 80"):
        _plan(_awq(4), "vllm", "0.5.4", "t4")  # 0.5.4 picks Marlin whatever the GPU
    for version in ("0.5.3", "0.5.5"):
        assert _plan(_awq(4), "vllm", version, "t4").weight_bytes > 0
    assert _plan(_awq(4), "vllm", "0.33.0").weight_bytes > 0
    with pytest.raises(KvplanError, match="4 bits only"):
        _plan(_awq(8), "sglang", None)  # SGLang 0.5.23: kvplan.engines.sglang.awq_rules


@pytest.mark.parametrize("version, name", [("0.12.0", "awq"), ("0.19.1", "awq"), ("0.23.0", "awq"),
                                           ("0.24.0", "auto_awq"), ("0.30.0", "auto_awq"), ("0.33.0", "auto_awq")])
def test_4bit_awq_below_sm75_refused_after_0_11_2(version, name):
    # AWQConfig.get_min_capability 75 (0.12.0-0.23.0 awq.py L73-77); from 0.24.0 AutoAWQConfig ("auto_awq"), 75 too
    # (0.24.0 auto_awq.py L229-231, 0.33.0 L233-234); config/vllm.py raises before loading (0.33.0 L930-936).
    # V100 is 7.0 < 7.5: refused by the profile's capability; T4 is 7.5, the minimum itself: planned
    with pytest.raises(KvplanError) as e:
        _plan(_awq(4), "vllm", version, "v100-sxm2-32")
    msg = str(e.value)
    assert f"The quantization method {name} is not supported" in msg and "Minimum capability: 75" in msg
    assert "7.0" in msg and "\n" not in msg and e.value.param == "gpu"
    assert _plan(_awq(4), "vllm", version, "t4").weight_bytes > 0


def test_4bit_awq_capability_missing_is_said_in_every_release():
    old = dataclasses.replace(find_gpu("h100"), compute_capability=None)
    st = vllm_settings(_awq(4), old, Deployment(), Request(context=2048), "0.33.0")
    assert "compute_capability" in overhead.missing_facts(_awq(4), Deployment(), st)


def test_8bit_awq_off_cuda_refused():
    # from 0.7.0 is_awq_marlin_compatible is False off CUDA: AWQConfig, 4 bits only
    with pytest.raises(KvplanError, match="off CUDA"):
        _plan(_awq(8), "vllm", "0.8.0", "mi300x")
    assert _plan(_awq(4), "vllm", "0.8.0", "mi300x").weight_bytes > 0


def test_a_profile_without_capability_is_planned_at_8_0_and_says_so():
    old = dataclasses.replace(find_gpu("h100"), compute_capability=None)
    assert _plan(_awq(8), "vllm", "0.8.0", old).weight_bytes > 0
    st = vllm_settings(_awq(8), old, Deployment(), Request(context=2048), "0.8.0")
    assert "compute_capability" in overhead.missing_facts(_awq(8), Deployment(), st)
    st = vllm_settings(_awq(8), old, Deployment(), Request(context=2048), "0.12.0")
    assert "compute_capability" not in overhead.missing_facts(_awq(8), Deployment(), st)


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
