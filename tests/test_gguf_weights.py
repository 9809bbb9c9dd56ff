"""GGUF weight types for llama.cpp (issue 15): bits per weight from ggml's block structs, file sizes
against the ones llama.cpp's own quantize README lists for Llama-3.1-8B."""

from __future__ import annotations

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.core.dtypes import GGUF_MIXES, GGUF_TYPES, canonical_weight_dtype, gguf_bits_per_weight
from kvplan.model.weights import weight_bytes

GIB = 2**30


@pytest.mark.parametrize("name,bpw", [
    # block bytes x 8 / block values, ggml/src/ggml-common.h (sizes spelled out in kvplan/core/dtypes.py):
    ("q4_0", 4.5), ("q4_1", 5.0), ("q5_0", 5.5), ("q5_1", 6.0), ("q8_0", 8.5), ("iq4_nl", 4.5),
    ("q2_k", 2.625), ("q3_k", 3.4375), ("q4_k", 4.5), ("q5_k", 5.5), ("q6_k", 6.5625), ("iq4_xs", 4.25),
    ("iq3_s", 3.4375), ("iq3_xxs", 3.0625), ("iq2_s", 2.5625), ("iq2_xs", 2.3125), ("iq2_xxs", 2.0625),
    ("iq1_m", 1.75), ("iq1_s", 1.5625),
    # ggml-common.h states these in comments too: "Effectively 6.5625 bits per weight" (q6_K),
    # "2.0625 bpw" (iq2_xxs), "1.5625 bpw" (iq1_s), "Effectively 3.4375 bits per weight" (q3_K).
])
def test_gguf_bits_per_weight(name, bpw):
    assert gguf_bits_per_weight(name) == bpw
    assert canonical_weight_dtype(name.upper()) == name  # as llama.cpp spells them: Q6_K, IQ4_XS


def test_every_gguf_type_is_checked_and_mixes_are_described():
    assert len(GGUF_TYPES) == 19
    for name, (bits, what) in GGUF_MIXES.items():
        assert canonical_weight_dtype(name.upper()) == name and "Q6_K" in what


@pytest.mark.parametrize("name,gib,tol", [
    # llama.cpp tools/quantize/README.md, meta-llama/Llama-3.1-8B, file size in GiB. Pure types: every
    # tensor at the type (output.weight Q6_K), so kvplan's count should land within rounding; the _K_M
    # mixes and IQ4_XS upgrade some tensors kvplan cannot see one by one: within 2.5 %.
    ("q8_0", 7.95, 0.005), ("q6_k", 6.14, 0.005), ("q5_k_m", 5.33, 0.025), ("q4_k_m", 4.58, 0.025),
    ("iq4_xs", 4.17, 0.025),
])
def test_llama31_8b_gguf_sizes_match_llamacpp_readme(name, gib, tol):
    spec = find_in_catalog("llama-3.1-8b")
    got = weight_bytes(spec, name).total / GIB
    assert abs(got - gib) / gib <= tol, (name, got)


def test_gguf_weight_dtype_through_fit():
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--gpu", "l4", "--ctx", "8k", "--engine", "llama.cpp",
                                 "--weight-dtype", "Q4_K_M", "--json"])
    assert r.exit_code == 0, r.output
    assert '"weight_dtype": "q4_k_m"' in r.stdout


@pytest.mark.parametrize("name,gb", [("q4_k_m", 0.81), ("q5_k_m", 0.91), ("q6_k", 1.02), ("q8_0", 1.32)])
def test_a_tied_table_is_quantized_as_the_output_head(name, gb):
    # Llama-3.2-1B ties its output head to token_embd, and llama.cpp's quantizer gives a shared table the output's
    # type ("for arches that share the same tensor between the token embeddings and the output, we quantize the
    # token embeddings with the quantization of the output tensor", src/llama-quant.cpp llama_tensor_get_type,
    # `!qs.has_output`): Q6_K for the _K mixes, so the table is 128,256 x 2,048 / 256 x 210 B = 215,470,080 B,
    # not the file's base Q4_K (147,750,912 B, which left Q4_K_M 8% light). File sizes: bartowski's
    # Llama-3.2-1B-Instruct-GGUF README (llama.cpp b3821), in GB as the Hub lists them; within 1%.
    spec = find_in_catalog("llama-3.2-1b-instruct")
    w = weight_bytes(spec, name)
    assert w.lm_head == 0
    if name != "q8_0":
        assert w.embedding == 128_256 * 2_048 // 256 * 210
    assert abs(w.total / 1e9 - gb) / gb <= 0.01, (name, w.total)
