"""Mamba-2's SSD scan, KDA and lightning attention in the GEMM term (issue 21, round 42), by hand from the kernels.

Counts a token a head, from the kernels' tl.dot shapes (kvplan.speed.ssd, kda, lightning docstrings cite each line):
  Mamba-2 SSD (state-spaces/mamba ops/triton, vendored by vLLM, SGLang, TensorRT-LLM), head_dim P, state N, chunk C:
    _chunk_state_fwd x^T B 2 P N; _chunk_scan_fwd C states 2 N P and CB x 2 C P; a group's _bmm_chunk_fwd C B^T 2 C N
  KDA (vLLM's fla/ops/kda.py, chunk 64, sub-chunks of 16): off-diagonal A and Aqk 2 (C - 16) d_k, w 2 C d_k,
    u 2 C d_v, v_new and the state 4 d_k d_v, q h 2 d_k d_v, Aqk v_new 2 C d_v
  lightning (vLLM's lightning_attn.py, blocks of 256, diagonal sub-blocks of 32): (256 + 32)(d + e) + 4 d e

Nemotron-H-56B-Base-8K's config.json: mamba_num_heads 256, mamba_head_dim 64, ssm_state_size 256, n_groups 8,
chunk_size 128, 54 'M' layers in hybrid_override_pattern:
  a head 4 x 64 x 256 + 2 x 128 x 64 = 65,536 + 16,384 = 81,920; a group 2 x 128 x 256 = 65,536
  a layer 256 x 81,920 + 8 x 65,536 = 20,971,520 + 524,288 = 21,495,808
  tp 8: 32 heads, 1 group a rank: 2,621,440 + 65,536 = 2,686,976
  tp 16: 16 heads; 8 groups over 16 ranks, so every rank a whole group (vLLM replicates them): 1,310,720 + 65,536
         = 1,376,256 (not 21,495,808 / 16)
  the model: 54 x 21,495,808 = 1,160,773,632 (about 1.1% of its 2 x 54 B parameters' FLOPs)
Falcon-H1-0.5B-Instruct (scripts/catalog_extra): mamba_n_heads 24, mamba_d_head 64, mamba_d_state 128,
mamba_n_groups 1, mamba_chunk_size 128: 24 x (4 x 64 x 128 + 2 x 128 x 64) + 2 x 128 x 128
  = 24 x 49,152 + 32,768 = 1,212,416 a layer; tp 2: 12 x 49,152 + 32,768 (its one group on both) = 622,592
Kimi-Linear (tests/fixtures/families/kimi-linear-default.json): 32 KDA heads of 128, 21 KDA layers:
  a head (4 x 64 - 2 x 16) x 128 + 4 x 64 x 128 + 6 x 128 x 128 = 28,672 + 32,768 + 98,304 = 159,744
  a layer 32 x 159,744 = 5,111,808; the model 21 x 5,111,808 = 107,347,968
MiniMax-M1 (tests/fixtures/families/minimax-m1.json): 64 heads of head_dim 128, 70 lightning layers:
  a head (256 + 32) x 256 + 4 x 128 x 128 = 73,728 + 65,536 = 139,264
  a layer 64 x 139,264 = 8,912,896; the model 70 x 8,912,896 = 623,902,720
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO, shared_config

from kvplan.hardware.gpus import find_gpu
from kvplan.model.recurrent import RecurrentState, recurrent_states
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.kda import kda_flops_per_head
from kvplan.speed.lightning import lightning_flops_per_head
from kvplan.speed.recurrent import recurrent_flops
from kvplan.speed.shape import shape_for
from kvplan.speed.ssd import ssd_flops_per_group, ssd_flops_per_head

FAMILIES = Path(__file__).parent / "fixtures" / "families"
NEMOTRON_H = "nvidia__Nemotron-H-56B-Base-8K"


def spec_of(path: Path):
    return spec_from_config(json.loads(path.read_text()), "m")[0]


def test_one_nemotron_h_mamba2_layer_from_its_config_json():
    assert ssd_flops_per_head(256, 64, 128) == 81_920
    assert ssd_flops_per_group(256, 128) == 65_536
    layers = recurrent_states(spec_from_config(shared_config(NEMOTRON_H), "nemotron-h-56b")[0].layers)
    assert len(layers) == 54
    one = layers[:1]
    assert recurrent_flops(one) == 21_495_808
    assert recurrent_flops(one, tp=8) == 2_686_976
    assert recurrent_flops(one, tp=16) == 1_376_256  # its 8 groups replicated up to 16 ranks
    assert recurrent_flops(layers) == 1_160_773_632


def test_the_chunk_is_the_configs_mamba_chunk_size_then_chunk_size_then_the_class_default():
    cfg = shared_config(NEMOTRON_H)
    chunk = recurrent_states(spec_from_config(cfg, "a")[0].layers)[0].chunk
    silent = recurrent_states(spec_from_config({k: v for k, v in cfg.items() if k != "chunk_size"}, "b")[0].layers)
    both = recurrent_states(spec_from_config({**cfg, "mamba_chunk_size": 256}, "c")[0].layers)
    assert (chunk, silent[0].chunk, both[0].chunk) == (128, 128, 256)  # NemotronHConfig's chunk_size=128 default
    # at C = 256 a head's 2 C P doubles (16,384 -> 32,768) and a group's 2 C N (65,536 -> 131,072)
    assert recurrent_flops(both[:1]) == 256 * (65_536 + 32_768) + 8 * 131_072


@pytest.mark.parametrize("fixture, default", [
    # each transformers class's default where the config sets neither key (transformers 5.25.0 wheel):
    ("nemotron-3-nano-30b-a3b.json", 128),  # NemotronHConfig `chunk_size: int = 128` (L130)
    ("granite-4.0-h-small.json", 256),  # GraniteMoeHybridConfig `mamba_chunk_size: int | None = 256` (L102)
    ("falcon-h1-7b.json", 256),  # FalconH1Config `mamba_chunk_size: int | None = 256` (L84)
    ("mamba-codestral-7b.json", 256),  # Mamba2Config `chunk_size: int = 256` (L87)
])
def test_a_config_without_a_chunk_takes_its_classs_default(fixture, default):
    cfg = {k: v for k, v in json.loads((FAMILIES / fixture).read_text()).items()
           if k not in ("mamba_chunk_size", "chunk_size")}
    assert {s.chunk for s in recurrent_states(spec_from_config(cfg, "m")[0].layers) if s.variant == "mamba2"} == \
        {default}


def test_falcon_h1_mixer_beside_its_attention():
    spec = spec_of(REPO / "scripts" / "catalog_extra" / "tiiuae__Falcon-H1-0.5B-Instruct.json")
    mixers = recurrent_states(spec.layers)
    assert len(mixers) == 36 and mixers[0].chunk == 128
    assert recurrent_flops(mixers[:1]) == 1_212_416
    assert recurrent_flops(mixers[:1], tp=2) == 622_592
    assert find_in_catalog("falcon-h1-0.5b-instruct").layers[0].state == mixers[0]


def test_kimi_linear_kda_layers():
    assert kda_flops_per_head(128, 128) == 159_744
    kda = recurrent_states(spec_of(FAMILIES / "kimi-linear-default.json").layers)
    assert len(kda) == 21 and {layer.variant for layer in kda} == {"kda"}
    assert recurrent_flops(kda[:1]) == 5_111_808
    assert recurrent_flops(kda) == 107_347_968
    assert recurrent_flops(kda[:1], tp=4) == 5_111_808 / 4  # 8 heads a rank


def test_minimax_lightning_layers():
    assert lightning_flops_per_head(128, 128) == 139_264
    lightning = recurrent_states(spec_of(FAMILIES / "minimax-m1.json").layers)
    assert len(lightning) == 70
    assert recurrent_flops(lightning[:1]) == 8_912_896
    assert recurrent_flops(lightning) == 623_902_720


def test_a_layer_whose_widths_were_not_read_spends_none():
    # a catalog entry written before the widths were read: Nemotron-H's state fields alone
    old = RecurrentState(61_440, 4_194_304, 256, "mamba2", 8, 12_288)
    assert recurrent_flops([old]) == 0
    assert recurrent_flops([replace(old, key_head_dim=256, value_head_dim=64, chunk=128)]) == 21_495_808


def test_engine_shapes_carry_the_ssd_and_llama_cpp_does_not():
    spec = find_in_catalog("nemotron-h-56b-base-8k")
    gpu = find_gpu("h100-sxm")
    assert shape_for(spec, gpu, tp=8, engine="vllm").recurrent_flops == 54 * 2_686_976
    assert shape_for(spec, gpu, tp=8, engine="sglang").recurrent_flops == 54 * 2_686_976
    # ggml's SSM_SCAN: serial FP32 below 129 tokens a sequence, FP32 + FP16 cuBLAS above: priced 0 (recurrent.py)
    assert shape_for(spec, gpu, engine="llama.cpp", weight_dtype="q4_0").recurrent_flops == 0
