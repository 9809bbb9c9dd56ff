"""One plan's arithmetic: what a deployment of a model on a GPU holds, and how fast it decodes. Pure arithmetic over
frozen specs: no I/O, no printing, no environment, no units.

Per GPU the KV budget is usable memory x utilisation, minus this rank's weights, minus an overhead
(or exactly `kv_cache_memory_bytes`, as vLLM's --kv-cache-memory). A sequence's cost on a rank is
its KV profile (kvplan.planning.profile); max concurrency and max context follow by division and by search.
The steps, in the order an engine (kvplan.engines.base.Engine.result) runs them:
  prepare()  -> Prepared: weights, overhead and KV profile per stage (no GPU, no context);
  budgets()  -> Stage per pipeline stage: the KV memory the GPU leaves;
  usage()    -> Usage: what one sequence costs and a decode step reads (kvplan.planning.cost);
  assemble() -> Plan, with the engine's Answers and the verdict rules every engine shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from fractions import Fraction
from typing import NamedTuple

from kvplan.planning.deploy import Deployment, stage_ranges, validate_deployment
from kvplan.core.dtypes import DType, canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.planning.layout import (DcpRules, host_shift, per_rank_batch, rank_weights, replicated_kv_proj_bytes,
                                   vllm_placement)
from kvplan.model.recurrent import ssm_as
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import own_format, weight_bytes
from kvplan.planning.stage_shares import stage_mixes
from kvplan.planning.profile import PAGED, KVProfile, kv_profile
from kvplan.planning.cost import (  # noqa: F401 (re-exported: the engines read them here)
    Answers, ContextCost, Usage, context_cost, paged_answers, paged_max_context, usage)
from kvplan.planning.plan_warnings import (  # noqa: F401 (re-exported: engines, report and cli read them here)
    KV_ASKED, KV_ENGINE_AUTO, KV_FOLLOWED, KV_NOT_FOLLOWED, KV_TOPICS, UNIFIED, PlanWarning, _override_warning,
    int4_group_assumed, memory_warnings, node_span_warnings,
)
from kvplan.planning.overhead import (  # noqa: F401 (re-exported: kvplan.planning.plan.activation_estimate, ...)
    DEFAULT_MAX_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, NCCL_BYTES, NON_TORCH_BYTES, activation_estimate,
    expected_experts_touched, overhead_estimate, runtime_bytes,
)

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default (vllm/config/cache.py); newer releases differ, see docs
DEFAULT_BLOCK_SIZE = 16  # vLLM's default page of 16 tokens


@dataclass(frozen=True)
class Request:
    """What the user asks: a context length, a number of concurrent sequences, dtypes, limits."""

    context: int
    batch: int = 1
    kv_dtype: DType | None = None  # None: the model's own dtype
    state_dtype: DType | None = None  # recurrent states; None: the model's own dtype
    weight_dtype: str | None = None  # None: the checkpoint's own format
    block_size: int = DEFAULT_BLOCK_SIZE
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    overhead_bytes: int | None = None  # per GPU; None: estimated
    kv_cache_memory_bytes: int | None = None  # per GPU; exact KV budget, skips the estimate
    context_from_model: bool = False  # no context asked for: `context` is the model's own limit
    lora: object = None  # kvplan.planning.lora.LoraRequest: adapters the engine keeps room for; None: no LoRA
    lora_bytes: int = 0  # per GPU, what the engine reserves for them (kvplan.engines.lora), beside the overhead
    # the cache dtype was left to the engine ('auto'): an engine whose 'auto' follows a checkpoint's declared KV
    # quantization may set it (kvplan.engines.checkpoint_kv); False: asked for by name, honoured as asked
    kv_auto: bool = False
    # the recurrent values' element type an engine pools them in where its options state one (SGLang's
    # mamba_ssm_dtype, set by its `request` step); "": the model's own. The speed figures price the states in it too
    ssm_dtype: str = ""
    # the deployment's dp ranks are attention-DP ranks of one engine, counted in its tp size (SGLang's
    # enable_dp_attention, set by its `request` step); the speed figures read a rank's MLA heads over tp x dp
    attention_dp: bool = False
    # the attention backend the engine's options name ("": its default by release and GPU) and whether its prefix
    # cache is on (off where an option turns it off: SGLang's disable_radix_cache), set by its `request` step; the
    # speed figures read an MLA prefill's form from them, as the corpus fit reads a run's flags (kvplan.speed.mlaform)
    attention_backend: str = ""
    prefix_cache: bool = True
    # the engine replays its prefill steps from a CUDA graph (SGLang's piecewise or breakable graph, set by its
    # `request` step): no launch cost per MoE layer (kvplan.speed.terms `pmoe`)
    prefill_graph: bool = False
    host_overlap: bool | None = None  # vLLM's async_scheduling as its options state it (None: its release's default)


class Stage(NamedTuple):
    """One pipeline stage on one tensor-parallel rank (a named tuple: one is made per stage per plan)."""

    layers: tuple[int, int]
    weight_bytes: int  # resident on this rank
    weight_read_bytes: int  # read per decode step at the plan's batch (only touched experts)
    overhead_bytes: int
    kv_memory_bytes: int
    profile: KVProfile


@dataclass(frozen=True)
class Plan:
    model: str
    gpu: str
    deployment: Deployment
    request: Request
    usable_memory_bytes: int
    budget_bytes: int  # usable x utilisation
    weight_bytes: int  # whole model, all ranks counted once
    weight_bytes_per_gpu: int  # the most loaded rank
    overhead_bytes_per_gpu: int
    kv_memory_bytes_per_gpu: int  # the least KV room over ranks
    kv_bytes_per_token: int  # growth per token, summed over every rank that holds a copy
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_sequence: int  # one `context`-token sequence, all ranks, pages and states included
    kv_bytes_per_sequence_per_gpu: int
    kv_cache_tokens: int  # token slots of the deployment's pool: a tp group's (its GPUs hold each token together) x dp
    max_concurrency: int
    max_context: int
    max_context_limited_by: str  # "memory", "model" (its own limit) or "max_model_len" (the one asked for)
    fits: bool
    decode_step_seconds: float
    decode_tokens_per_second: float  # the whole batch
    bandwidth_bytes_per_s: int
    stages: tuple[Stage, ...] = field(repr=False, default=())
    warnings: tuple[PlanWarning, ...] = ()
    context_limit: int = 0  # the longest request the model (as the engine derives it) accepts; 0: unknown
    context_limit_asked: bool = False  # context_limit is a max_model_len asked for, not the model's own limit
    # recurrent-state slots the engine allocates up front out of the KV memory (PooledStates); 0: none, a
    # sequence's states are its own allocation. Then the token pool beside it, and of kv_bytes_per_sequence_per_gpu
    # the slots one running request holds in that pool
    state_pool_bytes_per_gpu: int = 0
    token_pool_bytes_per_gpu: int = 0
    pooled_state_bytes_per_sequence_per_gpu: int = 0
    # the share of what weights, overhead and adapters leave that the engine takes for the KV cache (TensorRT-LLM's
    # free_gpu_memory_fraction); 1: all of it. Set by the engine layer, so the memory table shows the step as data
    kv_share: float = 1.0
    # what the engine allocates per GPU above its budget after sizing the pool, and the room there: (what, bytes,
    # room bytes), set by the engine layer (SGLang's request-slot pool); (): none priced
    above_budget: tuple = ()

    @property
    def binds(self) -> str | None:
        """What stops the plan from fitting: "context limit" (the request is longer than the model's
        limit, whatever the memory), "memory", or None when it fits."""
        if self.fits:
            return None
        if self.context_limit and self.request.context > self.context_limit:
            return "context limit"
        return "memory"

    @property
    def context_limit_name(self) -> str:
        """Whose limit context_limit is, for a sentence (limit_name)."""
        return limit_name(self.context_limit_asked)

    @cached_property  # kv_used, token room and free each read it: worked out once (a sweep's rows, pp > 1)
    def binding_stage(self) -> Stage | None:
        """The pipeline stage whose room sets the answer, whose GPU the memory table and the used / free figures
        describe (one stage's coherent figures, not each row's worst stage): the one short of room most, else
        the one holding the fewest sequences of the context (exact kv / sequence, ties to the first); beside a
        state pool, the least room (the pools are sized from it). None with no stages kept."""
        if len(self.stages) <= 1:
            return self.stages[0] if self.stages else None
        if self.state_pool_bytes_per_gpu or min(s.kv_memory_bytes for s in self.stages) <= 0:
            return min(self.stages, key=lambda s: s.kv_memory_bytes)
        ctx = self.request.context
        return min(self.stages, key=lambda s: Fraction(s.kv_memory_bytes, max(1, s.profile.sequence_bytes(ctx))))

    @property
    def binding_weight_bytes(self) -> int:
        """The binding stage's weights on one GPU (the memory table's row; weight_bytes_per_gpu is the most loaded)."""
        stage = self.binding_stage
        return self.weight_bytes_per_gpu if stage is None else stage.weight_bytes

    @property
    def binding_kv_memory_bytes(self) -> int:
        """The binding stage's KV memory on one GPU (kv_memory_bytes_per_gpu is the least over the stages)."""
        stage = self.binding_stage
        return self.kv_memory_bytes_per_gpu if stage is None else stage.kv_memory_bytes

    @property
    def token_pool_stage(self) -> Stage | None:
        """Beside a state pool under pipeline stages, the stage whose cell sizes the one token count every stage holds
        (the largest: SGLang's pool_cell), whose bytes token pool, used and free are in; else binding_stage."""
        if not self.state_pool_bytes_per_gpu or len(self.stages) <= 1:
            return self.binding_stage
        return max(self.stages, key=lambda s: s.profile.slot_bytes_per_token())

    @property
    def kv_used_bytes_per_gpu(self) -> int:
        """What the batch's sequences take of the binding stage's KV memory; beside a state pool, of the token pool
        (their states are in the pool, counted there), in token_pool_stage's bytes."""
        stage = self.token_pool_stage
        if len(self.stages) <= 1 or stage is None:
            per = self.kv_bytes_per_sequence_per_gpu - self.pooled_state_bytes_per_sequence_per_gpu
        else:
            per = stage.profile.sequence_bytes(self.request.context)
            if self.pooled_state_bytes_per_sequence_per_gpu:
                per -= stage.profile.state_bytes_per_sequence()
        return per_rank_batch(self.request.batch, self.deployment.dp) * per

    @property
    def token_room_bytes_per_gpu(self) -> int:
        """The binding stage's KV memory the batch's tokens have: beside a state pool, the token pool; where the KV
        memory is short, the state pool's bytes taken from it too (a shortfall shown whole, not an empty pool)."""
        kv = self.binding_kv_memory_bytes
        if not self.state_pool_bytes_per_gpu:
            return kv
        if kv < 0:
            return kv - self.state_pool_bytes_per_gpu
        return self.token_pool_bytes_per_gpu

    @property
    def free_bytes_per_gpu(self) -> int:
        """What the batch leaves of the KV memory; beside a state pool, of the token pool (what the engine leaves)."""
        return self.token_room_bytes_per_gpu - self.kv_used_bytes_per_gpu


