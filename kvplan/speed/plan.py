"""A plan's prefill and decode under the calibrated model: what fit shows beside the roofline's, and
what a caller holding a Plan asks (disaggregated prefill/decode pools).

The plan's deployment (tp, ep, and dp where ep > 1: the replicas whose tokens the experts serve), dtypes, batch and
context on the model spec and GPU profile it was
made for (kvplan.speed.shape), priced with the engine's coefficients (kvplan.speed.model): one
decode step of `batch` sequences each holding the full context, the plan's own worst case. The batch is the
deployment's; a step runs the busiest data-parallel rank's share of it (`step_batch`, `dp_step_note`).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import arg
from kvplan.planning.layout import per_rank_batch
from kvplan.speed.corpus import PREFIX_CACHE_OFF
from kvplan.speed.mlaform import ABSORBS_WITH_PREFIX, as_run, default_backend, mla_heads_per_rank
from kvplan.speed.model import StepModel, absorbed_prefill, coefficients, decode_seconds, prefill_seconds, rules_key
from kvplan.speed.shape import attention_flops, model_terms, on_gpu, shape_for
from kvplan.speed.overlap import plan_overlaps
from kvplan.speed.ssm_dtype import in_dtype
from kvplan.speed.terms import Shape


def plan_shape(plan, spec, gpu, engine: str | None = None, version: str | None = None) -> Shape:
    """The Shape (kvplan.speed.terms) of the plan's deployment and dtypes (under llama.cpp, with its current
    build's GEMM paths: kvplan.speed.ggml; an MXFP4 MoE at the precision the engine's kernels multiply in at release
    `version`, None: its current one, kvplan.speed.mxfp4; a rank's MLA heads over the engine's whole tp size where
    the engine's request step said its dp ranks are attention-DP ranks, Request.attention_dp; an MLA prefill's form
    through the attention backend and prefix-cache state the engine's options set, Request.attention_backend and
    Request.prefix_cache, as the corpus fit reads a run's flags: kvplan.speed.fit.Built; its prefill steps replayed
    from a CUDA graph where the request step said so, Request.prefill_graph; its host work overlapped by its release,
    stages and options, kvplan.speed.overlap.plan_overlaps)."""
    req, dep = plan.request, plan.deployment
    kv = req.kv_dtype.name if req.kv_dtype is not None else None
    spec = in_dtype(spec, req.ssm_dtype)  # the recurrent states as the engine's pool holds them
    return shape_for(spec, gpu, tp=dep.tp, ep=dep.ep, weight_dtype=req.weight_dtype, kv_dtype=kv, dp=dep.dp,
                     engine=engine, version=version, attention_dp=req.attention_dp, prefix_cache=req.prefix_cache,
                     attention_backend=req.attention_backend or None, prefill_graph=req.prefill_graph,
                     host_overlap=plan_overlaps(engine, version, req.host_overlap, dep.pp))


def step_batch(plan) -> int:
    """The sequences one decode step of the plan runs on a rank: its batch (the deployment's) over its dp ranks, the
    busiest rank's share (kvplan.planning.layout.per_rank_batch, as the plan's memory counts it). Data-parallel
    ranks each step their own sequences; where they are one engine's around a MoE they step together and each step
    lasts as long as the busiest rank's (dp_step_note), whose count the others are padded to."""
    return per_rank_batch(max(1, plan.request.batch), plan.deployment.dp)


def plan_decode_seconds(plan, spec, gpu, engine: str | None, speed: str = "calibrated", *,
                        batch: int | None = None, context: int | None = None, version: str | None = None) -> float:
    """Seconds of one decode step of `batch` sequences a rank of `context` cached tokens each (default: the
    plan's batch at its context, the busiest data-parallel rank's share: step_batch; `version`: the engine's
    release, as plan_shape)."""
    req = plan.request
    return decode_seconds(plan_shape(plan, spec, gpu, engine, version), engine, batch or step_batch(plan),
                          context or req.context, speed=speed)


