"""The plan: what one deployment of a model on a GPU holds, and how fast it decodes.

Pure arithmetic over frozen specs: no I/O, no printing, no environment.

Per GPU the KV budget is usable memory x gpu-memory-utilization, minus this rank's weights, minus
an overhead estimate (or exactly `kv_cache_memory_bytes`, as vLLM's --kv-cache-memory). The cache
is paged in blocks of `block_size` tokens, and a sequence's cost on a rank is the sum over its
layers of whole pages of held tokens plus fixed recurrent states. Max concurrency and max context
follow from that cost by division and by binary search over a pure function.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from kvplan.dtypes import DType
from kvplan.errors import EXIT_USAGE, KvplanError
from kvplan.layers import LayerSpec
from kvplan.layout import DcpRules, per_rank_batch, rank_weights, replicated_kv_proj_bytes
from kvplan.model import ModelSpec, WeightBytes, weight_bytes

GIB = 2**30
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default (vllm/config/cache.py); newer releases differ, see docs
DEFAULT_BLOCK_SIZE = 16  # vLLM's default page of 16 tokens
DEFAULT_MAX_BATCHED_TOKENS = 8192  # vLLM v1 default chunked-prefill budget for its profiling run
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default max running sequences (logits of the profiling run)
NON_TORCH_BYTES = 160 * 2**20  # non-torch memory at tp=1: 0.14 GiB in a vLLM 0.11 H100 log (shared/engine_logs.yaml)
NCCL_BYTES = 512 * 2**20  # added for tp or pp > 1: NCCL buffers and communicators (an estimate)


@dataclass(frozen=True)
class PagedRules:
    """How a sequence's tokens become allocated slots: whole pages of the held tokens.

    This is kvplan's engine-neutral rule (vLLM's for full attention). Engines that allocate
    differently (vLLM's sliding-window bound, llama.cpp's 256-cell padding) supply their own
    frozen object with the same method; see kvplan.engines.
    """

    name = "paged"

    def tokens_allocated(self, layer: LayerSpec, seq_len: int, block: int) -> int:
        held = layer.tokens_held(seq_len)
        return -(-held // block) * block if held else 0


PAGED = PagedRules()


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
    rules: object = PAGED  # how held tokens become allocated slots (an engine's layout)


@dataclass(frozen=True)
class Deployment:
    """tp x pp GPUs per data-parallel rank, dp of them; ep = tp x dp with expert parallelism, else 1
    (kvplan.layout says what each rank holds)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    dcp: int = 1  # decode context parallel within tp (MLA latents striped over dcp ranks)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class KVProfile:
    """One pipeline stage's layers, grouped by identical spec, priced on one tensor-parallel rank."""

    groups: tuple[tuple[LayerSpec, int], ...]  # (spec, number of layers)
    tp: int
    kv_dtype: DType
    state_dtype: DType
    block_size: int
    rules: object = PAGED

    def __post_init__(self):
        # Per-group figures that never change, worked out once: a profile is shared by every GPU and
        # context of a sweep (see _stage_profile), and sequence_bytes is called by the max-context
        # search many times. The memo of sequence_bytes is bounded; neither is part of eq or hash.
        tb = tuple(self.kv_dtype.bytes_for(s.elements_per_token(self.tp)) for s, _ in self.groups)
        states = sum(self.state_dtype.bytes_for(e) * n for (s, n) in self.groups if (e := s.state_elements(self.tp)))
        object.__setattr__(self, "_token_bytes", tb)
        object.__setattr__(self, "_state_bytes", states)
        object.__setattr__(self, "_memo", {})
        object.__setattr__(self, "_growth", sum(b * n for (s, n), b in zip(self.groups, tb) if not s.bounded))
        object.__setattr__(self, "_slot", sum(b * n for (_, n), b in zip(self.groups, tb)))

    def token_bytes(self, layer: LayerSpec) -> int:
        return self.kv_dtype.bytes_for(layer.elements_per_token(self.tp))

    def growth_bytes_per_token(self) -> int:
        """Bytes one more token adds at long context (unbounded layers only)."""
        return self._growth

    def slot_bytes_per_token(self) -> int:
        """Bytes of one token slot across every layer that caches tokens at all."""
        return self._slot

    def sequence_bytes(self, seq_len: int, paged: bool = True) -> int:
        """Bytes one sequence of seq_len tokens holds on this rank: whole pages, plus states."""
        memo = self._memo
        total = memo.get((seq_len, paged))
        if total is not None:
            return total
        total = self._state_bytes
        for (spec, n), tb in zip(self.groups, self._token_bytes):
            held = self.rules.tokens_allocated(spec, seq_len, self.block_size) if paged else spec.tokens_held(seq_len)
            if held:
                total += held * tb * n
        if len(memo) >= 256:
            memo.clear()
        memo[(seq_len, paged)] = total
        return total


