"""vLLM's multimodal budget (kvplan.engines.vllm.multimodal): --limit-mm-per-prompt as `--engine-opt
limit_mm_per_prompt=N`, the vision tower's weights and the encoder profile as their own rows.

Hand arithmetic from vLLM's source (v0.20.0 interfaces.py _mark_tower_model: a tower whose every modality is
limited to 0 is not built; encoder_budget.py / encoder_cache_manager.py: the profile run holds at most
budget = max(max_num_batched_tokens, tokens per item) encoder outputs of the text hidden size) and the
published Mistral-Small-3.1 config (tests/fixtures/families/mistral-small-3.1-24b.json).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from conftest import engine_figures

ROOT = Path(__file__).resolve().parents[1]
MISTRAL3 = ROOT / "tests" / "fixtures" / "families" / "mistral-small-3.1-24b.json"
QWEN35 = ROOT / "scripts" / "catalog_extra" / "Qwen__Qwen3.5-27B.json"
ARGS = ["--gpu", "h100", "--ctx", "8192", "--engine", "vllm", "--engine-version", "0.20.0",
        "--engine-opt", "max_num_batched_tokens=8192"]


def fit(path: Path, *extra: str):
    r = CliRunner().invoke(app, ["fit", str(path), *ARGS, *extra, "--json"])
    if r.exit_code:
        return r, None
    out = json.loads(r.stdout)  # no --gpus: the plans tried, the recommended one by index
    return r, out["plans"][out["recommended"]]


def test_limit_zero_drops_the_pixtral_tower_and_its_encoder_profile(kvplan_home):
    _, full = fit(MISTRAL3)
    _, text = fit(MISTRAL3, "--engine-opt", "limit_mm_per_prompt=0")
    # tower + projector 438,958,080 parameters x 2 B (bf16) = 877,916,160 B not loaded
    assert full["weight_bytes"] - text["weight_bytes"] == 877_916_160
    # encoder profile: 8,192 tokens x 5,120 (text hidden) x 2 B = 83,886,080 B, gone with the tower
    assert engine_figures(full)["encoder profile (dummy image outputs)"] == 83_886_080
    assert engine_figures(text)["encoder profile (dummy image outputs)"] == 0
    assert full["overhead_bytes_per_gpu"] - text["overhead_bytes_per_gpu"] == 83_886_080
    assert engine_figures(full)["vision tower weights (whole model)"] == 877_916_160
    assert engine_figures(text)["limit_mm_per_prompt (images)"] == 0


def test_limit_above_zero_keeps_the_tower_and_is_emitted(kvplan_home):
    _, full = fit(MISTRAL3)
    r = CliRunner().invoke(app, ["fit", str(MISTRAL3), *ARGS, "--engine-opt", "limit_mm_per_prompt=2",
                                 "--emit", "vllm"])
    assert r.exit_code == 0, r.output
    command = shlex.split(r.stdout.strip().splitlines()[-1])
    assert command[command.index("--limit-mm-per-prompt") + 1] == '{"image": 2}'
    _, two = fit(MISTRAL3, "--engine-opt", "limit_mm_per_prompt=2")
    assert two["weight_bytes"] == full["weight_bytes"]  # any limit >= 1 builds the tower


def test_a_tower_that_also_serves_video_is_not_dropped_by_an_image_limit(kvplan_home):
    r, _ = fit(QWEN35, "--engine-opt", "limit_mm_per_prompt=0")
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "every modality" in r.stderr.strip().splitlines()[-1]


def test_processor_cache_is_host_memory_printed_and_emitted(kvplan_home):
    # --mm-processor-cache-gb sizes a host-RAM cache (vLLM config/multimodal.py: "duplicated for each API process
    # and engine core process"): 6 GiB = 6 x 2^30 = 6,442,450,944 B per process, and not one GPU byte moves
    _, base = fit(MISTRAL3)
    _, six = fit(MISTRAL3, "--engine-opt", "mm_processor_cache_gb=6")
    assert engine_figures(six)["mm processor cache (host RAM per process)"] == 6_442_450_944
    assert engine_figures(base)["mm processor cache (host RAM per process)"] == 4 * 2**30  # vLLM's default, 4 GiB
    assert six["kv_memory_bytes_per_gpu"] == base["kv_memory_bytes_per_gpu"]
    # the GPU encoder cache is max(max_num_batched_tokens, one item's tokens) of encoder outputs (config/scheduler.py:
    # "not currently configurable"), the room the encoder profile reserves: 8,192 tokens
    assert engine_figures(six)["encoder cache (GPU) = max(max_num_batched_tokens, one item's tokens)"] == 8192
    r = CliRunner().invoke(app, ["fit", str(MISTRAL3), *ARGS, "--engine-opt", "mm_processor_cache_gb=6",
                                 "--emit", "vllm"])
    command = shlex.split(r.stdout.strip().splitlines()[-1])
    assert command[command.index("--mm-processor-cache-gb") + 1] == "6"


def test_processor_cache_refuses_a_negative_size(kvplan_home):
    r, _ = fit(MISTRAL3, "--engine-opt", "mm_processor_cache_gb=-1")
    assert r.exit_code == 2 and "mm_processor_cache_gb" in r.output and "Traceback" not in r.output


def test_processor_cache_refused_before_the_release_that_has_the_flag(kvplan_home):
    # vllm-project/vllm#22441 added mm_processor_cache_gb: the v0.10.1 sdist's engine/arg_utils.py has the field
    # ("mm_processor_cache_gb: int = MultiModalConfig.mm_processor_cache_gb"), v0.10.0's and v0.8.5's only
    # disable_mm_preprocessor_cache (and the environment's VLLM_MM_INPUT_CACHE_GIB)
    for version in ("0.5.0", "0.6.6", "0.8.5"):
        r = CliRunner().invoke(app, ["fit", str(MISTRAL3), *ARGS, "--engine-version", version, "--engine-opt",
                                     "mm_processor_cache_gb=6", "--emit", "vllm"])
        assert r.exit_code == 2 and "Traceback" not in r.output, (version, r.output)
        last = r.stderr.strip().splitlines()[-1]
        assert "0.10.1" in last and "--mm-processor-cache-gb" not in r.stdout
    r = CliRunner().invoke(app, ["fit", str(MISTRAL3), *ARGS, "--engine-version", "0.10.1", "--engine-opt",
                                 "mm_processor_cache_gb=6", "--emit", "vllm"])
    assert r.exit_code == 0 and "--mm-processor-cache-gb 6" in r.stdout


def test_encoder_cache_is_at_least_one_item(kvplan_home):
    # vLLM compute_mm_encoder_budget: max(max_num_batched_tokens, the largest item's tokens). Gemma 3's image is
    # 256 tokens (google/gemma-3-27b-it config.json "mm_tokens_per_image": 256): at max_num_batched_tokens 128 the
    # cache and the profile hold 256 tokens; 256 x 5,376 (text hidden) x 2 B = 2,752,512 B of dummy outputs
    args = ["fit", "gemma-3-27b-it", "--gpu", "h100", "--ctx", "8192", "--engine", "vllm", "--engine-version",
            "0.20.0", "--engine-opt", "max_num_batched_tokens=128", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    f = engine_figures(out["plans"][out["recommended"]])
    assert f["encoder cache (GPU) = max(max_num_batched_tokens, one item's tokens)"] == 256
    assert f["encoder profile (dummy image outputs)"] == 2_752_512


def test_tokens_per_image_are_read_from_the_config():
    # The item size comes from the config's own `mm_tokens_per_image` (google/gemma-3-27b-it: 256), not from the
    # architecture's name: a config that says 64 gives 64, one that says nothing gives 0 (the budget's floor).
    import copy

    from kvplan.readers.configs import spec_from_config

    cfg = json.loads((Path(__file__).resolve().parents[1] / "scripts" / "catalog_extra" /
                      "google__gemma-3-27b-it.json").read_text())
    assert spec_from_config(cfg, "gemma-3-27b-it")[0].mm_tokens_per_image == 256
    other = copy.deepcopy(cfg)
    other["mm_tokens_per_image"] = 64
    assert spec_from_config(other, "g")[0].mm_tokens_per_image == 64
    del other["mm_tokens_per_image"]
    assert spec_from_config(other, "g")[0].mm_tokens_per_image == 0


def test_limit_zero_restates_the_towers_note_as_skipped_not_counted(kvplan_home):
    # issue 22: under limit_mm_per_prompt=0 the reader's note said the tower is "counted in the weights" while the
    # tower row showed 0 B. The note names the same 438,958,080 parameters (x 2 B = 877,916,160 B) either way; at 0
    # it says vLLM skips them, and the row agrees: 0 B
    def tower_note(r):
        [note] = [n for n in r.stderr.splitlines() if "Pixtral vision tower and Mistral 3 projector" in n]
        assert "438,958,080 parameters" in note
        return note

    for limit in (None, "2"):  # unset, or any limit of one or more: built and counted
        r, out = fit(MISTRAL3, *(("--engine-opt", f"limit_mm_per_prompt={limit}") if limit else ()))
        assert tower_note(r).endswith("are counted in the weights")
        assert engine_figures(out)["vision tower weights (whole model)"] == 877_916_160
    r, out = fit(MISTRAL3, "--engine-opt", "limit_mm_per_prompt=0")
    note = tower_note(r)
    assert "counted in the weights" not in note
    assert "are skipped: vLLM does not build the tower under limit_mm_per_prompt 0" in note
    assert engine_figures(out)["vision tower weights (whole model)"] == 0
