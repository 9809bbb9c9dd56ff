"""Version eras of the speed coefficients: which coefficient set a measurement (or a prediction) of an
engine at a release belongs to, and which eras are fitted together.

An engine has one coefficient set (keyed by its name: the current era) plus an older era only where the
training corpus shows the engine changed. `ERAS` lists, per engine in ascending order, the first release
of the next era, the older era's key, that release's date (or None) and the terms the older era fits
apart (None: every term; a tuple: those terms only, the rest shared with the engine's current era in one
joint fit). A release at or past an engine's last boundary is the current era; so is a version not
stated or not a release number, unless the measurement's date is before the next era's release (a run
cannot have used a release not yet out). A prediction never has a date: an unstated release is current.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.core.releases import release_of


class Era(NamedTuple):
    first_after: tuple[int, ...]  # the first release of the next era
    key: str  # this (older) era's coefficient set
    released: str | None  # first_after's release date (YYYY-MM-DD), None where a date cannot tell the side
    own: tuple[str, ...] | None  # the terms this era fits apart (None: all of them)


ERAS = {
    # TensorRT-LLM's perf overview re-measured the same models and GPUs for 1.0 (PyTorch backend, the
    # default since 1.0) at about 1.6x the output tokens/s of 0.17 (TensorRT engines) under one set; no
    # date (1.0's release candidates ran on main for months: a source's date does not tell the side). A release
    # candidate reads as its release (kvplan.core.releases; PEP 440 would put 1.0.0rc3 below 1.0): the 1.0 rcs already
    # run the PyTorch backend by default, `from tensorrt_llm import LLM` in the 1.0.0rc2 docs' PyTorch quick start
    # (https://nvidia.github.io/TensorRT-LLM/1.0.0rc2/torch.html) where 0.19.0's imported `tensorrt_llm._torch.LLM`
    # (https://nvidia.github.io/TensorRT-LLM/0.19.0/torch.html); the corpus's 1.0.0rc3 points (aiconfigurator) so read.
    "trtllm": (Era((1, 0), "trtllm<1.0", None, None),),
    # SGLang: in-sample, its MoE TPOT was priced at 1.01x the measurement before 0.5.14 (117 figures) and 2.04x on
    # 0.5.14-0.5.16 (56), dense TPOT 0.85x and 1.25x. v0.5.14 changed the MoE path: release
    # https://github.com/sgl-project/sglang/releases/tag/v0.5.14 (2026-06-26; its notes as a news digest summarised
    # them, the page itself not read: Waterfill and LPLB expert-parallel load balancing, NVFP4 MoE on Blackwell,
    # CuteDSL prefill kernels, MSCCL++ all-reduce). The older era fits the expert terms apart and shares the rest
    # (chosen on the training CV, docs/speed.md "SGLang's version era"), and its cost per layer a step: on the shared
    # one (training CV), its decode figures at 8 sequences or fewer a replica were priced fast (issue 21: 43 of 97
    # optimistic by > 20%, median +13.7% on the fast side) and the current era's at 32 or fewer slow (52 figures,
    # median 11.2% on the slow side); chosen on the training CV too (other terms apart: docs/speed.md).
    "sglang": (Era((0, 5, 14), "sglang<0.5.14", "2026-06-26", ("experts", "grouped", "layer")),),
}


class Backend(NamedTuple):
    name: str  # the backend (or harness kind) as a run states it (the corpus's `backend` or `harness_kind` field)
    key: str  # its coefficient set
    own: tuple[str, ...]  # the terms it fits apart; the rest are shared with the engine's current era


# A backend of the current era whose runs differ in what each request and each step costs the host: TensorRT-LLM 1.x
# runs a model either as a compiled TensorRT engine under the C++ executor or on the PyTorch backend (the default
# since 1.0, and the one kvplan's TensorRT-LLM memory rules restate), whose scheduler, per-request bookkeeping and
# sampling run in Python. NVIDIA's MLPerf harness runs engines (mlcommons/inference_results_v5.1
# @965182b03376a00fcae415c54e560e1c83937932: closed/NVIDIA/code/llama2-70b/tensorrt/__init__.py DEFAULT_CORE_TYPE =
# CoreType.TRTLLM_EXECUTOR, llama3.1-*/mixtral likewise, deepseek-r1 TRTLLM_ENDPOINT, a trtllm-serve endpoint), so its
# request and step costs are fitted apart, the rest jointly (chosen on the training CV, docs/speed.md "TensorRT-LLM's
# two backends"). With InferenceX's served 1.x runs in (issue 21) the shared weights and expert terms followed the
# PyTorch backend's kernels (MLPerf v5.1's engine TPOT priced about twice the measurement): the engine backend now
# fits its weights read and its expert terms (experts, grouped) apart too, the best of the splits tried on the
# training CV (all figures 23.79 -> 23.56%; the engine set's own 142 figures 35.38 -> 37.5%, its three sources too few
# to fit more apart; every split tried in docs/speed-history.md's training-CV table). Its host cost a step is fitted
# per layer (`layer`), not flat (`step`): MLPerf's engine configs run Llama-2-70B, Llama-3.1-405B and Mixtral without
# CUDA graphs (`use_graphs: False`, mlcommons/inference_results_v5.1@965182b0:closed/NVIDIA/configs/B200-SXM-180GBx8/
# Server/llama2-70b.py), so each step launches every layer's kernels, and a flat cost fitted on 80-layer runs
# overprices 32-layer Llama-3.1-8B's steps (issue 21, docs/speed.md "MLPerf's Server runs sit at their capacity";
# chosen on the training CV, all figures 22.84 -> 22.77%). No serving command selects it yet: kvplan plans
# TensorRT-LLM's memory as the PyTorch backend allocates it.
BACKENDS = {
    "trtllm": (Backend("tensorrt", "trtllm-engine", ("request", "layer", "weights", "experts", "grouped")),),
}

# How a run's requests reached the engine (the corpus's `harness_kind`): `served` (the default) through the engine's
# HTTP server (`vllm serve` with `vllm bench serve` / benchmark_serving.py, guidellm, genai-perf), where each request
# crosses the API server's process (HTTP, tokenising, detokenising and, in vLLM V0, the scheduler's own Python
# process), or `inprocess`, the engine driven from the harness's process with token ids (vLLM's `LLM` / `LLMEngine` /
# `AsyncLLMEngine` / `AsyncLLM`: AMD's MLPerf harnesses, Red Hat's MLPerf Offline harness, `vllm bench throughput`,
# benchmark_latency.py). Such a run of the engine's current era, on no backend BACKENDS fits apart, reads its own set
# that fits the terms named apart and shares the rest in one joint fit (chosen on the training CV, docs/speed.md "vLLM
# in process or served"). An older era (ERAS) and a backend fitted apart (BACKENDS) keep their own set whatever the
# harness. SGLang has no in-process run in the corpus, so no set of its own; TensorRT-LLM's trtllm-bench runs as a set
# of their own were tried and not adopted (again once GUARANTEED_NO_EVICT's running cap was read). No serving command
# selects it: kvplan plans served deployments.
HARNESSES = {
    "vllm": (Backend("inprocess", "vllm-inprocess", ("request",)),),
}


# Terms only some coefficient sets fit, per term the engines (every era, backend and harness set of theirs) or the
# single sets (a key of ERAS, BACKENDS or an engine's current era) that fit it; every other set leaves the term out of
# its fit, its coefficient 0, even where it shares its other terms with a set that fits it. `pstep`, a fixed cost per
# prefill batch: SGLang runs its prefill batches apart from its decode batches (--enable-mixed-chunk off by default;
# `get_next_batch_to_run` runs a prefill batch whenever one forms, "Run prefill first if possible", v0.5.9
# scheduler.py L1936), so a wave's admissions pay one batch's scheduling and launches per prefill batch, not per
# request. TensorRT-LLM's PyTorch backend (its current era's set, `trtllm`) replays a CUDA graph only for a batch
# with no context request (NVIDIA/TensorRT-LLM@034fffb0900632b2aefdec1ce9a5b5cbe63d22ba:
# tensorrt_llm/_torch/pyexecutor/scheduler.py, `ScheduledRequests.can_run_cuda_graph`: `not self.context_requests`),
# so a step that carries prompt tokens runs the model eagerly, every kernel launched from Python, and pays that launch
# cost once a step and once a layer (`player`, the step's layers; issue 21: trtllm-serve's TTFT 90-145 ms above the
# prediction at concurrency 4 for DeepSeek-R1's 61 layers, whatever the prompt, while Qwen3-8B's 36 were priced 54%
# slow at a flat cost; the flat `pstep` is not fitted beside it, chosen on the training CV, docs/speed.md
# "TensorRT-LLM's eager prefill step"); its TensorRT-engine runs (`trtllm-engine`) and releases before 1.0
# (`trtllm<1.0`, TensorRT engines) run no such eager pass and leave it out. vLLM puts prefill chunks in the decode
# steps' token budget, where the step's own cost (`step`) prices them. SGLang's sets keep their per-request cost beside
# it (dropping it was
# tried: docs/speed.md, "SGLang's admission and its prefill batches"). `pmoe`, a cost per MoE layer of a prefill step:
# both engines run a step with prompt tokens without a CUDA graph (SGLang: only DECODE, TARGET_VERIFY and IDLE batches
# replay one, sgl-project/sglang@271a25bc88ee9d9ada9b117299f2b9849e597569:python/sglang/srt/model_executor/
# forward_batch_info.py#L102-L109 `ForwardMode.is_cuda_graph`; TensorRT-LLM above), and an MoE block launches far more
# kernels than a dense MLP (gate, top-k, the tokens' sort by expert, activation quantization, two grouped GEMMs, the
# weighted sum), so its host cost rides on each prefill step apart from the layer's (issue 21, docs/speed.md "The MoE
# prefill step"); vLLM's set leaves it out (its prefill chunks share the decode steps, tried: docs/speed-history.md).
ENGINE_TERMS = {"pstep": ("sglang",), "player": ("trtllm",), "pmoe": ("sglang", "trtllm")}
SET_TERMS = frozenset({"trtllm"})  # names in ENGINE_TERMS that are one coefficient set, not every set of an engine


# Terms an engine's sets leave out though every other set fits them, where the engine's kernel makes the term the same
# cost as another one. `grouped` under llama.cpp: ggml's MoE matmul (`ggml_cuda_mul_mat_id`, ggml-org/llama.cpp
# @f6d77a1ba0ac794e950bd3abb630b904bdcd8fb8:ggml/src/ggml-cuda/ggml-cuda.cu) is not a grouped GEMM whose efficiency
# rises with the tokens an expert gets: at <= 8 tokens a micro-batch the vector kernel with the ids
# (`ggml_cuda_mul_mat_vec_q(ctx, src0, src1, ids, dst)`) reads each touched expert's rows once for all of them, and
# past it one MMQ launch over every expert's tokens (`ggml_cuda_mul_mat_q(ctx, src0, src1, ids, dst)`, where
# `ggml_cuda_should_use_mmq` holds) tiles each touched expert's weights with its tokens, so its cost at few tokens an
# expert is a fixed cost per touched expert in proportion to the expert's size: the `experts` term's touched x expert
# bytes (a tile's padded FLOPs, at the int8 MMA rate, not `grouped`'s bf16 one: kvplan.speed.ggml.padded_expert_flops
# in the `gemm` term since round 41). kvplan's `grouped`
# feature is touched x 2 x one expert's parameters / a rate, the same count times a constant of the GPU and weight
# type, so on one GPU and type the two columns are one (issue 21, round 30: DeepSeek-V2-Lite Q4_0 on an RTX 3090,
# llama.cpp#15525's nine points, grouped / experts = 0.02076 at every micro-batch; then the only MoE source) and the
# fit split them at will (grouped 0 or 85.8, experts 2.77 or 1.0, the same training predictions, other GPUs' not).
# Left out, `experts` carries the cost. With a second MoE source on three GPUs (llama.cpp#22298) the fit keeping
# `grouped` (experts 1, grouped 52-86 over the folds) prices llama.cpp's CV 19.50% against 19.77% and the all-figures
# median alike: not adopted (docs/speed-history.md). The sorted fallback (one GEMM per expert, the dequantize + cuBLAS
# parts) has no MoE point in the corpus.
SAME_AS = {"grouped": ("llama.cpp",)}


def unused_terms(key: str) -> frozenset[str]:
    """The terms coefficient set `key` leaves out of its fit: those ENGINE_TERMS gives to other engines or sets only,
    and those SAME_AS leaves out for its engine."""
    engine = engine_of(key)
    return frozenset([t for t, names in ENGINE_TERMS.items()
                      if key not in names and (engine not in names or engine in SET_TERMS)]
                     + [t for t, engines in SAME_AS.items() if engine in engines])


def padded(rel: tuple[int, ...]) -> tuple[int, ...]:
    """(major, minor) as (major, minor, 0), to compare with three-part releases."""
    return rel + (0,) * (3 - len(rel))


def era_of(engine: str, version, date: str | None = None, backend: str | None = None,
           harness_kind: str | None = None) -> str:
    """The coefficient set a measurement of `engine` at `version` (on `date`, YYYY-MM-DD, where known)
    belongs to: the engine's name, an older era's key from ERAS, or, in the current era, the key of the
    `backend` it ran on where BACKENDS fits that backend apart, else of its `harness_kind` where HARNESSES
    fits that kind apart."""
    rel = release_of(version)
    for era in ERAS.get(engine, ()):
        if rel is not None and padded(rel) < padded(era.first_after):
            return era.key
        if rel is None and date and era.released and str(date) < era.released:
            return era.key
    hit = next((b.key for b in BACKENDS.get(engine, ()) if backend and b.name == str(backend).lower()), None)
    return hit or next((h.key for h in HARNESSES.get(engine, ())
                        if harness_kind and h.name == str(harness_kind).lower()), engine)


def _era(key: str) -> tuple[str, Era | Backend] | None:
    for engine, eras in (*ERAS.items(), *BACKENDS.items(), *HARNESSES.items()):
        for era in eras:
            if era.key == key:
                return engine, era
    return None


def engine_of(key: str) -> str:
    """The engine a coefficient set belongs to ("sglang<0.5.14" -> "sglang")."""
    hit = _era(key)
    return hit[0] if hit else key


def own_terms(key: str) -> tuple[str, ...] | None:
    """The terms an older era fits apart from its engine's current era (None: every term, or not an era)."""
    hit = _era(key)
    return hit[1].own if hit else None


def fitted_with(key: str) -> frozenset[str]:
    """The coefficient sets fitted together with `key` (itself; an era sharing terms, with its engine's
    current era and every era that shares with it)."""
    hit = _era(key)
    engine = hit[0] if hit else key
    if hit and hit[1].own is None:
        return frozenset((key,))
    shared = {e.key for e in (*ERAS.get(engine, ()), *BACKENDS.get(engine, ()), *HARNESSES.get(engine, ()))
              if e.own is not None}
    return frozenset({key} | ({engine} | shared if shared else set()))

