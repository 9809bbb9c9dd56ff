"""vLLM 0.8.0-0.10.x's fall back to V0 (kvplan.engines.vllm.v0_fallback), release by release.

Every expectation is read from `EngineArgs._is_v1_supported_oracle` (vllm/engine/arg_utils.py) and the model classes
marked SupportsV0Only in the PyPI wheels 0.8.0 ... 0.10.2 (line numbers in the module docstring and docs/engines.md
section 1.8), and, for the corpus records, from what their logs print (V1's worker lines, V0's "# CPU blocks").
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines.vllm import engine as vllm
from kvplan.engines.vllm.v0_fallback import fallback, runs_v1
from kvplan.engines.versions import parse_version
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.lora import parse_lora
from kvplan.planning.request import read_request
from kvplan.sources.catalog import find_in_catalog

LLAMA = find_in_catalog("llama-3.1-8b-instruct")


def st(version, gpu="h100", model=LLAMA, pp=1, opts=None, **req):
    model = find_in_catalog(model) if isinstance(model, str) else model
    r = read_request(model, context=8192, **req)
    return vllm.settings(model, find_gpu(gpu), Deployment(pp=pp), r, version, opts or {}, {})


def test_plain_cuda_runs_v1_and_says_what_it_assumes():
    s = st("0.8.5")
    assert s.v1 and "runs the V1 engine" in s.engine_note and "VLLM_USE_V1" in s.engine_note
    assert st("0.11.0").engine_note == "" and st("0.6.6").engine_note == ""  # no choice to state


@pytest.mark.parametrize("version,v1", [("0.8.5", False), ("0.9.1", False), ("0.9.2", True), ("0.10.1", True)])
def test_rocm_is_experimental_until_0_9_2(version, v1):
    # 0.8.5 L1493 not_cuda -> _warn_or_fallback; 0.9.1 L1444 v0_hardware; 0.9.2 L1492 default_v1 (ROCm: True)
    s = st(version, "mi300x")
    assert s.v1 is v1
    assert (not v1) == ("ROCm" in s.engine_note)


@pytest.mark.parametrize("version,v1", [("0.8.5", False), ("0.10.1", False), ("0.10.2", True)])
def test_turing_falls_back_while_the_capability_check_lasts(version, v1):
    # "Compute Capability < 8.0": 0.8.5 L1353, 0.10.1 L1402; 0.10.2's oracle has no such check
    assert st(version, "t4").v1 is v1


@pytest.mark.parametrize("version,gpu,v1", [
    ("0.8.1", "h100", False),  # any kv_cache_dtype != auto (0.8.0 L1480)
    ("0.8.2", "h100", True),  # fp8 on FA3: compute capability 9.x (0.8.2 L1561-1575)
    ("0.8.5", "a100-80", False), ("0.8.5", "l40s", False), ("0.9.2", "b200", False),
    ("0.10.0", "b200", True),  # is_kv_cache_dtype_supported: capability 10.0 (0.10.1 platforms/cuda.py L503)
    ("0.10.1", "l40s", False), ("0.10.1", "h100", True),
    ("0.9.1", "mi300x", False),  # the cache is fine on ROCm from 0.9.0, the platform is not until 0.9.2
    ("0.10.1", "mi300x", True),
])
def test_fp8_kv_cache_by_release_and_gpu(version, gpu, v1):
    assert st(version, gpu, kv_dtype="fp8").v1 is v1


def test_fp8_on_an_mla_model_stays_on_v1_from_0_10_2():
    # 0.10.2 platforms/cuda.py L528-539: an MLA model's default FlashMLA takes fp8 on any CUDA GPU
    assert not st("0.10.1", "a100-80", "deepseek-v2-lite", kv_dtype="fp8").v1
    assert st("0.10.2", "a100-80", "deepseek-v2-lite", kv_dtype="fp8").v1


def test_auto_kv_is_not_a_flag():
    assert st("0.8.0", "a100-80", kv_dtype="auto").v1


@pytest.mark.parametrize("model,version,v1", [
    ("gemma-3-27b-it", "0.8.0", False), ("gemma-3-27b-it", "0.8.1", True),  # gemma3_mm.py 0.8.0 L376 only
    ("ai21-jamba-1.5-mini", "0.10.0", False),  # jamba.py 0.10.0 L363
    ("ai21-jamba-1.5-mini", "0.10.1", False),  # not V0-only, but recurrent state: "Mamba" (0.10.1 L1430)
    ("ai21-jamba-1.5-mini", "0.10.2", True),
    ("falcon-h1-0.5b-instruct", "0.9.1", False), ("falcon-mamba-7b", "0.10.0", False),
])
def test_architectures_and_recurrent_state(model, version, v1):
    assert st(version, "h100", model).v1 is v1


def test_lora_pp_and_ngram_by_release():
    lora = parse_lora("4:16")
    assert not st("0.8.2", lora=lora).v1 and st("0.8.3", lora=lora).v1  # _warn_or_fallback("LORA"): 0.8.2 L1685
    assert not st("0.9.0", pp=2).v1 and st("0.9.1", pp=2).v1  # 0.9.0 L1378-1384 leaves out the default backend
    found = fallback(parse_version("0.8.5"), LLAMA, find_gpu("h100"), 2, None, None, None)
    assert found is not None and not found.experimental  # PP without Ray: _raise_or_fallback (0.8.5 L1478-1482)


def test_v0_fallback_plans_v0s_rules():
    # _set_default_args_v0: max(max_model_len, 2048) tokens, 256 sequences (0.10.1 L1580-1582); V0's 16-token
    # blocks for an MLA model (V1's FlashMLA forces 64); V0's concurrency print, tokens / max_model_len
    s = st("0.10.1", "l40s", kv_dtype="fp8")
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (8192, 256)
    assert st("0.8.5", "mi300x", "deepseek-v2-lite").block_size == 16
    assert "V0's MLA backend of 0.8-0.10 is not read" in st("0.8.5", "mi300x", "deepseek-v2-lite").engine_note
    assert st("0.8.5", "h100", "deepseek-v2-lite").block_size == 64


def test_use_v1_follows_vllm_use_v1():
    assert not st("0.10.1", opts={"use_v1": False}).v1
    assert st("0.8.5", "mi300x", opts={"use_v1": True}).v1  # experimental: VLLM_USE_V1=1 runs it on V1
    with pytest.raises(KvplanError, match="refuses"):  # unsupported: VLLM_USE_V1=1 raises NotImplementedError
        st("0.8.5", "t4", opts={"use_v1": True})
    with pytest.raises(KvplanError, match="no V0 engine"):
        st("0.11.0", opts={"use_v1": False})
    assert runs_v1((0, 7, 3), None, None) is False and runs_v1((0, 11, 0), None, None) is True


def test_corpus_logs_run_the_engine_the_rule_picks():
    # vllm-project/vllm#15039 (0.8.0rc2, LoRA): its log prints V0's "# cuda blocks: 29547, # CPU blocks: 3276"
    # (executor_base.py), so V0: the rule's LoRA fallback in 0.8.0-0.8.2
    lora = parse_lora("4:16")
    assert fallback(parse_version("0.8.0rc2"), find_in_catalog("llama-3.3-70b-instruct"), find_gpu("a100-80"), 1,
                    None, None, lora) is not None
    # dennislee22's A100 runs (0.10.1.1, kv auto) print "Initializing a V1 LLM engine (v0.10.1.1)"; anton's RTX 3090
    # (0.10.0, Qwen3-30B-A3B AWQ) prints V1's topk_topp_sampler.py line
    assert fallback(parse_version("0.10.1.1"), find_in_catalog("qwen2-7b-instruct"), find_gpu("a100-80"), 1,
                    None, None, None) is None
    assert fallback(parse_version("0.10.0"), find_in_catalog("qwen3-30b-a3b"), find_gpu("rtx-3090"), 1,
                    None, "int4", None) is None


def test_the_command_sets_vllm_use_v1_and_the_plan_says_why(kvplan_home):
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app
    args = ["fit", "llama-3.1-8b-instruct", "--engine", "vllm", "--ctx", "8k", "--emit", "vllm"]
    v0 = ["--engine-version", "0.10.1", "--engine-opt", "use_v1=false"]
    r = CliRunner().invoke(app, [*args, "--gpu", "h100-sxm", *v0, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["emit"].startswith("VLLM_USE_V1=0 vllm serve ")
    r = CliRunner().invoke(app, [*args, "--gpu", "mi300x", "--engine-version", "0.9.1"])
    assert r.exit_code == 0, r.output
    assert "falls back to the V0 engine: a ROCm GPU (not CUDA) is experimental on V1" in r.stderr