def _new_plan(**fields) -> Plan:
    """Plan(**fields) for assemble, which passes every field: the same frozen object, made without
    the dataclass __init__, which sets each of the 24 fields through object.__setattr__ (about a
    third of a sweep's time per plan; tests/test_start_up.py checks the two are equal)."""
    plan = object.__new__(Plan)
    plan.__dict__.update(fields)
    return plan


class StagePrep(NamedTuple):
    """A stage's GPU- and context-free part: its layers, weights on one rank, KV profile."""

    layers: tuple[int, int]
    weight_bytes: int
    weight_read_bytes: int
    profile: KVProfile


class Prepared(NamedTuple):
    """What a plan needs that no GPU and no context changes (shared across a sweep's grid)."""

    weight_bytes: int  # the whole model
    overhead_bytes: int  # per GPU
    stages: tuple[StagePrep, ...]


class PooledStates(NamedTuple):
    """Recurrent-state slots an engine allocates up front out of a rank's KV memory, whatever the batch, the
    running requests' states among them (SGLang's MambaPool: kvplan.engines.sglang.mamba); per GPU."""

    pool_bytes: int  # the state pool as allocated
    token_pool_bytes: int  # the token pool beside it (its tokens x bytes per token)
    held_bytes: int  # the slots one running request holds, on the stage that bounds the pool
    held_bytes_all: int  # the same over every stage of one tensor-parallel rank
    requests: int  # the running requests whose states the slots hold at once (a cap on the engine's request slots)