def kv_profile(layers, tp: int, kv_dtype: DType, state_dtype: DType, block_size: int, rules=PAGED) -> KVProfile:
    return KVProfile(tuple(Counter(layers).items()), tp, kv_dtype, state_dtype, block_size, rules)


_PROFILES: dict = {}  # (id(layers), start, end, tp, dtypes, block, rules) -> (layers, KVProfile)
_WEIGHTS: dict = {}  # (id(model), weight_dtype) -> (model, WeightBytes)
_CACHE_LIMIT = 1024  # entries; a 100k-plan sweep of 50 models uses about 600


def _stage_profile(layers: tuple, start: int, end: int, tp: int, kv_dtype: DType, state_dtype: DType,
                   block_size: int, rules) -> KVProfile:
    """kv_profile(layers[start:end], ...), memoised by the identity of the model's layer tuple.

    Grouping 80 layer specs with Counter hashes every one of them and cost more than the rest of a
    plan; a sweep asks for the same profile for every GPU and context. Keyed by id() because hashing
    the tuple would cost as much as grouping it; the entry keeps the tuple alive and is checked with
    `is`, so an id reused after garbage collection can never match.
    """
    try:
        key = (id(layers), start, end, tp, kv_dtype, state_dtype, block_size, rules)
        hit = _PROFILES.get(key)
    except TypeError:  # an unhashable rules object: plan without the cache
        return kv_profile(layers[start:end], tp, kv_dtype, state_dtype, block_size, rules)
    if hit is not None and hit[0] is layers:
        return hit[1]
    prof = kv_profile(layers[start:end], tp, kv_dtype, state_dtype, block_size, rules)
    if type(layers) is tuple:  # immutable: safe to remember
        if len(_PROFILES) >= _CACHE_LIMIT:
            _PROFILES.clear()
        _PROFILES[key] = (layers, prof)
    return prof


def _model_weights(model: ModelSpec, weight_dtype: str | None) -> WeightBytes:
    """weight_bytes(model, weight_dtype), memoised by the (frozen) model's identity like _stage_profile."""
    key = (id(model), weight_dtype)
    hit = _WEIGHTS.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    wb = weight_bytes(model, weight_dtype)
    if len(_WEIGHTS) >= _CACHE_LIMIT:
        _WEIGHTS.clear()
    _WEIGHTS[key] = (model, wb)
    return wb


