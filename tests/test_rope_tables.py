"""RoPE cos/sin tables vLLM builds at load time (kvplan.readers.rope), against vLLM's source arithmetic.

vllm/model_executor/layers/rotary_embedding/base.py: a [max_position_embeddings, rotary_dim] buffer in
the model dtype per distinct rotary embedding; linear_scaling_rope.py: max_position x factor rows;
yarn_scaling_rope.py: original_max_position_embeddings x factor rows.
"""

from __future__ import annotations

import pytest

from conftest import LLAMA_31_8B
from kvplan.sources.catalog import find_in_catalog
from kvplan.core.errors import KvplanError
from kvplan.readers.rope import rope_table_bytes as rope_tables_bytes
from kvplan.readers.rope import rope_cache_elems


def test_default_table_is_positions_by_rotary_dim():
    # Llama 3.1: 131,072 x 128 = 16,777,216 elements; bf16 -> 32 MiB (the -0.03 GiB every Llama 3.1
    # 8B record in the corpus had before this term: 14.99 printed vs 14.96 counted).
    cfg = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert rope_cache_elems(cfg, "llama", 128) == 131072 * 128
    assert rope_tables_bytes(find_in_catalog("llama-3.1-8b")) == 32 * 2**20


def test_llama4_scout_ten_million_positions():
    # 10,485,760 x 128 x 2 B = 2,684,354,560 B = 2.5 GiB on every rank.
    assert rope_tables_bytes(find_in_catalog("llama-4-scout-17b-16e-instruct")) == 10485760 * 128 * 2


def test_gemma3_linear_global_plus_local_table():
    # global: 131,072 x 8 (linear) x 128; local (rope_local_base_freq): 131,072 x 128.
    cfg = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
           "rope_local_base_freq": 10000.0}
    assert rope_cache_elems(cfg, "gemma3_text", 128) == 131072 * 8 * 128 + 131072 * 128


def test_yarn_uses_original_positions_and_partial_rotary():
    # gpt-oss: yarn factor 32 on 4,096 original positions -> 131,072 rows x 64.
    cfg = {"max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}}
    assert rope_cache_elems(cfg, "gpt_oss", 64) == 131072 * 64
    # Qwen3-Next rotates a quarter of its 256-wide heads: 262,144 x 64.
    assert rope_cache_elems({"max_position_embeddings": 262144}, "qwen3_next", 256) == 262144 * 64


def test_no_rope_families_and_hostile_values():
    assert rope_cache_elems({"max_position_embeddings": 1024}, "gpt2", 64) == 0
    assert rope_cache_elems({"max_position_embeddings": "many"}, "llama", 128) == 0
    # vLLM builds arange(rows) with no bound, so kvplan has no clamp either: a table with more rows than
    # the reader's bound on max_position_embeddings (2^30) is refused, not shrunk to an invented size.
    with pytest.raises(KvplanError, match="out of range"):
        rope_cache_elems({"max_position_embeddings": 10**30}, "llama", 128)
    hostile = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "linear", "factor": 1e30}}
    with pytest.raises(KvplanError, match="out of range"):
        rope_cache_elems(hostile, "llama", 128)
    with pytest.raises(KvplanError, match="finite"):
        rope_cache_elems({"max_position_embeddings": 4096, "rope_scaling": {"factor": float("inf")}}, "llama", 128)
    # The largest table a real config asks for is far inside: Llama 4 Scout's 10,485,760 rows x 128.
    big = {"max_position_embeddings": 10485760}
    assert rope_cache_elems(big, "llama4_text", 128) == 10485760 * 128


def test_hostile_rope_factor_is_a_clean_error_from_the_cli(tmp_path):
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    cfg = {**LLAMA_31_8B, "rope_scaling": {"rope_type": "linear", "factor": 1e30}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    res = CliRunner().invoke(app, ["fit", str(path), "--gpu", "h100"])
    assert res.exit_code != 0 and "out of range" in res.output and "Traceback" not in res.output


def test_gpt_oss_table_is_fp32_in_vllm():
    # models/gpt_oss.py: get_rope(..., dtype=torch.float32): 131,072 x 64 x 4 B = 32 MiB.
    assert rope_tables_bytes(find_in_catalog("gpt-oss-20b")) == 131072 * 64 * 4