def prepare_key(req: Request) -> tuple:
    """The Request fields prepare() reads: requests equal on these share its result."""
    return (req.kv_dtype, req.state_dtype, req.weight_dtype, req.batch, req.overhead_bytes, req.block_size,
            req.ssm_dtype)


def prepare(model: ModelSpec, dep: Deployment, req: Request, rules=PAGED, step_tokens: int | None = None,
            placement=None) -> Prepared:
    """Weights, overhead and the KV profile of every stage: reads only the fields in prepare_key.

    `req.batch` is one data-parallel rank's share; per-rank weights are kvplan.planning.layout's placement
    (experts over tp x dp ranks). `step_tokens`: the tokens of one decode step over every dp rank,
    which all reach the experts (default req.batch x dp). `placement`: a kvplan.planning.layout.Placement
    (default vLLM's for the deployment)."""
    why = validate_deployment(model, dep)
    if why:
        raise KvplanError(f"{model.name}: {why}", EXIT_USAGE)
    kv_dtype, state_dtype = cache_dtypes(req, model)
    wb = weight_bytes(model, req.weight_dtype)
    if own_format(model, req.weight_dtype) and model.checkpoint_bytes and wb.total:
        scale = model.checkpoint_bytes / wb.total  # exact published bytes, split as computed
    else:
        scale = 1.0
    overhead = req.overhead_bytes if req.overhead_bytes is not None else overhead_estimate(model, dep)
    parts = []
    p = model.params
    tokens = step_tokens if step_tokens is not None else req.batch * dep.dp
    touched = expected_experts_touched(p.num_experts, p.experts_per_token, tokens)
    if dep.dcp > 1:
        rules = DcpRules(rules, dep.dcp)
    place = placement or vllm_placement(dep.tp, dep.dp)
    ranges = stage_ranges(model, dep)
    mixes = stage_mixes(model, ranges)  # each stage's share of the mixers, MLPs and MoE blocks
    for i, (start, end) in enumerate(ranges):
        frac = (end - start) / model.num_layers
        kv_extra = replicated_kv_proj_bytes(model, wb, model.layers[start:end], dep.tp)
        resident, read = rank_weights(wb, model, i == 0, i == dep.pp - 1, frac, place, touched, kv_extra, mixes[i])
        # the states as the engine pools them (Request.ssm_dtype): the roofline's step reads them, as kvplan.speed's
        prof = kv_profile(ssm_as(model.layers[start:end], req.ssm_dtype), dep.tp, kv_dtype, state_dtype,
                          req.block_size, rules)
        resident = int(resident * scale) + host_shift(wb, place, i == 0, i == dep.pp - 1)
        parts.append(StagePrep((start, end), resident, int(read * scale), prof))
    weight_total = model.checkpoint_bytes if scale != 1.0 else wb.total
    return Prepared(weight_total, overhead, tuple(parts))


