"""A plan's `warning:` is for what may make a figure wrong or asks the user to act; an assumption at a stated default
is a `note:` (PlanWarning.note): SGLang's post-capture KV sizing off as it ships, an engine's own pipeline split, the
types vLLM holds recurrent states in. Held on the CLI's stderr, in --json and on the plans themselves."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def _fit(*args):
    res = CliRunner().invoke(whole_app(), ["fit", *args])
    assert res.exit_code == 0, res.output
    return res


def test_sglang_defaults_are_notes_and_a_no_fit_stays_a_warning():
    # the brief's case: Llama-3-70B (140 GB of bf16 weights) on one 80 GB H100 leaves nothing for the KV cache, a
    # verdict the user acts on; the 3-GPU fit's layer split (80 layers: 26, 27, 27) and the post-capture sizing off
    # are SGLang 0.5.23's defaults
    lines = _fit("llama-3-70b", "--gpu", "h100-80", "--ctx", "32k", "--engine", "sglang").stderr.splitlines()
    warned = [ln for ln in lines if ln.startswith("warning:")]
    assert warned == ["warning: 1 GPU: the weights and overhead leave no memory for the KV cache"]
    assert any(ln.startswith("note: SGLang 0.5.23's post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) "
                             "assumed off, its default") for ln in lines)
    assert any(ln.startswith("note: smallest fit: 3 GPUs: layers per pipeline stage 26,27,27: SGLang 0.5.23's own "
                             "split") for ln in lines)


def test_json_keeps_warnings_and_notes_apart():
    out = json.loads(_fit("llama-3-70b", "--gpu", "h100-80", "--ctx", "32k", "--engine", "sglang", "--json").stdout)
    best = out["plans"][out["recommended"]]
    assert best["warnings"] == []
    assert sorted(n.split(":")[0] for n in best["notes"]) == [
        "SGLang 0.5.23's post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING) assumed off, its default",
        "layers per pipeline stage 26,27,27"]
    assert out["plans"][0]["warnings"] == ["the weights and overhead leave no memory for the KV cache"]


def test_fusion_workspace_unpriced_stays_a_warning():
    # memory SGLang takes in the headroom that kvplan does not price: a danger, not a default's assumption
    plan = resolve_engine("sglang").result(find_in_catalog("deepseek-v3"), find_gpu("h200"), Deployment(8),
                                           Request(8192)).plan
    fusion = [w for w in plan.warnings if "all-reduce fusion" in w.message]
    assert len(fusion) == 1 and not fusion[0].note


def _states(model, version, opts=()):
    plan = resolve_engine("vllm", version, list(opts)).result(find_in_catalog(model), find_gpu("h100-80"),
                                                              Deployment(1), Request(8192)).plan
    [said] = [w for w in plan.warnings if "holds the" in w.message]
    return said


def test_vllm_state_types_are_a_note_unless_they_cast_doubt():
    # at the defaults the types are what the speed fit priced: a note
    assert _states("nvidia-nemotron-3-nano-30b-a3b-bf16", "0.19.0").note
    assert _states("qwen3-next-80b-a3b-thinking", "0.16.0").note
    # another type than the speed fit priced (a float32 recurrent state asked for), or a release that may not run
    # the model (Qwen3.5 before 0.17.0): warnings
    asked = _states("qwen3-next-80b-a3b-thinking", "0.19.0", ["mamba_ssm_cache_dtype=float32"])
    assert not asked.note and "the speed fit priced" in asked.message
    old = _states("qwen3.5-27b", "0.16.0")
    assert not old.note and "may not run the model" in old.message
