"""AWQ at group_size -1 under tensor parallelism on vLLM (issue 22): refused with vLLM's reason, one line, exit 2.

Read in the vLLM wheels (vllm/model_executor/layers/quantization/): a row-parallel layer (o_proj, down_proj) splits its
inputs, input_size_per_partition = K / tp, while group_size -1 is normalized to the whole input K, so AWQ Marlin sizes
its scales and zeros input_size_per_partition // group_size = (K / tp) // K = 0 rows (0.11.2 awq_marlin.py L314, 0.33.0
auto_awq.py L469: Llama-2-7B's o_proj at tp 2, 2,048 // 4,096 = 0), and the plain AWQ method raises on
2,048 % 4,096 != 0 ("The input size is not aligned with the quantized weight shape...", 0.11.2 awq.py L190-195). GPTQ
keeps such scales whole on every rank (0.11.2 gptq_marlin.py L369-370), so GPTQ at -1 is planned at tp 2.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan import api
from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.sources.importer import build_spec

LLAMA2_7B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
             "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 4096,
             "torch_dtype": "float16", "tie_word_embeddings": False}


def _spec(method: str, group: int):
    qc = ({"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm"}
          if method == "awq" else {"quant_method": "gptq", "bits": 4, "group_size": group, "sym": True})
    return build_spec(dict(LLAMA2_7B, quantization_config=qc), f"test/{method}", source="test")[0]


@pytest.mark.parametrize("version", ["0.11.2", "0.33.0"])
def test_vllm_refuses_awq_per_row_under_tensor_parallelism(version, kvplan_home):
    with pytest.raises(KvplanError) as err:
        api.plan(_spec("awq", -1), "a100-sxm-80", context="4k", tp=2, engine="vllm", engine_version=version)
    said = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in said
    assert f"vLLM {version} cannot run an AWQ checkpoint at group_size -1 under tensor parallelism" in said
    assert "(K/tp) // K = 0 rows of scales" in said and "The input size is not aligned" in said


def test_what_vllm_runs_is_still_planned(kvplan_home):
    # tp 1; pp 2 (no split inputs); AWQ at group 128 under tp 2 (2,048 // 128 = 16 rows); GPTQ at -1 under tp 2
    for spec, kw in ((_spec("awq", -1), {"tp": 1}), (_spec("awq", -1), {"pp": 2}), (_spec("awq", 128), {"tp": 2}),
                     (_spec("gptq", -1), {"tp": 2})):
        assert api.plan(spec, "a100-sxm-80", context="4k", engine="vllm", **kw).fits


def test_the_cli_says_it_in_one_line_exit_2(tmp_path, kvplan_home):
    qc = {"quant_method": "awq", "bits": 4, "group_size": -1, "zero_point": True, "version": "gemm"}
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA2_7B, quantization_config=qc)))
    res = CliRunner().invoke(app, ["fit", str(tmp_path), "--gpu", "a100-sxm-80", "--tp", "2", "--ctx", "4k",
                                   "--engine", "vllm"])
    line = one_line_error(res, 2, "cannot run an AWQ checkpoint at group_size -1 under tensor parallelism (--tp 2)")
    assert "plan it at --tp 1 (--pp or --dp for more GPUs)" in line
