"""llama.cpp's serial Gated DeltaNet scan priced at its measured time a token (issue 21, round 43,
kvplan.speed.ggml_scan), by hand.

The measurement: ggml-org/llama.cpp#22587 (2026-05-01), "Kernel microbenchmark", RTX 5090, S_v = 128, hk = 16,
hv = 32, B = 1, the master column (ggml's warp-a-column GATED_DELTA_NET): 279.6 us at L = 512 tokens, 525.1 us at
L = 1,024, so one token's step of one layer is (525.1 - 279.6) / 512 = 245.5 / 512 = 0.4794921875 us.

Qwen3.5-35B-A3B (its config.json: 40 layers, full_attention_interval 4, so 30 Gated DeltaNet layers):
  a token: 30 x 0.4794921875 us = 14.384765625 us
  llama-bench pp2048 (2,048 prompt tokens): 2,048 x 14.384765625 us = 4 x 30 x 245.5 us = 29,460 us = 29.46 ms,
  whatever the micro-batch (the scan's steps are per token), about 14% of the 204.3 ms the RTX 4090 took at
  ubatch 2048 (2,048 / 10,026.03 t/s, llamacpp-pr-22298 in tests/fixtures/speed).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.ggml_scan import SERIAL_STEP_S, scan_flops, scan_seconds
from kvplan.speed.shape import shape_for
from kvplan.speed.terms import gemm_seconds

QWEN35 = find_in_catalog("qwen3.5-35b-a3b")


def test_one_step_is_the_microbenchmarks_slope():
    assert SERIAL_STEP_S == pytest.approx(0.4794921875e-6, rel=1e-12)


def test_the_model_pays_it_once_a_token_for_each_of_its_30_gdn_layers_only():
    assert scan_seconds(QWEN35.layers) == pytest.approx(14.384765625e-6, rel=1e-12)
    assert scan_seconds(find_in_catalog("llama-3.1-8b").layers) == 0  # no recurrent layer
    mamba2 = find_in_catalog("nvidia-nemotron-3-nano-30b-a3b-bf16")  # Mamba-2's SSM_SCAN: not measured, not priced
    assert scan_seconds(mamba2.layers) == 0


def test_a_2048_token_prompt_adds_29_46_ms_on_a_4090_at_any_ubatch():
    s = shape_for(QWEN35, find_gpu("rtx-4090"), engine="llama.cpp", weight_dtype="q4_0")
    assert s.recurrent_flops == pytest.approx(scan_flops(QWEN35.layers, s.bf16_rate))
    for steps in (1.0, 32.0):  # one micro-batch of 2,048, or 32 of 64
        with_scan = gemm_seconds(s, 2048.0, 0.0, s.gemm_rate, steps=steps)
        without = gemm_seconds(replace(s, recurrent_flops=0.0), 2048.0, 0.0, s.gemm_rate, steps=steps)
        assert with_scan - without == pytest.approx(0.02946, rel=1e-9)


def test_other_engines_keep_the_chunked_flops():
    s = shape_for(QWEN35, find_gpu("h200-sxm"), engine="sglang")
    assert s.recurrent_flops == 30 * 32 * 180_224  # test_recurrent_flops' 180,224 a value head, 32 value heads
