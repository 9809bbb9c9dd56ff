"""The calibrated step time: each term of kvplan.speed.terms times its engine's fitted coefficient.

The coefficients ship in coefficients.json beside this module (one set per engine and version era, keyed
as kvplan.speed.eras names them; the split rule and the fit date), the held-out error bands apart in bands.json
(so that a diff of two fits' coefficients shows no held-out figure); `python -m kvplan.bench.ship` writes both. An
engine the corpus does not cover reads vLLM's set, and says
so (`covered`).

Public: `step_seconds`, `prefill_seconds`, `decode_seconds` (seconds of one engine step or one
request's prefill on a Shape), `coefficients(engine)`, `band(engine, metric)` (the held-out error
band a figure is labelled with).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from kvplan.core.errors import EXIT_ERROR, KvplanError
from kvplan.hardware.facts import vendor_of
from kvplan.speed.eras import engine_of
from kvplan.speed.allreduce import measured_allreduce
from kvplan.speed.mlaform import absorbs_with_prefix
from kvplan.speed.amd_allreduce import amd_custom_bytes, runs_custom_allreduce_on_amd
from kvplan.speed.symm_allreduce import SYMM_MEM_ENGINES, one_kernel_bytes
from kvplan.speed.terms import (ACT_BYTES, TERMS, Shape, bound, capped_pair_seconds, features, gemm_seconds,
                                measured_tp, moves_tokens, path_at, prefill_width, replays_graph, roofline,
                                roofline_of)

DATA = Path(__file__).with_name("coefficients.json")
BANDS = Path(__file__).with_name("bands.json")  # each set's held-out error per metric, apart from its coefficients
FALLBACK_ENGINE = "vllm"
PREFILL_CHUNK = 8192  # tokens a prefill step takes (vLLM's default max_num_batched_tokens)
# kvplan's own rules plan with vLLM's scheduler (kvplan.simulator): they read vLLM's coefficients as covered
ENGINE_ALIASES = {"neutral": "vllm", "kvplan": "vllm", "llamacpp": "llama.cpp", "llama-cpp": "llama.cpp",
                  "tensorrt-llm": "trtllm"}
# engines whose weight GEMMs run a kernel family the speed terms model by batch (kvplan.speed.ggml's "ggml")
GEMM_KERNELS = {"llama.cpp": "ggml"}
# engines whose MLA prefill attends in the absorbed latent form, as their decode does (kvplan.speed.shape.on_gpu):
# llama.cpp's deepseek2 graph with an MLA cache absorbs wk_b into q_nope for every batch, prefill included
# ("MLA with the absorption optimization converts into MQA", ggml-org/llama.cpp@07bede6a:src/models/deepseek2.cpp).
# Every other engine decompresses K and V for prefill (kvplan.speed.shape.attention_flops)
MLA_PREFILL = {"llama.cpp": "absorbed"}
# engines whose tensor-parallel all-reduce is the kernel a profile's measured table (`interconnect.allreduce_us`)
# timed: the bundled tables are aiconfigurator's runs of TensorRT-LLM's AllReduce (strategy AUTO: its one-shot and
# two-shot kernels, NCCL past them), so only TensorRT-LLM reads them; every other engine's all-reduces keep the ring
# (kvplan.speed.allreduce.link). Training CV: every engine reading them 22.44% all figures (vLLM 24.72 -> 26.95%),
# TensorRT-LLM alone 21.97% (docs/speed-history.md)
MEASURED_ALLREDUCE = ("trtllm",)
# engines whose tensor-parallel all-reduce among the GPUs of one fully connected fabric is a one-kernel custom
# all-reduce below a message size, NCCL's ring at or past it: {engine: {world size: the first message size in bytes
# that goes to NCCL}}. Every rank reads its peers at once behind one barrier, so a call's latency does not grow with
# the ranks as NCCL's ring's 2(n - 1) hops do (TensorRT-LLM's kernel, timed in the H100 profile's table: 2.77 / 3.02
# / 3.41 us at 2 / 4 / 8 GPUs, where the ring model gives 7.8 / 10.2 / 15.0). Priced at
# kvplan.speed.allreduce.fabric_latency (0 on PCIe and networks, which keep the ring); the `latency` coefficient fits
# its scale. vLLM's CustomAllreduce: world sizes [2, 4, 6, 8], max_size 8,192 x 1,024 B, `should_custom_ar` takes a
# message below it where the ranks are fully connected (refused on more than two PCIe-only GPUs;
# vllm-project/vllm@00d618aa:vllm/distributed/device_communicators/custom_all_reduce.py), one-shot below 512 KiB at
# <= 4 GPUs and 256 KiB at <= 8, two-shot above (csrc/custom_all_reduce.cuh `REDUCE_CASE`).
# SGLang's CustomAllreduce is vLLM's ("Adapted from" vLLM v0.6.4.post1) and on by default (`disable_custom_all_reduce:
# bool = False` in server_args.py of the 0.4.6.post5 and 0.5.9 wheels, read 2026-12-06): world sizes [2, 4, 6, 8],
# `_MAX_CAR_SIZE = 8192 * 1024` (on ROCm, kvplan.speed.amd_allreduce), off on more than two GPUs not all linked
# (`is_full_nvlink`); `should_custom_ar` takes `inp_size < max_size` in 0.4.6.post5, `<=` in 0.5.9 (one size apart,
# not modelled); GroupCoordinator.all_reduce tries it before quick all-reduce, MSCCL++ and symmetric memory (off by
# default) and NCCL (sglang/srt/distributed/parallel_state.py). Its FlashInfer all-reduce + RMSNorm fusion (on by
# default on SM90 / SM100 for DeepSeek-V3, gpt-oss, GLM-4 MoE and Qwen3-MoE without DP attention, server_args.py
# `enable_flashinfer_allreduce_fusion`) is TensorRT-LLM's one-shot kernel, one barrier a call too.
# TensorRT-LLM's AllReduce, strategy AUTO: NCCL without P2P or NVLink between the ranks or past the workspace,
# 16,000,000 B at <= 2 ranks and 8,000,000 B above (NVIDIA/TensorRT-LLM@005b299bd30992a58607c7628bb2009264970f37:
# cpp/tensorrt_llm/common/customAllReduceUtils.h `getMaxRequiredWorkspaceSize`, `message_size_bytes >
# max_workspace_size` to NCCL); below it the PyTorch backend's table picks ONESHOT (4) or TWOSHOT (5) for every
# decode size at tp 2 / 4 / 8 (same file, `AllReduceBestStrategyTableSM90` / `SM100`; @01e2c361:cpp/tensorrt_llm/thop/
# allreduceOp.cpp `ifFallbackToNCCL`, `selectStrategyLookUpTable`), and a TensorRT engine's plugin ONESHOT (below
# 1 MB at <= 4 ranks, 500 kB above; NCCL or two-shot past them by release) for an even group of at most
# MAX_RANKS_PER_NODE (@005b299b:cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp `selectImplementation`,
# `isCustomAllReduceSupported`). Where the profile has TensorRT-LLM's measured table (MEASURED_ALLREDUCE) that table
# prices the calls instead (kvplan.speed.terms.measured_tp)
CUSTOM_ALLREDUCE = {"vllm": dict.fromkeys((2, 4, 6, 8), 8192 * 1024),
                    "sglang": dict.fromkeys((2, 4, 6, 8), 8192 * 1024),
                    "trtllm": {2: 16_000_001, 4: 8_000_001, 6: 8_000_001, 8: 8_000_001}}
# On an AMD GPU: which GPUs and releases run the custom kernel at all (vLLM: gfx94x from 0.8.3, gfx95x from
# 0.9.0; AMD's fork builds) and its size limit there (SGLang: 16 MiB, aiter's 64 MiB from 0.5.6):
# kvplan.speed.amd_allreduce


@lru_cache(maxsize=1)
def shipped() -> dict:
    """coefficients.json as a dict, read once. It ships in the wheel (pyproject's package-data): missing, the
    install is broken, and every speed figure would silently fall back to the roofline; refused instead."""
    try:
        return json.loads(DATA.read_text())
    except FileNotFoundError:
        raise KvplanError(f"kvplan's speed coefficients ({DATA}) are missing: this install is incomplete; "
                          "reinstall kvplan", EXIT_ERROR) from None


def engine_key(engine: str | None) -> str:
    name = (engine or FALLBACK_ENGINE).lower()
    return ENGINE_ALIASES.get(name, name)


def rules_key(engine: str | None) -> str:
    """The engine whose kernel rules a coefficient set's name reads: an older era's set is its engine's
    ("sglang<0.5.14" -> "sglang", kvplan.speed.eras.engine_of), so a plan priced with an era's coefficients
    (Engine.speed_key) takes the engine's rules at its release, as the corpus fit does (it shapes each run under its
    engine's name and release: kvplan.speed.fit.Built)."""
    return engine_of(engine_key(engine))


def gemm_kernels(engine: str | None) -> str | None:
    """The kernel family an engine's weight GEMMs run (GEMM_KERNELS), None for none modelled or no engine."""
    return GEMM_KERNELS.get(rules_key(engine)) if engine else None


def absorbed_prefill(engine: str | None, version: str | None = None, prefix_cache: bool = False, gpu=None,
                     heads_per_rank: int = 0, backend: str | None = None, architecture: str | None = None) -> bool:
    """Whether the engine's MLA prefill runs in the absorbed latent form: always (MLA_PREFILL); with its
    `prefix_cache` on, where the prompts share a cached prefix, at a release `version` (None: the current one) whose
    attention backend on `gpu` (the run's `backend`, else the release's default for `heads_per_rank` heads a rank and
    the model's `architecture`) attends so (kvplan.speed.mlaform); kvplan's own rules (no engine) read vLLM's, which
    decompresses."""
    key = rules_key(engine)
    if MLA_PREFILL.get(key) == "absorbed":
        return True
    return prefix_cache and bool(absorbs_with_prefix(key, version, gpu, heads_per_rank, backend, architecture))


def measured_allreduce_kernel(engine: str | None) -> bool:
    """Whether the engine's tensor-parallel all-reduces run the kernel the profiles' tables measured
    (MEASURED_ALLREDUCE); kvplan's own rules (no engine) read vLLM's, which does not."""
    return rules_key(engine) in MEASURED_ALLREDUCE if engine else False


def custom_allreduce_bytes(engine: str | None, tp: int, gpu=None, version: str | None = None, custom=True,
                           dtype: str = "bf16") -> int:
    """The message size from which the engine's all-reduce among `tp` GPUs of `gpu` (a profile; None: an NVIDIA part)
    leaves its custom kernel for NCCL (CUSTOM_ALLREDUCE; on an AMD profile amd_custom_bytes), 0 where it has none
    for that many, or none on that AMD GPU at its release `version` (None: the current one; kvplan.speed.amd_allreduce);
    vLLM's symmetric-memory all-reduce's limit past it from 0.11.0 for `dtype` (the 16-bit dtype the run computes in)
    bf16, built whether or not the custom kernel is (`custom` False: the run turned it off), which shrinks the kernel's
    own limit (kvplan.speed.symm_allreduce); kvplan's own rules (no engine) read vLLM's."""
    key = rules_key(engine)
    limit = CUSTOM_ALLREDUCE.get(key, {}).get(tp, 0) if custom else 0
    if limit and vendor_of(gpu) == "AMD":
        return amd_custom_bytes(key, version, limit) if runs_custom_allreduce_on_amd(key, version, gpu, tp) else 0
    return one_kernel_bytes(limit, tp, gpu, version, dtype) if key in SYMM_MEM_ENGINES else limit


# A run's flags that turn the engine's custom all-reduce off, NCCL's past what it tries next (vLLM's symmetric memory
# from 0.11.0: custom_allreduce_bytes' `custom`): {flag: the values that do}. vLLM's and SGLang's
# `--disable-custom-all-reduce` (no CustomAllreduce: sglang 0.5.9 parallel_state.py `use_custom_allreduce`);
# TensorRT-LLM's `allreduce_strategy` NCCL or NCCL_SYMMETRIC (AllreduceOp returns the stated strategy for them:
# @01e2c361 thop/allreduceOp.cpp), where the profile's measured table (strategy AUTO) does not apply either
NCCL_FLAGS = {"disable_custom_all_reduce": ("true", "1", "yes"), "allreduce_strategy": ("nccl", "nccl_symmetric")}


def nccl_only(flags: dict | None) -> bool:
    """Whether a run's stated flags (NCCL_FLAGS) leave its tensor-parallel all-reduces to NCCL's ring."""
    return any(str((flags or {}).get(f, "")).strip().lower() in on for f, on in NCCL_FLAGS.items())


def covered(engine: str | None) -> bool:
    """Whether the corpus fitted a coefficient set for this engine."""
    return engine_key(engine) in shipped().get("engines", {})


def coefficients(engine: str | None) -> tuple[float, ...]:
    """The engine's coefficients in TERMS order (vLLM's where the engine has none)."""
    sets = shipped().get("engines", {})
    entry = sets.get(engine_key(engine)) or sets.get(FALLBACK_ENGINE)
    if not entry:
        return ()
    return tuple(float(entry["coefficients"][t]) for t in TERMS)


@lru_cache(maxsize=1)
def shipped_bands() -> dict:
    """bands.json as a dict, read once: {"engines": {set: {metric: band}}}, written by kvplan.bench.ship beside
    coefficients.json. Missing, the install is broken (every calibrated figure is labelled with its band)."""
    try:
        return json.loads(BANDS.read_text())
    except FileNotFoundError:
        raise KvplanError(f"kvplan's speed error bands ({BANDS}) are missing: this install is incomplete; "
                          "reinstall kvplan", EXIT_ERROR) from None


def band(engine: str | None, metric: str) -> dict | None:
    """The held-out error of `metric` for this engine ({median_abs, within_20, optimistic_20, n}) or None."""
    return (shipped_bands().get("engines", {}).get(engine_key(engine)) or {}).get(metric)


def priced(coef, f) -> float:
    return sum(c * v for c, v in zip(coef, f))


def step_seconds(shape: Shape, engine: str | None, tokens: float, seqs: float, context: float, pairs: float,
                 *, steps: float = 1.0, request: float = 0.0, speed: str = "calibrated", prefill_pairs: float = 0.0,
                 prefill_context: float = 0.0) -> float:
    """One engine step: `tokens` scheduled tokens of `seqs` sequences reading `context` cached tokens and
    forming `pairs` query-key pairs (`prefill_pairs` of them by prefill queries, whose sequences held
    `prefill_context` cached tokens). speed="roofline": the old lower bound."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    if not coef:
        return roofline(shape, tokens, seqs, context, pairs, steps, prefill_pairs=prefill_pairs,
                        prefill_context=prefill_context)
    return priced(coef, features(shape, tokens, seqs, context, pairs, steps=steps, request=request,
                                 prefill_pairs=prefill_pairs, prefill_context=prefill_context))


def prefill_features(shape: Shape, isl: float, depth: float = 0.0, chunk: int = PREFILL_CHUNK,
                     request: float = 1.0, batch: float = 1.0) -> list[float]:
    """The prefill of `batch` requests of `isl` tokens each after `depth` cached ones, together in
    steps of `chunk` tokens, each a prefill batch; `request`: the fixed cost of each request counted (1) or not (0).
    Every pair a prefill query's; the cached tokens its steps attend to: a request in n = ceil(isl / chunk) chunks
    has depth + j x isl / n cached at its j-th, n x depth + isl x (n - 1) / 2 over its chunks. Each chunk's attention
    reads those cached tokens again, and half its own: the KV read is n x (depth + isl / 2) a request, a window's at
    most a window a chunk (llama.cpp's micro-batches, one graph each over the cache's first n_kv cells:
    docs/speed.md, "The cache read a micro-batch"). The LM head runs for the last position of each of a request's n
    chunks (kvplan.speed.terms.head_rows), not for its every token."""
    steps = max(1, math.ceil(batch * isl / chunk))
    pairs, n = batch * isl * (depth + (isl + 1) / 2), max(1, math.ceil(isl / chunk))
    rows, before = packed_rows(batch, isl, chunk, steps), batch * (n * depth + isl * (n - 1) / 2)
    return features(shape, batch * isl, batch, before + batch * isl / 2, pairs, steps=steps, request=request * batch,
                    prefill_steps=steps, prefill_pairs=pairs, prefill_context=before, sampled=rows, seq_steps=rows)


def packed_rows(batch: float, isl: float, chunk: int, steps: int) -> float:
    """Sequences scheduled, summed over the `steps` steps of `chunk` tokens that `batch` prompts of `isl` tokens fill
    one after another (each engine's chunked prefill takes waiting prompts in order and splits the one that overflows
    the step's token budget: vLLM's scheduler, SGLang's PrefillAdder, TensorRT-LLM's capacity scheduler): every prompt
    once, and once more for each step boundary that falls inside a prompt, batch + steps - 1 less the boundaries at a
    prompt's end (multiples of lcm(isl, chunk) below batch x isl); the LM head computes one row for each
    (kvplan.speed.terms.head_rows), the `seq` term counts each."""
    if steps <= 1:
        return batch
    aligned = 0
    if float(isl).is_integer() and float(batch).is_integer() and isl > 0:
        aligned = (int(batch * isl) - 1) // math.lcm(int(isl), int(chunk))
    return min(batch * steps, batch + steps - 1 - aligned)


def decode_features(shape: Shape, batch: float, context: float) -> list[float]:
    """One decode step of `batch` sequences, each with `context` cached tokens."""
    return features(shape, batch, batch, batch * context, batch * (context + 1))


def prefill_seconds(shape: Shape, engine: str | None, isl: int, *, depth: int = 0,
                    speed: str = "calibrated") -> float:
    """Seconds one request's prefill of `isl` prompt tokens takes (its fixed cost per request included)."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    if not coef:
        return roofline_of(prefill_features(bound(shape), isl, depth))  # the bound knows no engine's kernels
    return priced(coef, prefill_features(shape, isl, depth))


def decode_seconds(shape: Shape, engine: str | None, batch: int, context: int, *, speed: str = "calibrated") -> float:
    """Seconds one decode step of `batch` sequences of `context` cached tokens each takes."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    if not coef:
        return roofline(shape, batch, batch, batch * context, batch * (context + 1))
    return priced(coef, decode_features(shape, batch, context))


class StepModel:
    """The calibrated step of one deployment as a simulator calls it, thousands of times a second: the
    terms folded into a linear form in tokens, sequences, context, pairs (decode and prefill apart), a prefill's
    cached context and new requests, plus the
    experts a step's tokens touch (cached by token count) and the windows of bounded layers. Equal to
    `priced(coefficients, features(...))` (tests/test_speed.py)."""

    def __init__(self, shape: Shape, coef: tuple):
        s, c = shape, dict(zip(TERMS, coef))
        if s.score_bytes_per_flop:  # only a corpus run's Shape (kvplan.speed.fit.Built) carries them
            raise ValueError("StepModel does not fold llama.cpp's materialized attention scores")
        self.shape, self.coef = s, tuple(coef)
        self.measured = measured_tp(s)  # the tp all-reduces by bytes
        tp_calls = 2 * s.layers if s.tp > 1 and not self.measured else 0
        calls = tp_calls + (2 * s.moe_layers if moves_tokens(s) else 0)
        self.base = (c["weights"] * s.dense_bytes / s.bandwidth + (0.0 if s.host_overlap else c["step"])  # as features
                     + c["latency"] * calls * s.link_latency_s)
        self.launch = c["layer"] * s.layers  # a step's layers launched from the host, unless it replays a graph
        # the engine's custom all-reduce: a step below its size limit pays its latency in place of the ring's
        self.oneshot = (c["latency"] * tp_calls * (s.oneshot_latency_s - s.link_latency_s) if s.oneshot_latency_s
                        else 0.0)
        self.oneshot_tokens = s.oneshot_max_bytes / (s.hidden * ACT_BYTES) if self.oneshot and s.hidden else 0.0
        comm = 0.0
        if s.tp > 1 and not s.fused_allreduce and not self.measured:  # as features: a fused all-reduce pays its calls
            comm += 2 * s.layers * 2 * (s.tp - 1) / s.tp * s.hidden * ACT_BYTES / s.link_bandwidth
        if moves_tokens(s):
            comm += 2 * s.moe_layers * (s.ep - 1) / s.ep * s.top_k * s.hidden * ACT_BYTES / s.link_bandwidth
        gemm = c["gemm"] * gemm_seconds(s, 1.0, 0.0, s.gemm_rate) if not s.paths else 0.0  # paths: by step
        head = c["gemm"] * gemm_seconds(s, 0.0, 0.0, s.gemm_rate, 1.0) if not s.paths else 0.0  # a sequence's logits
        self.per_token = gemm + c["comm"] * comm + c["measured"] * s.measured_s_per_token  # a timed kernel's
        self.per_seq = c["seq"] + c["kv"] * 2 * s.state_bytes_per_seq / s.bandwidth + head
        self.per_ctx = c["kv"] * s.kv_bytes_per_token / s.bandwidth
        self.per_pair = c["attn"] * s.attn_flops_per_pair / s.bf16_rate if s.bf16_rate else 0.0
        # a prefill pair's cost beyond a decode pair's (negative where MLA's prefill runs decompressed, narrower)
        self.per_prefill_pair = (c["attn"] * prefill_width(s) / (s.prefill_attn_rate or s.bf16_rate) - self.per_pair
                                 if s.bf16_rate else 0.0)
        self.per_new = c["request"]
        # a step that carries prompt tokens (more tokens than sequences): its batch's cost and its eager layers'
        self.per_prefill = c["pstep"] + c["player"] * s.layers + (0.0 if s.prefill_graph else c["pmoe"] * s.moe_layers)
        self.windows = tuple((c["kv"] * bpt / s.bandwidth, w) for bpt, w in s.kv_windows)
        self.topk = tuple((c["kv"] * bpt / s.bandwidth, k) for bpt, k in s.kv_topk)
        self.pair_topk = tuple((c["attn"] * f, k) for f, k in s.attn_topk) if s.bf16_rate else ()  # FLOPs, k
        self._c = c
        self._experts: dict = {}
        self._allreduce: dict = {}

    def allreduce(self, tokens: float) -> float:
        """A step's measured tensor-parallel all-reduces (features' comm term for them), cached by token count."""
        hit = self._allreduce.get(tokens)
        if hit is None:
            s = self.shape
            hit = self._allreduce[tokens] = (self._c["comm"] * 2 * s.layers
                                             * measured_allreduce(s.allreduce, tokens * s.hidden * ACT_BYTES))
        return hit

    def launches(self, tokens: float, seqs: float = 0.0, context: float = 0.0) -> float:
        """The `layer` term of a step of `tokens` (of `seqs` sequences holding `context` cached tokens): none where it
        replays a graph (terms.replays_graph, as features)."""
        return 0.0 if replays_graph(self.shape, tokens, seqs, context) else self.launch

    def experts(self, tokens: float) -> float:
        hit = self._experts.get(tokens)
        if hit is None:
            f = features(self.shape, tokens, 1, 0, 0)
            hit = self._experts[tokens] = (self._c["experts"] * f[TERMS.index("experts")]
                                           + self._c["grouped"] * f[TERMS.index("grouped")])
        return hit

    def path(self, tokens: float, seqs: float) -> float:
        """The GEMM (the LM head's for `seqs` sequences) and any dequantized copy of a step of `tokens` on a Shape with
        `paths` (llama.cpp's kernels)."""
        rate, extra = path_at(self.shape, tokens)
        return (self._c["gemm"] * gemm_seconds(self.shape, tokens, 0.0, rate, seqs)
                + self._c["weights"] * extra / self.shape.bandwidth)

    def step(self, tokens: float, seqs: float, context: float, pairs: float, new: float = 0, *,
             prefill_pairs: float = 0.0, prefill_context: float = 0.0) -> float:
        t = (self.base + self.launches(tokens, seqs, context) + self.per_token * tokens + self.per_seq * seqs
             + self.per_ctx * context + self.per_pair * pairs + self.per_prefill_pair * prefill_pairs
             + self.per_new * new)
        if prefill_context and self.shape.decompress_flops:
            rate = path_at(self.shape, tokens)[0]  # the Shape's GEMM rate, or its path's at this many tokens
            t += self._c["gemm"] * gemm_seconds(self.shape, 0.0, prefill_context, rate)  # the cached tokens' kv_b_proj
        if tokens > seqs:
            t += self.per_prefill
        if self.shape.paths:
            t += self.path(tokens, seqs)
        for k, w in self.windows:
            t += k * min(context, seqs * w)
        for k, n in self.topk:
            t -= k * max(0.0, context - seqs * n)
        if self.pair_topk:  # at the rate features takes them off (capped_pair_seconds)
            per = capped_pair_seconds(self.shape, pairs, prefill_pairs)
            t -= per * sum(k * max(0.0, pairs - tokens * n) for k, n in self.pair_topk)
        if self.shape.num_experts:
            t += self.experts(tokens)
        if self.measured:
            t += self.allreduce(tokens)
        return t + (self.oneshot if tokens < self.oneshot_tokens else 0.0)

    def decode(self, seqs: int):
        """A function of the cached context: a decode-only step of `seqs` sequences."""
        if self.windows or self.topk or self.pair_topk or self.shape.graph_context:
            return lambda context: self.step(seqs, seqs, context, float(context + seqs))
        fixed = self.base + self.launches(seqs) + (self.per_token + self.per_seq + self.per_pair) * seqs
        if self.shape.paths:
            fixed += self.path(seqs, seqs)
        if self.shape.num_experts:
            fixed += self.experts(seqs)
        if self.measured:
            fixed += self.allreduce(seqs)
        fixed += self.oneshot if seqs < self.oneshot_tokens else 0.0
        slope = self.per_ctx + self.per_pair
        return lambda context: fixed + slope * context


def step_model(shape: Shape, engine: str | None, speed: str = "calibrated") -> StepModel | None:
    """The StepModel of `shape` under `engine`'s coefficients; None for speed="roofline" (or no file)."""
    coef = coefficients(engine) if speed == "calibrated" else ()
    return StepModel(shape, coef) if coef else None