def split_layers(n: int, pp: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) layer ranges for pp stages, the remainder spread over the first ones."""
    base, extra = divmod(n, pp)
    out, start = [], 0
    for i in range(pp):
        end = start + base + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    return out


def validate_deployment(model: ModelSpec, dep: Deployment) -> str | None:
    """Why this deployment cannot run this model, or None when it can."""
    if dep.tp < 1 or dep.pp < 1:
        return "tp and pp must be at least 1"
    if model.num_attention_heads % dep.tp:
        return f"tp={dep.tp} does not divide the {model.num_attention_heads} attention heads"
    # KV heads are split evenly over ranks, or each rank keeps whole replicated heads (vLLM's
    # QKVParallelLinear asserts one or the other; SGLang and TensorRT-LLM split the same way).
    for h in sorted({getattr(layer, "num_kv_heads", 0) for layer in model.layers} - {0}):
        if (h % dep.tp if h >= dep.tp else dep.tp % h):
            return f"tp={dep.tp} neither divides nor is a multiple of the {h} KV heads"
    if dep.pp > model.num_layers:
        return f"pp={dep.pp} exceeds the {model.num_layers} layers"
    from kvplan.layout import layout_problem

    return layout_problem(model, dep.tp, dep.pp, dep.dp, dep.ep, dep.dcp)


def activation_estimate(model: ModelSpec, tp: int, tokens: int = DEFAULT_MAX_BATCHED_TOKENS,
                        max_seqs: int = DEFAULT_MAX_NUM_SEQS) -> int:
    """Peak activation memory of an engine's profiling forward pass, per rank (an estimate).

    A prefill chunk of `tokens` tokens materialises the MLP's gate+up output (2 x width) and its
    activation (1 x width) in 16 bits, a few hidden-size buffers (residual, normed input, attention
    output, q/k/v), and fp32 logits for up to `max_seqs` sampled sequences. For the vLLM 0.11 log of
    Mistral-Small-24B on an H100 this gives 1.94 GiB against the 2.12 GiB vLLM measured.
    """
    width = model.intermediate_size // tp
    per_token = (3 * width + 4 * model.hidden_size) * 2
    logits = min(tokens, max_seqs) * model.vocab_size * 4 // tp
    return tokens * per_token + logits


def overhead_estimate(model: ModelSpec, dep: Deployment) -> int:
    extra = NCCL_BYTES if dep.gpus > 1 else 0
    return activation_estimate(model, dep.tp) + NON_TORCH_BYTES + extra


@dataclass(frozen=True)
class Stage:
    """One pipeline stage on one tensor-parallel rank."""

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
    kv_cache_tokens: int  # token slots the per-GPU KV memory holds across all caching layers
    max_concurrency: int
    max_context: int
    max_context_limited_by: str  # "memory" or "model"
    fits: bool
    decode_step_seconds: float
    decode_tokens_per_second: float  # the whole batch
    bandwidth_bytes_per_s: int
    stages: tuple[Stage, ...] = field(repr=False, default=())
    warnings: tuple[str, ...] = ()

    @property
    def kv_used_bytes_per_gpu(self) -> int:
        return per_rank_batch(self.request.batch, self.deployment.dp) * self.kv_bytes_per_sequence_per_gpu

    @property
    def free_bytes_per_gpu(self) -> int:
        return self.kv_memory_bytes_per_gpu - self.kv_used_bytes_per_gpu


def expected_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts a decode step of `tokens` tokens reads in one MoE layer, under uniform routing.

    Each expert is missed by one token with probability 1 - k/E, so by all with (1 - k/E)^tokens.
    """
    if not num_experts or not top_k:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def plan(model: ModelSpec, gpu, dep: Deployment, req: Request) -> Plan:
    """Plan `req` for `model` on `dep.gpus` GPUs of type `gpu` (a kvplan.hardware.GPU)."""
    return _assemble(model, gpu, dep, req, _prepare(model, dep, req))


def _prepare_key(req: Request) -> tuple:
    """The Request fields _prepare reads: requests equal on these share its result."""
    return (req.kv_dtype, req.state_dtype, req.weight_dtype, req.batch, req.overhead_bytes, req.block_size, req.rules)


def plan_grid(model: ModelSpec, gpus, dep: Deployment, requests) -> list[Plan]:
    """[plan(model, gpu, dep, req) for gpu in gpus for req in requests], sharing the work that
    depends on neither the GPU nor the context (weights per stage, overhead, KV profiles).

    A sweep calls this once per model and deployment; every number is plan()'s own.
    """
    prepared: dict = {}
    max_context_memo: dict = {}  # the longest context does not depend on the asked one
    out = []
    for gpu in gpus:
        for req in requests:
            key = _prepare_key(req)
            prep = prepared.get(key)
            if prep is None:
                prep = prepared[key] = _prepare(model, dep, req)
            out.append(_assemble(model, gpu, dep, req, prep, max_context_memo))
    return out


