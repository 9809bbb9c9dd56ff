"""SGLang's multimodal memory (kvplan/engines/sglang/multimodal.py): its default mem_fraction_static scaled for a
vision model by the vision_config's size (`adjust_mem_fraction_for_vlm`), and the runtime embedding cache
(SGLANG_VLM_CACHE_SIZE_MB) checked against the headroom above the pool. Hand arithmetic from SGLang's formula
and the published configs' vision_config (layers x hidden as config.json writes them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines import resolve_engine
from kvplan.engines.sglang.multimodal import vlm_factor
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from kvplan.sources.resolve import resolve_model
from conftest import engine_figures, unwrapped

ROOT = Path(__file__).resolve().parents[1]
MISTRAL3 = ROOT / "tests" / "fixtures" / "families" / "mistral-small-3.1-24b.json"
H100 = find_gpu("h100")


def _settings(model, *opts, version="0.5.23"):
    res = resolve_engine("sglang", version, list(opts)).result(model, H100, Deployment(1, 1), Request(context=8192))
    return res.settings, res.capacity


@pytest.mark.parametrize("name, expected", [
    # ratio = L x H^2 / (24 x 1024^2); factor = 0.95 x clamp(1 - 0.1 (ratio - 1), 0.8, 1.05)
    # Gemma 3 SigLIP 27 x 1152: 35,831,808 / 25,165,824 = 1.423828125 -> 0.95 x 0.9576171875 = 0.909736328125
    ("gemma-3-27b-it", 0.909736328125),
    # Llama 4 34 x 1408: 34 x 1,982,464 = 67,403,776; / 25,165,824 = 2 + 17,072,128 / 25,165,824 = 2.678385416666...
    #   -> 1 - 0.1 x 1.678385416666... = 0.832161458333... -> x 0.95 = 0.790553385416666...
    ("llama-4-scout-17b-16e-instruct", 0.7905533854166667),
    # Qwen3.5's ViT writes `depth`, not num_hidden_layers: SGLang's getattr default 24; 24 x 1152 -> 1.265625
    #   -> 0.95 x 0.9734375 = 0.924765625
    ("qwen3.5-27b", 0.924765625),
])
def test_vlm_factor_by_hand(name, expected):
    # Gemma 3 and Llama 4 are on SGLang's mm_disabled_models: the factor applies with --enable-multimodal
    assert vlm_factor(find_in_catalog(name), "0.5.23", enable=True) == pytest.approx(expected, rel=1e-12)


def test_default_fraction_scaled_for_gemma3_on_h100():
    # 0.5.23 default on an H100 (nvidia-smi's 81,559 MiB, which SGLang reads: defaults.capacity_mib): reserve
    # 512 + 1.5 x 8,192 + 1/8 x 1,024 + 2 x 256 = 13,440 MiB (above the 10 GiB floor; with --enable-multimodal
    # Gemma 3 is a VLM off the breakable allow-list: no prefill graph reserve)
    # -> round((81,559 - 13,440) / 81,559, 3) = round(0.83521, 3) = 0.835; x 0.909736328125 = 0.759629...
    st, _ = _settings(find_in_catalog("gemma-3-27b-it"), "enable_multimodal=true")
    assert st["mem_fraction_static"] == pytest.approx(0.835 * 0.909736328125, rel=1e-12)
    assert st["vlm_factor"] == pytest.approx(0.909736328125)


def test_pixtral_baseline_tower_and_text_models():
    spec = resolve_model(str(MISTRAL3)).spec  # Pixtral vision_config 24 x 1024: ratio 1 -> 0.95 exactly
    assert spec.vision_dims == (24, 1024)
    assert vlm_factor(spec, "0.5.23") == pytest.approx(0.95)
    assert vlm_factor(find_in_catalog("qwen3-14b"), "0.5.23") == 1.0  # no tower
    assert vlm_factor(find_in_catalog("gemma-3-27b-it"), "0.4.3") == 0.95  # before 0.4.9: ModelRunner's flat 0.95
    assert vlm_factor(spec, "0.4.3") == 0.95  # and before 0.4.6 no architecture is switched off


def test_before_049_the_flat_factor_matches_the_gemma3_log():
    # sgl-project/sglang#4826 (Gemma 3, tp 1, March 2025): 131.08 GB free after the weights, 8.13 used by them, so
    # 139.21 before; K + V = 54.12 + 54.12 = 108.24 GB. rest = 131.08 - 139.21 x (1 - f) must hold them:
    # f = 0.88 (the 0.4.x default for one rank) gives 114.37, 6 GB more than the pool; 0.88 x 0.95 = 0.836 gives
    # 131.08 - 22.835 = 108.245 GB, the pool (834,615 tokens x 139,264 B = 108.25 GiB for gemma-3-4b)
    free_after, free_before, pool = 131.08, 131.08 + 8.13, 54.12 + 54.12
    assert abs(free_after - free_before * (1 - 0.88 * 0.95) - pool) < 0.01
    assert free_after - free_before * (1 - 0.88) - pool > 6
    gemma = find_in_catalog("gemma-3-27b-it")  # the rule reads the architecture's tower, not its size
    st, _ = _settings(gemma, version="0.4.3")
    assert st["mem_fraction_static"] == pytest.approx(0.88 * 0.95)
    st, _ = _settings(gemma, "mem_fraction_static=0.8", version="0.4.3")  # a given fraction is scaled too
    assert st["mem_fraction_static"] == pytest.approx(0.8 * 0.95)


def test_a_fraction_the_user_gives_is_not_scaled():
    st, _ = _settings(find_in_catalog("gemma-3-27b-it"), "mem_fraction_static=0.8")
    assert st["mem_fraction_static"] == 0.8 and st["vlm_factor"] == 1.0


def test_embedding_cache_beyond_the_headroom_is_warned():
    gemma = find_in_catalog("gemma-3-27b-it")  # 0.5.17: the cache fills the headroom (0.5.18 on: the budget, below)
    # headroom at 0.99 of 79.18 GiB: 0.79 GiB; a 2,048 MB cache (2 GiB) cannot fit it
    _, cap = _settings(gemma, "mem_fraction_static=0.99", "vlm_cache_size_mb=2048", "enable_multimodal=true",
                       version="0.5.17")
    assert any("SGLANG_VLM_CACHE_SIZE_MB=2048" in n for n in cap.notes)
    _, cap = _settings(gemma, "mem_fraction_static=0.99", "vlm_cache_size_mb=2048", version="0.5.17")  # off: none
    assert not any("SGLANG_VLM_CACHE_SIZE_MB" in n for n in cap.notes)
    _, cap = _settings(gemma, "enable_multimodal=true", version="0.5.17")  # the default 100 MB fits (19 GiB)
    assert not any("SGLANG_VLM_CACHE_SIZE_MB" in n for n in cap.notes)


def test_from_0_5_18_the_cache_is_reserved_out_of_the_budget():
    # 0.5.18 mem_cache/kv_cache_configurator.py L1785-1789 (0.5.23 L3034-3038): rest = available - slack -
    # mm_runtime_reservation_gb, SGLANG_VLM_CACHE_SIZE_MB / 1024 GiB for a multimodal model (L130-147). So two caches
    # of 100 and 612 MB leave budgets (612 - 100) x 2^20 = 536,870,912 B apart, and the pool shrinks with it; in
    # 0.5.17 (L1625-1635, no such term) the budget does not move. No headroom warning once it is in the budget.
    gemma = find_in_catalog("gemma-3-27b-it")

    def budget(version, mb):
        _, cap = _settings(gemma, "mem_fraction_static=0.8", "enable_multimodal=true", f"vlm_cache_size_mb={mb}",
                           version=version)
        return engine_figures(cap)["KV budget per GPU (rest)"], cap
    (small, _), (large, cap) = budget("0.5.23", 100), budget("0.5.23", 612)
    assert small - large == 536_870_912
    assert engine_figures(cap)["mm embedding cache (reserved from the budget)"] == 612 * 2**20
    assert any("SGLANG_VLM_CACHE_SIZE_MB=612" in n and "out of the KV budget" in n for n in cap.notes)
    assert budget("0.5.17", 100)[0] == budget("0.5.17", 612)[0]
    _, off = _settings(gemma, "mem_fraction_static=0.8", "vlm_cache_size_mb=612")  # multimodal off: not reserved
    assert engine_figures(off)["KV budget per GPU (rest)"] == small + 100 * 2**20


def test_the_cache_size_is_emitted_as_sglangs_environment_variable(kvplan_home):
    import shlex

    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["fit", "gemma-3-27b-it", "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--emit", "sglang"]
    r = CliRunner().invoke(app, [*args, "--engine-opt", "vlm_cache_size_mb=512"])
    assert r.exit_code == 0, r.output
    command = shlex.split(unwrapped(r.stdout).strip().splitlines()[-1])
    assert command[:2] == ["SGLANG_VLM_CACHE_SIZE_MB=512", "python"]
    # before 0.4.9 SGLang scales the emitted fraction by 0.95 again: kvplan emits the plan's fraction / 0.95
    r = CliRunner().invoke(app, [*args, "--engine-version", "0.4.3"])
    command = shlex.split(unwrapped(r.stdout).strip().splitlines()[-1])
    emitted = float(command[command.index("--mem-fraction-static") + 1])
    # the plan's fraction in force is the 0.4.x default 0.88 x 0.95 = 0.836 (sglang#4826 above); the flag that gives
    # it is 0.836 / 0.95 = 0.88 exactly (to the five decimals kvplan emits); without the division it would be 0.836
    assert emitted == 0.88
    # the margin note names the same flag value, and its lowest value is a flag value too (in force / 0.95)
    note = next(line for line in r.stderr.splitlines() if line.startswith("margin:"))
    assert "at --mem-fraction-static 0.88 " in note and "0.836 in force" in note
    r = CliRunner().invoke(app, args)
    assert shlex.split(unwrapped(r.stdout).strip().splitlines()[-1])[0] == "python"  # unset: SGLang's own 100


def test_the_headroom_is_the_free_memory_before_the_weights_above_the_fraction():
    # SGLang sizes its pool from rest = free_after_weights - free_before_weights x (1 - f) (0.5.23
    # mem_cache/kv_cache_configurator.py L2990-3060), so what it leaves above the fraction is free_before x (1 - f),
    # the free memory once the CUDA context is up, not the GPU's usable memory x (1 - f). Gemma 3 27B on one H100 at
    # a given 0.8 (not scaled by the VLM factor in 0.5.23): (85,018,877,624 usable - 536,870,912 tp-1 init) x 0.2
    # = 84,482,006,712 x 0.2 = 16,896,401,342 B (usable x 0.2 would be 17,003,775,524 B, 0.10 GiB high)
    _, cap = _settings(find_in_catalog("gemma-3-27b-it"), "mem_fraction_static=0.8", "enable_multimodal=true")
    assert engine_figures(cap)["headroom above the fraction"] == 16_896_401_342


def test_the_cache_fits_what_the_request_slots_leave():
    # Both draw on the memory above the fraction, in SGLang's order: the request-slot pool at start-up, right after
    # the token pool is sized (kvplan.engines.sglang.req_pool), the embedding cache only as image embeddings arrive
    # (0.5.23 mem_cache/multimodal_cache.py L76-130: a dict, nothing pre-allocated). Gemma 3 27B on one H100 at
    # 0.5.17, a given 0.99, --max-running-requests 64, context 131,072:
    #   room = (85,018,877,624 usable - 536,870,912 init) x (1 - 0.99) = 844,820,067 B (the test above's free memory)
    #   slots = min(64, tokens // 2) = 64 (0.5.14 on) + the padding row (0.5.11 on) = 65 rows of (131,072 + 4) int32:
    #   65 x 131,076 x 4 = 34,079,760 B, so 844,820,067 - 34,079,760 = 810,740,307 B are left for the cache.
    # A 790 MB cache (790 x 2^20 = 828,375,040 B) fits the room but not what the slots leave: warned; 770 MB
    # (807,403,520 B) fits both.
    def run(mb):  # 0.5.17: the last release read before the cache is reserved out of the budget (test above)
        res = resolve_engine("sglang", "0.5.17", ["mem_fraction_static=0.99", "enable_multimodal=true",
                                                  "max_running_requests=64", f"vlm_cache_size_mb={mb}"]).result(
            find_in_catalog("gemma-3-27b-it"), H100, Deployment(1, 1), Request(context=131072))
        return engine_figures(res.capacity), res.capacity.notes
    figures, notes = run(790)
    assert figures["request slots (req_to_token)"] == (65, 131_076, 34_079_760)
    assert figures["headroom above the fraction"] == 844_820_067
    assert figures["headroom after request slots"] == 810_740_307
    assert figures["mm embedding cache (runtime)"] == 828_375_040 < 844_820_067
    assert any("SGLANG_VLM_CACHE_SIZE_MB=790" in n and "after its request-slot pool" in n for n in notes)
    figures, notes = run(770)
    assert figures["mm embedding cache (runtime)"] == 807_403_520 < 810_740_307
    assert not any("SGLANG_VLM_CACHE_SIZE_MB" in n for n in notes)