# What a plan's step assumes of its data-parallel ranks around a MoE (Shape.ep_replicas: experts over tp x dp with
# expert parallelism). vLLM runs a MoE model's DP ranks as DPEngineCoreProc (a dense model's as independent engines,
# "Non-MoE DP ranks are completely independent"): every step all-reduces the ranks' token counts and, under CUDA
# graphs, pads every rank to the largest; a rank with nothing scheduled runs a dummy batch (vllm 0.25.0 wheel
# `v1/engine/core.py` L1189-1200, `run_busy_loop` L1925-1961; `v1/worker/dp_utils.py` `_synchronize_dp_ranks`
# L101-160, `_post_process_dp_padding` L77-89; `v1/worker/gpu_worker.py` `execute_dummy_batch` L1101-1103). SGLang's
# DP-attention workers likewise exchange their batches before every forward and run an idle batch where they have
# none (kvplan.engines.scheduler.LOCKSTEP_DP's citation), and their decode CUDA graphs gather in MAX_LEN mode, every
# rank padded to the largest (sglang 0.5.15 wheel `srt/layers/dp_attention.py` `get_default_mode_in_cuda_graph`
# L93-100, on CUDA; `srt/model_executor/runner/decode_cuda_graph_runner.py` L641).
def dp_step_note(plan, spec) -> str:
    """One line saying which rank's batch a dp > 1 plan's decode step is priced at and what the ranks share ("" at
    dp 1): the busiest rank's step_batch; around a MoE with expert parallelism, every rank's tokens reach its experts,
    padded to that rank's count."""
    dep, batch = plan.deployment, max(1, plan.request.batch)
    if dep.dp <= 1:
        return ""
    each = step_batch(plan)
    line = f"speed: the decode step is priced at the busiest of {arg('dp')} {dep.dp} ranks, {each} of the {batch} " \
           "sequences"
    if spec.params.num_experts and dep.ep > 1:
        return (f"{line}; the ranks of a MoE step together (vLLM's DP engine cores, SGLang's DP attention: an idle "
                f"rank runs a dummy batch, every rank padded to the busiest's tokens), so its experts serve "
                f"{dep.dp} x {each} tokens a step; decode tokens/s is the {batch} over that step")
    if spec.params.num_experts:
        return (f"{line}; at {arg('ep')} 1 each rank's experts are priced over its own tokens and its tp group "
                f"only (the speed terms place experts over tp x dp with expert parallelism alone)")
    return f"{line}; each rank steps on its own (independent replicas)"


class DecodeSteps:
    """plan_decode_seconds for many plans (a sweep's), equal to it (to 1e-12, tests/test_sweep_speed.py):
    the GPU-free part of the Shape (kvplan.speed.shape.model_terms: weights, KV profile, FLOPs) is built
    once per model × tp × ep × dp × dtypes, the Shape and its StepModel once per GPU too, and a decode step
    at a batch is then a line in the context. Neither depends on the context or the batch."""

    def __init__(self, engine: str | None, speed: str = "calibrated", version: str | None = None):
        self.engine, self.speed, self.version = engine, speed, version
        self._coef = coefficients(engine) if speed == "calibrated" else ()  # (): the roofline's decode_seconds
        self._terms: dict = {}  # key -> (spec, terms): the spec kept so its id stays its own
        self._lines: dict = {}  # (key, id(gpu), batch) -> (gpu, decode step as a function of the context)

    def _terms_of(self, spec, key, tp, ep, weight_dtype, kv, dp) -> dict:
        hit = self._terms.get(key)
        if hit is None:
            hit = self._terms[key] = (spec, model_terms(spec, tp=tp, ep=ep, weight_dtype=weight_dtype, kv_dtype=kv,
                                                        dp=dp))
        return hit[1]

    def seconds(self, plan, spec, gpu) -> float:
        """plan_decode_seconds(plan, spec, gpu, engine, speed): the plan's batch at its context."""
        req, dep = plan.request, plan.deployment
        ssm = req.ssm_dtype  # the recurrent states as the engine's pool holds them (plan_shape)
        adp = req.attention_dp  # DP attention's ranks in the engine's tp size (plan_shape)
        form = (req.prefix_cache, req.attention_backend or None)  # an MLA prefill's form (plan_shape)
        overlap = plan_overlaps(self.engine, self.version, req.host_overlap, dep.pp)  # its host work's (plan_shape)
        line_key = (id(spec), id(gpu), dep.tp, dep.ep, dep.dp, req.weight_dtype, req.kv_dtype, ssm, adp, form,
                    req.batch, overlap)
        hit = self._lines.get(line_key)
        if hit is None:
            kv = req.kv_dtype.name if req.kv_dtype is not None else None
            batch = step_batch(plan)  # the busiest data-parallel rank's share
            run = as_run(spec, self.engine, self.version)  # MLA decompressed under a release with no MLA kernel
            terms = self._terms_of(in_dtype(run, ssm), (id(spec), dep.tp, dep.ep, dep.dp, req.weight_dtype, kv, ssm),
                                   dep.tp, dep.ep, req.weight_dtype, kv, dep.dp)
            shape = replace(on_gpu(terms, run, gpu, req.weight_dtype, engine=self.engine, version=self.version,
                                   tp_size=dep.tp * dep.dp if adp else dep.tp, prefix_cache=form[0],
                                   attention_backend=form[1]), host_overlap=overlap)
            total = StepModel(shape, self._coef).decode(batch) if self._coef else None  # of all seqs' context
            line = ((lambda context: total(batch * context)) if total else
                    (lambda context, s=shape: decode_seconds(s, self.engine, batch, context, speed=self.speed)))
            hit = self._lines[line_key] = (gpu, line)
        return hit[1](req.context)