def as_loaded(prep: Prepared, extra: int, dep: Deployment) -> Prepared:
    """`prep` with `extra` bytes per GPU an engine's loading adds to the checkpoint (Engine.loaded_extra):
    on every stage's rank, and on every rank of one replica in the whole-model total."""
    if not extra:
        return prep
    return prep._replace(weight_bytes=prep.weight_bytes + extra * dep.tp * dep.pp,
                         stages=tuple(s._replace(weight_bytes=s.weight_bytes + extra) for s in prep.stages))


def gpu_budget(gpu, req: Request) -> int:
    """usable memory x utilisation: what the engine may take of one GPU."""
    return int(gpu.memory_usable_bytes * req.gpu_memory_utilization)


def budgets(prep: Prepared, budget: int, req: Request) -> tuple[Stage, ...]:
    """Each stage's KV memory: `budget` (gpu_budget) less weights and overhead, or the exact size asked."""
    exact = req.kv_cache_memory_bytes
    over = prep.overhead_bytes
    out = []
    for s in prep.stages:
        kv = exact if exact is not None else budget - s.weight_bytes - over - req.lora_bytes
        out.append(Stage(s.layers, s.weight_bytes, s.weight_read_bytes, over, kv, s.profile))
    return tuple(out)


def limit_name(asked: bool) -> str:
    """Whose context limit a sentence names: the max_model_len asked for (`asked`), or the model's own."""
    return arg("max_model_len") if asked else "the model's context limit"