def _prepare(model: ModelSpec, dep: Deployment, req: Request) -> tuple:
    """What a plan needs that no GPU and no context changes: total weight bytes, overhead, and per
    stage (layer range, resident weight bytes, weight bytes read per step, KV profile).
    Reads only the Request fields in _prepare_key."""
    why = validate_deployment(model, dep)
    if why:
        raise KvplanError(f"{model.name}: {why}", EXIT_USAGE)
    from kvplan.dtypes import canonical_kv_dtype

    kv_dtype = req.kv_dtype or canonical_kv_dtype("auto", model.dtype)
    state_dtype = req.state_dtype or canonical_kv_dtype("auto", model.dtype)
    wb = _model_weights(model, req.weight_dtype)
    if req.weight_dtype is None and model.checkpoint_bytes and wb.total:
        scale = model.checkpoint_bytes / wb.total  # exact published bytes, split as computed
    else:
        scale = 1.0
    overhead = req.overhead_bytes if req.overhead_bytes is not None else overhead_estimate(model, dep)
    parts = []
    p = model.params
    touched = expected_experts_touched(p.num_experts, p.experts_per_token, req.batch)
    ranges = split_layers(model.num_layers, dep.pp)
    for i, (start, end) in enumerate(ranges):
        frac = (end - start) / model.num_layers
        kv_extra = replicated_kv_proj_bytes(model, wb, model.layers[start:end], dep.tp)
        resident, read = rank_weights(wb, model, i == 0, i == dep.pp - 1, frac, dep.tp, dep.dp, touched, kv_extra)
        resident, read = int(resident * scale), int(read * scale)
        rules = req.rules if dep.dcp == 1 else DcpRules(req.rules, dep.dcp)
        prof = _stage_profile(model.layers, start, end, dep.tp, kv_dtype, state_dtype, req.block_size, rules)
        parts.append(((start, end), resident, read, prof))
    weight_total = model.checkpoint_bytes if scale != 1.0 else wb.total
    return weight_total, overhead, tuple(parts)


def _assemble(model: ModelSpec, gpu, dep: Deployment, req: Request, prepared: tuple, memo: dict | None = None) -> Plan:
    """The plan on `gpu` at `req.context`, from _prepare's GPU- and context-free parts.

    `memo` (plan_grid's, for one model and deployment, while `prepared` is alive) keeps the
    longest context per stage budget: it is the same for every asked context.
    """
    weight_total, overhead, parts = prepared
    usable = gpu.memory_usable_bytes
    budget = int(usable * req.gpu_memory_utilization)
    stages = []
    for layer_range, resident, read, prof in parts:
        if req.kv_cache_memory_bytes is not None:
            kv_mem = req.kv_cache_memory_bytes
        else:
            kv_mem = budget - resident - overhead
        stages.append(Stage(layer_range, resident, read, overhead, kv_mem, prof))

    warnings = []
    ctx = req.context
    if ctx > model.max_context:
        warnings.append(f"context {ctx:,} exceeds the model's max_position_embeddings ({model.max_context:,})")
    # One pass over the stages (this runs once per plan of a sweep): per GPU, a figure is the
    # worst stage's (least KV room, most weights, fewest sequences); totals sum the stages.
    batch = per_rank_batch(req.batch, dep.dp)  # each data-parallel rank holds its own requests
    seq_per_stage = []
    max_conc = tokens = math.inf
    step_bytes = growth_sum = 0
    per_tok_gpu = weight_max = kv_min = None
    room = True  # every stage has some KV memory
    for s in stages:
        prof, kv_mem = s.profile, s.kv_memory_bytes
        seq = prof.sequence_bytes(ctx)
        seq_per_stage.append(seq)
        max_conc = min(max_conc, _div(kv_mem, seq))
        # Each decode step reads this rank's weights and the batch's cached tokens, stage after stage.
        step_bytes += s.weight_read_bytes + batch * prof.sequence_bytes(ctx, paged=False)
        growth = prof.growth_bytes_per_token()
        growth_sum += growth
        per_tok_gpu = growth if per_tok_gpu is None else max(per_tok_gpu, growth)
        tokens = min(tokens, _div(kv_mem, prof.slot_bytes_per_token()))
        weight_max = s.weight_bytes if weight_max is None else max(weight_max, s.weight_bytes)
        kv_min = kv_mem if kv_min is None else min(kv_min, kv_mem)
        room = room and kv_mem > 0
    if memo is None:
        max_ctx, limited = _max_context(stages, batch, model.max_context)
    else:  # prepared fixes the profiles and batch; budget and the exact KV size fix each stage's room
        mkey = (id(prepared), budget, req.kv_cache_memory_bytes)
        hit = memo.get(mkey)
        if hit is None:
            hit = memo[mkey] = _max_context(stages, batch, model.max_context)
        max_ctx, limited = hit
    step = step_bytes / gpu.bandwidth_bytes_per_s
    copies = dep.tp  # every tensor-parallel rank holds its share (or a replicated copy)
    tokens = tokens // req.block_size * req.block_size if tokens < math.inf else 0
    tokens *= dep.dcp  # with decode context parallel a rank's slots hold every dcp-th token
    fits = room and max_conc >= batch
    max_conc = max_conc * dep.dp if max_conc < math.inf else max_conc
    if not room:
        warnings.append("the weights and overhead leave no memory for the KV cache")
    if req.kv_cache_memory_bytes is not None:
        # An exact KV budget is taken as given, but it must fit beside this rank's weights.
        need = max(s.weight_bytes + s.overhead_bytes + s.kv_memory_bytes for s in stages)
        if need > usable:
            fits = False
            warnings.append(f"weights + overhead + the given KV budget ({need / GIB:.2f} GiB) exceed the GPU's "
                            f"usable memory ({usable / GIB:.2f} GiB)")
    return Plan(
        model=model.name, gpu=gpu.key, deployment=dep, request=req,
        usable_memory_bytes=usable, budget_bytes=budget,
        weight_bytes=weight_total,
        weight_bytes_per_gpu=weight_max,
        overhead_bytes_per_gpu=overhead,
        kv_memory_bytes_per_gpu=kv_min,
        kv_bytes_per_token=copies * growth_sum // dep.dcp,
        kv_bytes_per_token_per_gpu=per_tok_gpu // dep.dcp,
        kv_bytes_per_sequence=copies * sum(seq_per_stage),
        kv_bytes_per_sequence_per_gpu=max(seq_per_stage),
        kv_cache_tokens=int(tokens),
        max_concurrency=int(max_conc),
        max_context=max_ctx, max_context_limited_by=limited,
        fits=fits,
        decode_step_seconds=step,
        decode_tokens_per_second=req.batch / step if step > 0 else 0.0,
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        stages=tuple(stages),
        warnings=tuple(warnings),
    )


