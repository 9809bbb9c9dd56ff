"""Vision tower + projector counts (kvplan.readers.towers.vision) against transformers' classes and hand arithmetic.

The golden numbers are transformers' own counts (sum of numel over the modules built on the meta
device from the published vision_config), not kvplan's output; the hand arithmetic is below each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.sources.catalog import find_in_catalog
from kvplan.readers.configs import spec_from_config
from kvplan.core.errors import KvplanError
from kvplan.model.weights import weight_bytes
from kvplan.readers.towers.vision import vision_params

ROOT = Path(__file__).resolve().parents[1]
EXTRA = ROOT / "scripts" / "catalog_extra"
GEMMA3 = json.loads((EXTRA / "google__gemma-3-27b-it.json").read_text())
LLAMA4_VISION = json.loads((EXTRA / "vision_configs.json").read_text())["meta-llama/Llama-4-Scout-17B-16E-Instruct"]


def test_gemma3_siglip_tower_and_projector():
    # SigLIP D=1152, I=4304, 27 layers, 896/14 = 64 -> 4096 positions:
    # patch 3*14*14*1152 + 1152 = 678,528; positions 4096*1152 = 4,718,592;
    # layer 4*(1152^2+1152) + (1152*4304+4304) + (4304*1152+1152) + 4*1152 = 15,239,504, x27 = 411,466,608;
    # post norm 2,304 -> tower 416,866,032 (transformers SiglipVisionModel, vision_use_head false);
    # projector 1152*5376 + 1152 = 6,194,304 (Gemma3MultiModalProjector).
    assert vision_params(GEMMA3, 5376) == 416_866_032 + 6_194_304


def test_llama4_vision_tower_adapter_and_projector():
    # D=1408, I=5632, 34 layers, 336/14 = 24 -> 577 positions with the class token:
    # patch 3*14*14*1408 = 827,904; class 1,408; positions 577*1408 = 812,416; pre/post norms 5,632;
    # layer 4*(1408^2+1408) + (1408*5632+5632) + (5632*1408+1408) + 4*1408 = 23,798,528, x34 = 809,149,952;
    # adapter 5632*4096 + 4096*4096 = 39,845,888 -> Llama4VisionModel 850,960,896;
    # projector 4096*5120 = 20,971,520 (Llama4MultiModalProjector, no bias).
    config = {"model_type": "llama4", "vision_config": LLAMA4_VISION}
    assert vision_params(config, 5120) == 850_960_896 + 20_971_520


def test_unknown_tower_is_not_guessed():
    config = {"model_type": "gemma3", "vision_config": {**GEMMA3["vision_config"], "vision_use_head": True}}
    assert vision_params(config, 5376) is None
    assert vision_params({"model_type": "llava", "vision_config": {"model_type": "clip_vision_model"}}, 4096) is None
    llava = {"model_type": "llava", "text_config": {**GEMMA3["text_config"]},
             "vision_config": {"model_type": "clip_vision_model"}}
    with pytest.raises(KvplanError, match="clip_vision_model.*refused rather than counted as 0"):
        spec_from_config(llava, "m")
    # with the checkpoint's bytes to carry it (a Hub repo's safetensors headers), a note instead
    spec, notices = spec_from_config(llava, "m", towers_in_checkpoint=True)
    assert spec.params.vision == 0 and any("checkpoint's tensor bytes carry it" in n for n in spec.notes)


def test_catalog_carries_the_vision_weights():
    # transformers' Llama4ForConditionalGeneration on the meta device: 108,641,793,536 parameters;
    # Gemma3ForConditionalGeneration (27B): 27,432,406,640.
    scout, gemma = find_in_catalog("llama-4-scout-17b-16e-instruct"), find_in_catalog("gemma-3-27b-it")
    assert scout.params.total == 108_641_793_536
    assert gemma.params.total == 27_432_406_640
    assert weight_bytes(gemma).vision == 2 * 423_060_336  # kept in bf16


def test_transformers_meta_device_agrees():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.gemma3 import configuration_gemma3 as c3, modeling_gemma3 as m3

    with torch.device("meta"):
        model = m3.Gemma3ForConditionalGeneration(c3.Gemma3Config(
            text_config=GEMMA3["text_config"], vision_config=GEMMA3["vision_config"]))
    vision = sum(p.numel() for n, p in model.named_parameters() if "vision_tower" in n or "multi_modal" in n)
    assert vision == vision_params(GEMMA3, 5376)