def assemble(model: ModelSpec, gpu, dep: Deployment, req: Request, prep: Prepared, budget: int,
             stages: tuple[Stage, ...], use: Usage, ans: Answers, name: str | None = None,
             assumed: tuple[PlanWarning, ...] = (), pooled: PooledStates | None = None, kv_share: float = 1.0,
             span: tuple[int | None, str] = (None, "")) -> Plan:
    """The Plan, with the verdict rules every engine shares: a context past the model's limit, or an
    exact KV budget that does not fit beside the weights, is not a fit (and holds no request).
    `assumed`: the engine's warnings for hardware facts its rules had to assume (Engine.assumptions);
    `pooled`: the engine's state pool, where it keeps the sequences' states in one (Capacity.pooled); `kv_share`:
    the share of what is left it takes (Engine.kv_share); `span`: its tp group's ranks and name (Engine.tp_group)."""
    usable = gpu.memory_usable_bytes
    warnings = []
    fits, conc, max_ctx = ans.fits, ans.max_concurrency, ans.max_context  # max_ctx: for the budget as given
    if req.context > model.max_context:
        # the model's limit as the engine derives it, or the max_model_len asked for (engines.context.limited)
        asked = bool(model.max_model_len)
        whose = limit_name(asked) + (", the longest request the engine accepts" if asked else "")
        rule = f" ({model.context_rule})" if model.context_rule and not asked else ""
        warnings.append(PlanWarning(f"context {{}} exceeds {whose} ({{}}): the limit binds, not memory{rule}",
                                    (req.context, model.max_context), ("count", "count")))
        fits, conc = False, 0
    if not use.room:
        warnings.append(PlanWarning("the weights and overhead leave no memory for the KV cache"))
    warnings += _override_warning(model, req.weight_dtype, prep.weight_bytes)
    if req.kv_cache_memory_bytes is not None:
        need = max(s.weight_bytes + s.overhead_bytes + s.kv_memory_bytes for s in stages) + req.lora_bytes
        if need > usable:  # the engine would not start: no context fits either (issue 25)
            fits, conc, max_ctx = False, 0, 0
            warnings.append(PlanWarning("weights + overhead + the given KV budget ({}) exceed the GPU's usable "
                                        "memory ({})", (need, usable), ("GiB", "GiB")))
    warnings += memory_warnings(gpu, usable, any(w.topic == UNIFIED for w in assumed))
    warnings += assumed
    warnings += node_span_warnings(gpu, dep, *span)
    step = use.step_bytes / gpu.bandwidth_bytes_per_s
    copies = dep.tp  # every tensor-parallel rank holds its share (or a replicated copy); dcp stripes it
    seq_gpu, seq_rank = _sequence(stages, use, pooled)
    return _new_plan(
        model=name or model.name, gpu=gpu.key, deployment=dep, request=req,
        usable_memory_bytes=usable, budget_bytes=budget,
        weight_bytes=prep.weight_bytes, weight_bytes_per_gpu=use.weight_bytes_per_gpu,
        overhead_bytes_per_gpu=prep.overhead_bytes, kv_memory_bytes_per_gpu=use.kv_memory_bytes_per_gpu,
        kv_bytes_per_token=copies * use.growth_bytes_per_token // dep.dcp,
        kv_bytes_per_token_per_gpu=use.growth_bytes_per_token_per_gpu // dep.dcp,
        kv_bytes_per_sequence=copies * seq_rank, kv_bytes_per_sequence_per_gpu=seq_gpu,
        kv_cache_tokens=int(ans.kv_cache_tokens), max_concurrency=int(conc),
        max_context=max_ctx, max_context_limited_by=_limited_by(model, max_ctx),
        fits=fits, decode_step_seconds=step, decode_tokens_per_second=req.batch / step if step > 0 else 0.0,
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s, stages=stages, warnings=tuple(warnings),
        context_limit=model.max_context, context_limit_asked=bool(model.max_model_len),
        state_pool_bytes_per_gpu=pooled.pool_bytes if pooled else 0,
        token_pool_bytes_per_gpu=pooled.token_pool_bytes if pooled else 0,
        pooled_state_bytes_per_sequence_per_gpu=pooled.held_bytes if pooled else 0, kv_share=kv_share,
        above_budget=(),  # set by the engine layer where it prices one (SGLang's request slots)
    )


def _limited_by(model: ModelSpec, max_ctx: int) -> str:
    """What caps the longest context: "memory", the model's own limit ("model"), or a max_model_len asked for
    ("max_model_len": then model.max_context is that length, not the model's, kvplan.engines.context.limited)."""
    if not 0 < max_ctx == model.max_context:
        return "memory"
    return "max_model_len" if model.max_model_len else "model"


def _sequence(stages, use: Usage, pooled: PooledStates | None) -> tuple[int, int]:
    """One sequence's bytes (on the worst stage's GPU, over the stages of one tp rank): the profiles' own, or with
    pooled states its tokens plus the slots it holds in the pool."""
    if pooled is None:
        return max(use.sequence_bytes), sum(use.sequence_bytes)
    tokens = [seq - s.profile.state_bytes_per_sequence() for seq, s in zip(use.sequence_bytes, stages)]
    return max(tokens) + pooled.held_bytes, sum(tokens) + pooled.held_bytes_all


def cache_dtypes(req: Request, model):
    """(KV cache dtype, recurrent-state dtype) of a request: the model's own where not given."""
    own = canonical_kv_dtype("auto", model.dtype)
    return req.kv_dtype or own, req.state_dtype or own