def plan_prefill_seconds(plan, spec, gpu, engine: str | None, prompt: int, speed: str = "calibrated",
                         version: str | None = None) -> float:
    """Seconds one request's prefill of `prompt` tokens takes on the plan's deployment (its fixed cost
    per request included; `version`: the engine's release, as plan_shape)."""
    return prefill_seconds(plan_shape(plan, spec, gpu, engine, version), engine, prompt, speed=speed)


def prefill_form(plan, spec, gpu, engine: str | None, version: str | None = None) -> str:
    """What plan_shape assumes of an MLA model's prefill, in one line: absorbed (the latent's width, as decode) or
    decompressed (kv_b_proj's K and V, re-run over the cached context), and, for an engine whose form follows its
    attention backend and prefix cache (kvplan.speed.mlaform.ABSORBS_WITH_PREFIX), which backend and cache state are
    priced and where each came from: the engine's options (Request.attention_backend, Request.prefix_cache) or its
    default by release on this GPU. "" for a model with no MLA layer that decompresses (none, or DSA's sparse ones)."""
    req, dep = plan.request, plan.deployment
    if not attention_flops(spec.layers, spec.num_attention_heads, dep.tp)[3]:
        return ""
    key = rules_key(engine)
    heads = mla_heads_per_rank(spec, dep.tp * dep.dp if req.attention_dp else dep.tp)
    named, arch = req.attention_backend or None, spec.architecture
    absorbed = absorbed_prefill(engine, version, req.prefix_cache, gpu, heads, named, arch)
    line = (f"speed: {spec.name}'s MLA prefill priced " +
            ("absorbed (at the latent's width, as decode)" if absorbed else
             "decompressed (K and V from kv_b_proj, re-run over the cached context a chunk attends to)"))
    if key not in ABSORBS_WITH_PREFIX:
        return f"{line}: {key}'s rule at every release (kvplan.speed.model.MLA_PREFILL)"
    backend = named or default_backend(key, version, gpu, heads, arch)
    source = ("named by the engine option" if named else
              f"{key} {version}'s default" if version else f"{key}'s default at its current release")
    source += "" if named else f" on this GPU at {heads} heads a rank"
    off = PREFIX_CACHE_OFF.get(key)  # the engine's own option that turns its prefix cache off
    cache = "on (the engine's default)" if req.prefix_cache else \
        f"off (as asked: {f'the engine option {off}=true, or ' if off else ''}a simulation without prefix caching)"
    return (f"{line}: attention backend {backend or 'any'} ({source}), prefix cache {cache} "
            "(kvplan.speed.mlaform)")
