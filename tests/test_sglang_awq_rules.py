"""SGLang's quantized weights as loaded (issue 22, item 2; round 38), read in its wheels (the modules cite the lines):
AWQ refused below compute capability 7.5 (AWQConfig's 75; Marlin's types are empty below 8.0) and at 8 bits from 0.5.3
(Marlin's zero-point types are uint4 alone, AWQConfig takes 4 bits); no Marlin tile padding for GPTQ / AWQ (vLLM's is
not carried over)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan import api
from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.engines.sglang import loaded as sglang_loaded
from kvplan.engines.vllm import marlin_dense_pad
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.readers.rope import rope_table_bytes
from kvplan.sources.importer import build_spec

SMALL = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
         "max_position_embeddings": 4096, "torch_dtype": "float16", "tie_word_embeddings": False}


def _awq(bits: int):
    qc = {"quant_method": "awq", "bits": bits, "group_size": 32, "zero_point": True, "version": "gemm"}
    return build_spec(dict(SMALL, quantization_config=qc), f"test/small-awq{bits}", source="test")[0]


def _plan(model, version: str | None, gpu: str = "h100"):
    return api.plan(model, gpu, context=2048, batch=1, engine="sglang", engine_version=version)


@pytest.mark.parametrize("version", ["0.4.0", "0.4.9", "0.5.3", "0.5.23"])
def test_4bit_awq_below_sm75_refused_in_every_release(version):
    # AWQConfig.get_min_capability 75 (0.5.23 awq/awq.py L116; vLLM's AWQConfig for 0.4.0-0.4.3); the loader compares
    # it before building the model (0.5.23 model_loader/loader.py L255-265). V100: 7.0. T4: 7.5, the minimum itself.
    with pytest.raises(KvplanError) as e:
        _plan(_awq(4), version, "v100-sxm2-32")
    assert "Minimum capability: 75" in str(e.value) and "7.0" in str(e.value) and "\n" not in str(e.value)
    assert e.value.param == "gpu"
    assert _plan(_awq(4), version, "t4").weight_bytes > 0
    assert _plan(_awq(4), version).weight_bytes > 0


def test_8bit_awq_refused_from_0_5_3_on_any_gpu():
    # query_marlin_supported_quant_types(has_zp=True) -> [uint4] (0.5.23 marlin_utils.py L93-95), so 8-bit AWQ is not
    # Marlin-compatible and AWQConfig raises "only 4-bit" (0.5.23 awq/awq.py L84-88); H100 is 9.0
    for version in ("0.5.3", "0.5.10", "0.5.23"):
        with pytest.raises(KvplanError, match="4 bits only.*only 4-bit weight quantization"):
            _plan(_awq(8), version)
    assert _plan(_awq(8), "0.4.9").weight_bytes > 0  # vLLM's AWQ Marlin beside SGLang: not read, planned as before


def test_awq_refusal_on_the_command_line(tmp_path):
    qc = {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm"}
    (tmp_path / "config.json").write_text(json.dumps(dict(SMALL, quantization_config=qc)))
    r = CliRunner().invoke(app, ["fit", str(tmp_path), "--gpu", "v100-sxm2-32", "--ctx", "2k", "--engine", "sglang"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "Minimum capability: 75" in errors[0]  # the model line and its note come first


def test_sglang_books_no_marlin_tile_padding():
    """Llama-2-7B GPTQ group 32 at tp 8: down_proj's K 11,008 / 8 = 1,376 fits no Marlin tile; vLLM 0.24.0+ pads it to
    1,408 (73,728 B a layer, 2,359,296 B a GPU: kvplan.engines.vllm.marlin_dense_pad). SGLang keeps the strict test
    and pads nothing (0.5.23 marlin_utils.py L161-193), so its weights as loaded carry none of it."""
    cfg = dict(SMALL, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
               intermediate_size=11008, vocab_size=32000, quantization_config={
                   "quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True})
    model = build_spec(cfg, "test/llama-2-7b-gptq", source="test")[0]
    h100 = find_gpu("h100")
    assert marlin_dense_pad.padded_bytes(model, Deployment(8), (0, 24, 0), h100) == 32 * 73_728 == 2_359_296
    extra, rounding = sglang_loaded.loaded_parts(model, h100, 8, "0.5.23")
    assert extra == rope_table_bytes(model, fp32=True) + rounding  # the RoPE table and the allocator's rounding only