def _div(memory: int, cost: int) -> float:
    if memory <= 0:
        return 0
    return memory // cost if cost > 0 else math.inf


def _max_context(stages, batch: int, model_limit: int) -> tuple[int, str]:
    """Longest context for `batch` sequences on every stage, capped by the model's own limit.

    `fits(n)` is pure and monotone in n, so a binary search over [0, model_limit] finds it.
    """
    def fits(n: int) -> bool:
        return all(batch * s.profile.sequence_bytes(n) <= s.kv_memory_bytes for s in stages)

    if fits(model_limit):
        return model_limit, "model"
    lo, hi = 0, model_limit  # fits(lo) holds (0 tokens cost only states... or not), fits(hi) fails
    if not fits(0):
        return 0, "memory"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, "memory"


NODE_GPUS = 8  # tensor parallelism stays within a node; pipeline stages span nodes


def deployment_for_gpus(model: ModelSpec, gpus: int) -> Deployment | None:
    """The deployment a person would pick for `gpus` GPUs: the widest valid tp within a node, then
    pipeline stages for the rest (16 GPUs: tp 8 x pp 2). None when no split is valid."""
    for tp in (8, 4, 2, 1):
        if tp <= NODE_GPUS and gpus % tp == 0:
            dep = Deployment(tp, gpus // tp)
            if validate_deployment(model, dep) is None:
                return dep
    return None


def candidate_deployments(model: ModelSpec, max_gpus: int = 64) -> list[Deployment]:
    """Valid deployments in the order a person would try them: fewest GPUs, then tp before pp."""
    out = []
    for gpus in (1, 2, 4, 8, 16, 32, 64):
        if gpus > max_gpus:
            break
        dep = deployment_for_gpus(model, gpus)
        if dep is not None:
            out.append(dep)
    return out


def search_layouts(model: ModelSpec, gpu, gpus: int, req: Request, plan_fn=None, per_node: int = NODE_GPUS) -> list[Plan]:
    """Every valid layout of `gpus` GPUs (kvplan.layout.candidate_layouts), planned and ranked best
    first by concurrency at the context (ties: decode tokens/s). `plan_fn(model, gpu, dep, req)`
    plans one (default: the engine-neutral plan); a layout it refuses is left out."""
    from kvplan.layout import candidate_layouts, layout_rank_key

    plan_fn = plan_fn or plan
    out = []
    for tp, pp, dp, ep in candidate_layouts(model, gpus, per_node):
        dep = Deployment(tp, pp, dp, ep)
        if validate_deployment(model, dep) is not None:
            continue
        try:
            out.append(plan_fn(model, gpu, dep, req))
        except KvplanError:
            continue
    return sorted(out, key=layout_rank_key)


def smallest_fitting(model: ModelSpec, gpu, req: Request) -> Plan | None:
    for dep in candidate_deployments(model):
        p = plan(model, gpu, dep, req)
        if p.fits:
            return p
    return None
