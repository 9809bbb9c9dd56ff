"""The speed coefficients' version eras (kvplan/speed/eras.py): which coefficient set a release reads,
which sets are fitted together, and that commands name the set they used and a release outside the corpus."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.releases import release_of
from kvplan.engines import resolve_engine
from kvplan.speed import model as speed
from kvplan.speed.eras import era_of, fitted_with, own_terms, unused_terms
from conftest import speed_cases


@pytest.mark.parametrize("engine,version,date,era", [
    # SGLang: releases before 0.5.14 (sgl-project/sglang tag v0.5.14, 2026-06-26) read the older set
    ("sglang", "0.5.13", None, "sglang<0.5.14"),
    ("sglang", "0.5.13.post1", None, "sglang<0.5.14"),
    ("sglang", "0.4.3", None, "sglang<0.5.14"),
    ("sglang", "0.5.14", None, "sglang"),
    ("sglang", "0.5.14.post1", None, "sglang"),
    ("sglang", "v0.5.16", None, "sglang"),
    ("sglang", "0.6", None, "sglang"),
    # no release stated: the current era, unless the run is dated before 0.5.14 was out
    ("sglang", None, None, "sglang"),
    ("sglang", "main branch (as stated)", None, "sglang"),
    ("sglang", None, "2024-12-14", "sglang<0.5.14"),
    ("sglang", "main branch (as stated)", "2026-06-25", "sglang<0.5.14"),
    ("sglang", None, "2026-06-26", "sglang"),
    ("sglang", "0.5.16", "2024-01-01", "sglang"),  # a stated release wins over the date
    # TensorRT-LLM: before 1.0; its boundary has no date (a dated, unversioned run stays current)
    ("trtllm", "0.17", None, "trtllm<1.0"),
    ("trtllm", "0.17.0rc1", None, "trtllm<1.0"),
    ("trtllm", "1.0", None, "trtllm"),
    ("trtllm", "1.0.0", None, "trtllm"),
    ("trtllm", None, "2024-08-28", "trtllm"),
    ("vllm", "0.4.3", "2024-06-01", "vllm"),  # no vLLM era
])
def test_the_era_a_release_reads(engine, version, date, era):
    assert era_of(engine, version, date) == era


@pytest.mark.parametrize("version,backend,era", [
    # TensorRT-LLM 1.x on TensorRT engines (NVIDIA's MLPerf harness: CoreType.TRTLLM_EXECUTOR) fits its own
    # request and step costs, weights read and expert terms; the PyTorch backend, the default, and a backend left unsaid
    # read the current set
    (None, "tensorrt", "trtllm-engine"),
    ("1.2.0", "TensorRT", "trtllm-engine"),
    (None, "pytorch", "trtllm"),
    (None, None, "trtllm"),
    ("0.17", "tensorrt", "trtllm<1.0"),  # before 1.0 every run is on engines: the older era's own set
])
def test_the_set_a_backend_reads(version, backend, era):
    assert era_of("trtllm", version, None, backend) == era
    assert era_of("llama.cpp", None, None, "CUDA") == "llama.cpp"  # ggml's backend names read no set


def test_a_corpus_backend_is_checked():
    from kvplan.speed.fields import backend_of

    assert backend_of("trtllm", "TensorRT") == "tensorrt" and backend_of("trtllm", None) is None
    assert backend_of("llama.cpp", "Metal") == "metal"
    with pytest.raises(ValueError, match="backend 'engine' is not one of trtllm's: pytorch, tensorrt"):
        backend_of("trtllm", "engine")


@pytest.mark.parametrize("engine,version,date,kind,era", [
    # vLLM driven in the harness's own process (AMD's MLPerf harnesses, `vllm bench throughput`) fits its own
    # request cost; a served run (`vllm serve` + an HTTP client) and a kind left unsaid read the served set
    ("vllm", "0.9.0.2.dev108+g71faa1880.d20250730.rocm641", "2025-09-09", "inprocess", "vllm-inprocess"),
    ("vllm", None, None, "InProcess", "vllm-inprocess"),
    ("vllm", "0.10.0", None, "served", "vllm"),
    ("vllm", "0.10.0", None, None, "vllm"),
    # SGLang: no in-process run in the corpus, so no set of its own; an older release keeps its era's set
    ("sglang", "0.5.16", None, "inprocess", "sglang"),
    ("sglang", "0.5.3", None, "inprocess", "sglang<0.5.14"),
    # TensorRT-LLM: a backend fitted apart wins; no harness set (trtllm-bench in process was tried, not adopted)
    ("trtllm", "1.0", None, "inprocess", "trtllm"),
])
def test_the_set_a_harness_kind_reads(engine, version, date, kind, era):
    assert era_of(engine, version, date, None, kind) == era
    assert era_of("trtllm", "1.2.0", None, "tensorrt", "inprocess") == "trtllm-engine"


def test_a_corpus_harness_kind_is_checked():
    from kvplan.speed.fields import harness_kind_of

    assert harness_kind_of("vllm", "InProcess") == "inprocess" and harness_kind_of("sglang", None) is None
    assert harness_kind_of("trtllm", "served") == "served"
    with pytest.raises(ValueError, match="harness_kind 'offline' is not one of vllm's: served, inprocess"):
        harness_kind_of("vllm", "offline")
    with pytest.raises(ValueError, match="harness_kind 'inprocess' is not one of llama.cpp's: none"):
        harness_kind_of("llama.cpp", "inprocess")


def test_the_corpus_reads_what_ran():
    # Red Hat's MLPerf v5.1 llama3.1-8b harness: Offline through vllm.LLM in process, Server through `vllm serve`
    # and /v1/completions (mlcommons/inference_results_v5.1@965182b0:closed/RedHat/code/llama3.1-8b/README.md);
    # AMD's through vLLM's engine classes in process (closed/AMD/code/llama2-70b-99/harness_llm/backends/vllm)
    from pathlib import Path


    cases, _ = speed_cases()
    era = {(c.source, c.id): c.era for c in cases if c.source == "mlperf-inference-v5.1" and c.engine == "vllm"}
    assert era["mlperf-inference-v5.1", "redhat-xe8640_4xh100_vllm-llama3_1-8b-offline"] == "vllm-inprocess"
    assert era["mlperf-inference-v5.1", "redhat-xe8640_4xh100_vllm-llama3_1-8b-server"] == "vllm"
    # (AMD's Mixtral Offline config keeps CUDA graphs, enforce_eager: False; its Llama-2 runs are eager and skipped)
    assert era["mlperf-inference-v5.1", "amd-8xmi300x_2xepyc_9575f-mixtral-8x7b-offline"] == "vllm-inprocess"


def test_release_numbers():
    assert release_of("v0.5.14.post1") == (0, 5, 14) and release_of("1.0") == (1, 0)
    assert release_of("nightly-dev") is None
    assert release_of("b5062") is None and release_of(None) is None  # llama.cpp's build names are not releases


@pytest.mark.parametrize("version,read", [
    # PEP 440 puts X.Y.Z.devN and X.Y.ZrcN.devM below X.Y.Z; setuptools-scm's guess-next-dev names a build after the
    # release it leads to, so the speed layer reads it as the release before, as kvplan.engines.versions does
    # (kvplan.core.releases): the corpus's AccelMark RTX 5090 build, dstack's ROCm builds, the MI100 build
    ("0.19.1rc1.dev339+gedc364896", (0, 19, 0)),
    ("0.7.3.dev138+g21f6ca217", (0, 7, 2)),
    ("0.6.3.dev116+g151ef4ef", (0, 6, 2)),
    ("0.11.1rc2.dev323", (0, 11, 0)),
    ("0.15.0rc2.dev46", (0, 14, 999)),  # below 0.15.0, above every 0.14.z
    # a ".postN.devM" build follows X.Y.Z; a release candidate keeps its release (TensorRT-LLM cuts 1.0's rcs from
    # the 1.0 line: ERAS' comment), as does a local build
    ("0.6.3.post2.dev308+gb489fc3c", (0, 6, 3)),
    ("1.0.0rc3", (1, 0, 0)),
    ("0.4.3+rocm614", (0, 4, 3)),
])
def test_a_development_build_is_read_as_the_engines_read_it(version, read):
    from kvplan.engines.versions import parse_version

    assert release_of(version) == parse_version(version) == read


def test_a_development_build_of_an_era_boundary_reads_the_older_era():
    # 0.5.14.dev5 is a commit on the way to 0.5.14 (PEP 440: below it), so it reads SGLang's older set; 0.5.14rc1 is
    # read as its release (a release candidate keeps its number)
    assert era_of("sglang", "0.5.14.dev5+g1234") == "sglang<0.5.14"
    assert era_of("sglang", "0.5.14") == era_of("sglang", "0.5.14rc1") == "sglang"
    assert era_of("trtllm", "1.0.0.dev2") == "trtllm<1.0"


def test_which_sets_are_fitted_together():
    # SGLang's older era shares every term with the current one but the expert terms and the per-layer step cost;
    # TensorRT-LLM's has its own set
    assert fitted_with("sglang") == fitted_with("sglang<0.5.14") == {"sglang", "sglang<0.5.14"}
    assert fitted_with("trtllm<1.0") == {"trtllm<1.0"}
    # TensorRT-LLM's engine backend shares all but its request cost, its host cost a layer of a step, its weights read
    # and its expert terms with the PyTorch backend's set
    assert fitted_with("trtllm") == fitted_with("trtllm-engine") == {"trtllm", "trtllm-engine"}
    # vLLM in process shares all but its request cost with the served set
    assert fitted_with("vllm") == fitted_with("vllm-inprocess") == {"vllm", "vllm-inprocess"}
    assert own_terms("sglang<0.5.14") == ("experts", "grouped", "layer") and own_terms("trtllm<1.0") is None
    assert own_terms("trtllm-engine") == ("request", "layer", "weights", "experts", "grouped")
    assert own_terms("vllm-inprocess") == ("request",)


def test_the_shipped_eras_share_what_they_should():
    sets = speed.shipped()["engines"]
    old, new = sets["sglang<0.5.14"]["coefficients"], sets["sglang"]["coefficients"]
    assert {t for t in old if old[t] != new[t]} <= {"experts", "grouped", "layer"}
    assert old["grouped"] != new["grouped"]  # the expert terms were fitted apart
    assert old["layer"] > new["layer"]  # releases before 0.5.14 pay more per layer a step (small batches priced slow)
    engine, torch = sets["trtllm-engine"]["coefficients"], sets["trtllm"]["coefficients"]
    # ... and the PyTorch backend's eager prefill step, which the engine's set does not fit (eras.ENGINE_TERMS)
    own = {"request", "layer", "weights", "experts", "grouped", "player", "pmoe"}
    assert {t for t in engine if engine[t] != torch[t]} <= own
    assert engine["step"] == torch["step"]  # the flat cost a step is shared; the engines' own is per layer
    # (the PyTorch backend's `player` is fitted, and came out 0 once its overlap scheduler's fetch lag was priced)
    assert engine["player"] == 0 <= torch["player"] and engine["pstep"] == torch["pstep"] == 0
    assert engine["pmoe"] == 0 < torch["pmoe"]  # and per MoE layer of that eager step
    assert engine["grouped"] != torch["grouped"]  # the engines' MoE (MLPerf's Mixtral, DeepSeek-R1) fitted apart
    assert engine["request"] < torch["request"]  # the C++ executor's requests cost the step loop less
    inproc, served = sets["vllm-inprocess"]["coefficients"], sets["vllm"]["coefficients"]
    assert {t for t in inproc if inproc[t] != served[t]} == {"request"}


def test_an_engine_release_picks_its_set():
    assert resolve_engine("sglang", "0.5.3").speed_key == "sglang<0.5.14"
    assert resolve_engine("sglang").speed_key == "sglang"
    assert resolve_engine("vllm", "0.11.0").speed_key == "vllm"


def test_simulate_names_the_era_and_a_release_past_the_corpus(kvplan_home):
    base = ["simulate", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "2", "--duration", "2",
            "--engine", "sglang"]
    r = CliRunner().invoke(app, [*base, "--engine-version", "0.5.3"])
    assert r.exit_code == 0, r.output
    assert "step times: calibrated (sglang<0.5.14 coefficients" in r.stderr
    newest = speed.shipped()["coverage"]["releases"]["sglang"][1]
    assert newest == "0.5.19"  # the newest SGLang release a training point states (InferenceX#3311, #3318)
    r = CliRunner().invoke(app, [*base, "--engine-version", "0.5.20"])
    assert r.exit_code == 0, r.output
    assert "step times: calibrated (sglang coefficients" in r.stderr
    assert "sglang 0.5.20 is newer than the newest release in the speed corpus (0.5.19)" in r.stderr
    r = CliRunner().invoke(app, base)  # no release named: the current era, nothing said about releases
    assert r.exit_code == 0, r.output
    assert "step times: calibrated (sglang coefficients" in r.stderr and "release in the speed corpus" not in r.stderr


def test_a_release_before_the_corpus_says_so():
    from kvplan.speed.coverage import outside

    oldest = speed.shipped()["coverage"]["releases"]["sglang"][0]
    # dstack-benchmarks-deepseek-r1-h200-mi300x's MI300X runs ("sglang: 0.4.2.post4"), the oldest stated SGLang
    # release that trains (lmsys-blog-2025-08-27-gpt-oss's 0.5.1 before that source)
    assert oldest == "0.4.2"
    assert outside("sglang<0.5.14", "h100-sxm", "llama", "0.4.0") == [
        "sglang 0.4.0 is older than the oldest release in the speed corpus (0.4.2): sglang<0.5.14's coefficients, "
        "extrapolated"]
    assert outside("sglang", "h100-sxm", "llama", "0.5.14") == []


def test_a_term_only_some_engines_fit():
    # a fixed cost per prefill batch: SGLang's sets (every era) fit it; TensorRT-LLM's PyTorch backend (its current
    # era's set alone), whose steps with a context request run eagerly, no CUDA graph
    # (NVIDIA/TensorRT-LLM@034fffb0900632b2aefdec1ce9a5b5cbe63d22ba:tensorrt_llm/_torch/pyexecutor/scheduler.py,
    # ScheduledRequests.can_run_cuda_graph), fits that step's cost per layer instead; the TensorRT-engine sets and
    # every other engine's leave both out
    for key in ("sglang", "sglang<0.5.14"):
        assert unused_terms(key) == frozenset({"player"}), key
    assert unused_terms("trtllm") == frozenset({"pstep"})
    # a cost per MoE layer of a prefill step: the same eager steps, SGLang's and TensorRT-LLM's PyTorch backend's
    for key in ("vllm", "vllm-inprocess", "trtllm<1.0", "trtllm-engine"):
        assert unused_terms(key) == frozenset({"pstep", "player", "pmoe"}), key


def test_llamacpp_leaves_grouped_to_experts():
    # ggml's MoE matmul reads each touched expert's tiles once for its tokens (ggml_cuda_mul_mat_id: MMVQ or MMQ with
    # the ids), a cost per touched expert the `experts` term prices, so llama.cpp's set fits no `grouped` beside it
    # (eras.SAME_AS); every other engine's sets keep it
    assert unused_terms("llama.cpp") == frozenset({"pstep", "player", "pmoe", "grouped"})
    for key in ("vllm", "sglang", "sglang<0.5.14", "trtllm", "trtllm-engine"):
        assert "grouped" not in unused_terms(key), key
