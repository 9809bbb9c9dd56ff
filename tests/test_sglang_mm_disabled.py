"""SGLang's multimodal switched off by default for some architectures (`mm_disabled_models`), and 0.5.22's cut of a
default decode CUDA-graph batch to --max-running-requests (kvplan/engines/sglang/multimodal.py, defaults.py).

Sources, PyPI wheels read: `srt/configs/model_config.py` `mm_disabled_models` (0.4.5.post3 L75-80 Llama 4 only,
0.4.6 L76-86 Gemma 3 + Llama 4, 0.5.1 L113-122 + Step3-VL, 0.5.16 L309-323 + Inkling, 0.5.23 L690-717);
`srt/models/mllama4.py` `has_vision = has_vision_weights and enable_multimodal` (from 0.4.9.post4; 0.5.23 L468);
`srt/arg_groups/memory_hook.py` 0.5.22 / 0.5.23 L182-188 (the decode-batch cut), L281-336 (the reserve).
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.sglang.defaults import capped_graph_bs
from kvplan.engines.sglang.multimodal import is_multimodal, switched_off, tower_dropped, vlm_factor
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from kvplan.sources.resolve import resolve_model

H100 = find_gpu("h100")
MISTRAL3 = Path(__file__).resolve().parent / "fixtures" / "families" / "mistral-small-3.1-24b.json"
GEMMA3 = find_in_catalog("gemma-3-27b-it")
SCOUT = find_in_catalog("llama-4-scout-17b-16e-instruct")


def _result(model, *opts, version="0.5.23", tp=1):
    return resolve_engine("sglang", version, list(opts)).result(model, H100, Deployment(tp, 1), Request(context=8192))


def test_gemma3_keeps_sglangs_text_fraction_and_prefill_graph():
    # 0.5.23 on an H100 (nvidia-smi 81,559 MiB): reserve 512 + 1.5 x 8,192 + 1/8 x 1,024 + 2 x 256 = 13,440 MiB,
    # + the breakable prefill graph a text model keeps, 58 sizes x 8 MiB = 464 -> 13,904 MiB (above the 10 GiB floor)
    # -> round((81,559 - 13,904) / 81,559, 3) = round(0.829522, 3) = 0.830; no VLM factor (is_multimodal False).
    # The VLM path (--enable-multimodal): no graph, 0.835 x 0.909736328125 = 0.759630
    off = _result(GEMMA3)
    on = _result(GEMMA3, "enable_multimodal=true")
    assert off.settings["mem_fraction_static"] == 0.830 and off.settings["vlm_factor"] == 1.0
    assert off.settings["prefill_graph"][:2] == ("breakable", 464)
    assert on.settings["mem_fraction_static"] == pytest.approx(0.835 * 0.909736328125, rel=1e-12)
    assert on.settings["prefill_graph"][0] == "off"
    # the pool: 0.070370 more of the 79.18 GiB torch total (less what was in use before loading) is KV cache,
    # about 5.5 GiB, 11,000+ tokens of 507,904 B (Gemma 3's 62 layers in the full pool)
    assert off.capacity.tokens - on.capacity.tokens > 11_000
    assert any("switches multimodal off by default for Gemma3ForConditionalGeneration" in n
               for n in off.capacity.notes)
    assert not any("switches multimodal off" in n for n in on.capacity.notes)


@pytest.mark.parametrize("arch, before, since", [
    ("Llama4ForConditionalGeneration", "0.4.5.post2", "0.4.5.post3"),  # post1-post2 compared a list to a string
    ("Gemma3ForConditionalGeneration", "0.4.5.post3", "0.4.6"),
    ("Step3VLForConditionalGeneration", "0.4.10", "0.5.1"),
    ("InklingForConditionalGeneration", "0.5.15", "0.5.16"),
])
def test_the_list_by_release(arch, before, since):
    model = dataclasses.replace(GEMMA3, architecture=arch)  # a vision model (tower counted) of that architecture
    assert not switched_off(model, before) and switched_off(model, since) and switched_off(model, "0.5.23")
    assert is_multimodal(model, before) and not is_multimodal(model, since)
    assert is_multimodal(model, "0.5.23", enable=True)
    assert vlm_factor(model, since) == 1.0


def test_text_models_and_other_vlms_are_untouched():
    qwen_vl = find_in_catalog("qwen3.5-27b")  # a VLM not on the list
    assert is_multimodal(qwen_vl, "0.5.23") and vlm_factor(qwen_vl, "0.5.23") < 1.0
    assert not switched_off(find_in_catalog("qwen3-14b"), "0.5.23")  # no tower: not a VLM at all


def test_llama4_builds_no_vision_tower_without_multimodal():
    # mllama4.py's has_vision needs enable_multimodal from 0.4.9.post4 (0.4.9 to post3 build the tower whatever the
    # flag). Its 871,932,416 tower parameters in bf16 over tp 4 (no part kept whole): 871,932,416 x 2 / 4 =
    # 435,966,208 B a GPU fewer in the weights. The count by hand from the config's vision_config (34 layers, hidden
    # 1408, MLP 5632, patch 14, 577 positions, pixel-shuffle 0.5 into 4096) and text hidden 5120 (transformers'
    # Llama4VisionModel + projector): patch 588 x 1408 + class 1408 + positions 577 x 1408 + pre/post norms 4 x 1408
    # + 34 x (4 x (1408^2 + 1408) + 1408 x 5632 + 5632 + 5632 x 1408 + 1408 + 4 x 1408) + adapter 5632 x 4096
    # + 4096^2 + projector 4096 x 5120 = 871,932,416
    assert SCOUT.params.vision == 871_932_416 and SCOUT.params.vision_replicated == 0
    assert not tower_dropped(SCOUT, "0.4.9.post3") and tower_dropped(SCOUT, "0.4.9.post4")
    assert not tower_dropped(SCOUT, "0.5.23", enable=True)
    assert not tower_dropped(GEMMA3, "0.5.23")  # gemma3_mm.py builds its tower whatever the flag
    kept, dropped = _result(SCOUT, version="0.4.9.post3", tp=4), _result(SCOUT, version="0.4.9.post4", tp=4)
    assert kept.plan.weight_bytes_per_gpu - dropped.plan.weight_bytes_per_gpu == 435_966_208
    on = _result(SCOUT, "enable_multimodal=true", tp=4)
    assert on.plan.weight_bytes_per_gpu == kept.plan.weight_bytes_per_gpu
    # 0.5.23 at tp 4, no 0.7906 factor: reserve 512 + 1.5 x 8,192 + 4/8 x 1,024 + 2 x 512 (the decode batch at
    # tp >= 4) + 464 (the breakable graph) = 14,800 MiB -> round((81,559 - 14,800) / 81,559, 3) = round(0.81854, 3)
    # = 0.819; the VLM path (no graph: 14,336 MiB -> 0.824, x 0.7905533854 = 0.6514) leaves no KV cache on 4 H100s
    assert on.settings["mem_fraction_static"] == pytest.approx(0.824 * 0.7905533854166667, rel=1e-12)
    assert _result(SCOUT, tp=4).settings["mem_fraction_static"] == 0.819
    assert on.capacity.tokens == 0 and _result(SCOUT, tp=4).capacity.tokens > 200_000


def test_the_flag_is_emitted_and_refused_before_it_exists(kvplan_home):
    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["fit", "gemma-3-27b-it", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--emit", "sglang"]
    r = CliRunner().invoke(app, [*args, "--engine-opt", "enable_multimodal=true"])
    assert r.exit_code == 0, r.output
    assert "--enable-multimodal" in shlex.split(r.stdout.strip().splitlines()[-1])
    r = CliRunner().invoke(app, args)
    assert "--enable-multimodal" not in shlex.split(r.stdout.strip().splitlines()[-1])
    with pytest.raises(KvplanError, match="from 0.4.6"):
        _result(GEMMA3, "enable_multimodal=true", version="0.4.3")


def test_a_default_decode_batch_is_cut_to_max_running_requests_from_0522():
    assert capped_graph_bs("0.5.21", 256, 64) == 256  # not in 0.5.20 / 0.5.21's memory_hook.py
    assert capped_graph_bs("0.5.22", 256, 64) == 64
    assert capped_graph_bs("0.5.23", 256, 0) == 256 and capped_graph_bs("0.5.23", 256, 512) == 256
    qwen = find_in_catalog("qwen3-8b")
    # H100, 0.5.23, --max-running-requests 64: reserve 512 + 12,288 + 128 + 2 x 64 + 464 (graph) = 13,520 MiB
    # -> round((81,559 - 13,520) / 81,559, 3) = round(0.834230, 3) = 0.834; with the batch at 256: 13,904 -> 0.830
    assert _result(qwen, "max_running_requests=64").settings["mem_fraction_static"] == 0.834
    assert _result(qwen, "max_running_requests=64", version="0.5.21").settings["mem_fraction_static"] == 0.830
    # a stated --cuda-graph-max-bs is kept
    assert _result(qwen, "max_running_requests=64", "cuda_graph_max_bs=256").settings["mem_fraction_static"] == 0.830


def test_the_flat_factors_before_the_tower_formula():
    # model_runner.py: x 0.95 to 0.4.4.post3 (L254), x 0.90 from 0.4.4.post4 (L273) to 0.4.8 (L415), any fraction;
    # server_args.py: x 0.90 on its default in 0.4.9-0.4.9.post2 (0.4.9 L328-329), the tower formula from 0.4.9.post3
    # (L349: adjust_mem_fraction_for_vlm). Mistral Small 3.1's Pixtral tower (24 x 1024, ViT-L): 0.95 by formula
    pixtral = resolve_model(str(MISTRAL3)).spec
    assert [vlm_factor(pixtral, v) for v in ("0.4.3", "0.4.4.post3", "0.4.4.post4", "0.4.8", "0.4.9",
                                             "0.4.9.post2", "0.4.9.post3")] == [0.95, 0.95, 0.90, 0.90, 0.90, 0.90,
                                                                                0.95]
    # 0.4.9 on an H100 (81,559 MiB: 9.5 + 1/2 GiB reserved = 10,240 MiB) -> round(71,319 / 81,559, 3) = 0.874; x 0.90
    assert _result(pixtral, version="0.4.9").settings["mem_fraction_static"] == pytest.approx(0.874 * 0.90)
