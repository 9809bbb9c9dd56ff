"""How many requests an engine runs at once, and how many tokens one prefill step takes, for the setting
of a published benchmark: what the speed fit (kvplan.speed.fit) prices each corpus point's steady state at.

A run's requests are admitted while the engine's KV pool holds them and its scheduler allows them, so the batch a
benchmark really runs is the engine's own figure, not one estimate for every engine: its memory rules at the stated
version with the flags the run stated (memory fraction, chunk, running limit), at the tokens each running request
counts against the pool under the engine's admission rule (kvplan.engines.scheduler.resident_context: the mean
resident length isl + osl / 2 where blocks are taken as tokens arrive; SGLang's prompt plus 0.7 of its output, its
PrefillAdder's reservation at a run's first wave; isl + osl under TensorRT-LLM's default GUARANTEED_NO_EVICT, which
reserves each request's whole output at admission, unless the run states MAX_UTILIZATION as NVIDIA's MLPerf harness
does), and capped by its running limit (vLLM's `max_num_seqs` by release and GPU, SGLang's `--max-running-requests`,
TensorRT-LLM's `max_batch_size`) and, where the engine's step budget holds decode tokens beside prefill chunks
(vLLM's max_num_batched_tokens, TensorRT-LLM's max_num_tokens), by what that budget keeps fed: chunk x osl / (isl +
osl) requests (kvplan.engines.scheduler.budget_bound). The prefill chunk is the engine's too (vLLM's
`max_num_batched_tokens` by release and GPU, SGLang's `chunked_prefill_size`, TensorRT-LLM's `max_num_tokens`). A
setting the engine rules refuse (a version outside their range, a layout they do not take) gets None, and the fit
keeps its plain estimate for it (kvplan.speed.fit.Built); TensorRT-LLM before 1.0 (rules from 0.20.0) keeps it at
its C++ runtime's share of the memory left free and the tool's max_batch_size (`unsized`). Data-parallel replicas
that are independent engines (an MLPerf harness's one engine per tp x pp group of GPUs) are each priced as that one
engine. Attention-DP ranks of one engine (kvplan.speed.corpus.attention_dp) are sized here only where the engine's
running limit is each rank's (kvplan.speed.corpus.PER_RANK_LIMIT: TensorRT-LLM's `max_batch_size` and
`max_num_tokens` under enable_attention_dp): the deployment with its dp ranks as the engine's own rules lay it out
(a rank's pool from what it holds: kvplan.engines.trtllm.layout), each rank running the engine's limit, a harness's
heuristic as the harness computes it (trtllm-bench's at `--tp` every rank: its tuning knows no attention DP,
kvplan.engines.trtllm.bench). SGLang's DP-attention ranks are not sized here, but each worker's prefill chunk is
told: the deployment's chunked_prefill_size // dp (kvplan.engines.scheduler.worker_chunk; sglang 0.5.6.post2
`srt/server_args.py` L1571), not the whole chunk a worker.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from kvplan.bench.case_request import OPTS, case_opts, case_prefill_graph, case_ssm_dtype
from kvplan.core.errors import KvplanError
from kvplan.core.flags import opt_bool
from kvplan.core.releases import release_of
from kvplan.engines import configure
from kvplan.engines.joining import joins_after_prefill
from kvplan.engines.capacity_policy import preempts_on_growth
from kvplan.engines.scheduler import (balance_iters, batch_wait_opts, budget_bound, fetch_lag_steps, limits,
                                      lockstep_mixed, lockstep_workers, mixed_chunk, model_limits, poll_wait_steps,
                                      prefill_first_release, resident_context, runs_waves, shares_budget,
                                      whole_prompt_budget, worker_chunk)
from kvplan.engines.trtllm.bench import BUILD_FRACTION as TRTLLM_BUILD_FRACTION, KV_FRACTION as TRTLLM_KV_FRACTION
from kvplan.engines.trtllm.bench import bench_settings as trtllm_bench_settings
from kvplan.engines.vllm.defaults import ENGINE_CONTEXT, LLM_CLASS
from kvplan.engines.vllm.v0_chunked import server_sized
from kvplan.model.layers import has_mla
from kvplan.planning.deploy import Deployment
from kvplan.planning.request import read_request
from kvplan.speed.cohort import cohort
from kvplan.speed.overlap import ASYNC
from kvplan.speed.corpus import PER_RANK_LIMIT, attention_dp, one_engine_dp
from kvplan.speed.shape import weight_dtype_of

UTILISATION = ("gpu_memory_utilization",)  # vLLM's fraction, a configure() input rather than an option
# the corpus's spellings of an engine's capacity scheduler policy, which sets what a running request counts against
# its pool (kvplan.engines.scheduler.resident_context): TensorRT-LLM's LLM API scheduler_config option, trtllm-bench's
# option, the Triton backend's and NVIDIA's MLPerf harness's runtime flag
POLICY = {"trtllm": ("capacity_scheduler_policy", "scheduler_policy", "batch_scheduler_policy")}
# the flag by which a run states its server's context length, for an engine whose settings read that length and not a
# request's (kvplan.engines.context.engine_length): SGLang's --context-length, its model_config.context_len, which its
# aiter fraction cut and its estimate of max_running_requests read (kvplan.engines.sglang.attention.aiter_cut,
# kvplan.engines.sglang.mamba.max_running; docs/engines.md); vLLM V0's is `server_sized`'s
SERVER_LENGTH = {"sglang": "context_length"}
# benchmark tools that choose the engine's running limit and step tokens themselves where the run states
# neither: tool -> (the engine's option for tokens per step, the function giving (running limit, tokens))
HARNESS_SETTINGS = {"trtllm-bench": ("max_num_tokens", trtllm_bench_settings)}
# vLLM harnesses by the usage context their engine is built under, whose V1 scheduler defaults are that context's, not
# `vllm serve`'s (kvplan.engines.vllm.defaults.USAGE_DEFAULTS). The offline `vllm.LLM` class (LLM_CLASS): `vllm bench
# throughput` / `latency` (v0.10.0 wheel `benchmarks/throughput.py` L43, `latency.py` L90), benchmarks/
# benchmark_latency.py (`llm = LLM(**dataclasses.asdict(engine_args))`, vllm-project/vllm@e43d46b6:main, as
# oracle-blog-2024-10-10-llama31-405b-mi300x.yaml and rocm-blogs-vllm-optimize-2024-10.yaml cite it) and a harness's
# own LLM(...) (`vllm.LLM`). `AsyncLLMEngine.from_engine_args` with no usage context (ENGINE_CONTEXT): AccelMark's
# streaming runners (FreedomIntelligence/AccelMark@3c124bdcd1ecfacba89d2f08a22821ba4b7619d2:
# runners/nvidia_vllm020_0f6c56e4/runner.py load_model, `self.engine = AsyncLLMEngine.from_engine_args(engine_args)`)
USAGE_TOOLS = {"vllm": {**dict.fromkeys(("vllm bench throughput", "vllm bench latency", "benchmark_latency.py",
                                         "vllm.LLM"), LLM_CLASS), "vllm.AsyncLLMEngine": ENGINE_CONTEXT}}
# the KV fraction it was told
HARNESS_FRACTION = ("kv_cache_free_gpu_mem_fraction", "free_gpu_memory_fraction", "kv_cache_free_gpu_memory_fraction")
# coefficient sets whose trtllm-bench runs load a TensorRT engine that `trtllm-bench build` tuned at its own fraction
# (kvplan.engines.trtllm.bench.BUILD_FRACTION), not the run's: releases before 1.0, whose trtllm-bench runs engines
# (its PyTorch path was opt-in; the perf overview pages build with `trtllm-bench build`), and 1.x's TensorRT backend
ENGINE_BUILT = ("trtllm<1.0", "trtllm-engine")
# the share of the memory free after the engine loads that TensorRT-LLM's C++ runtime pools for KV where a run states
# none: KvCacheConfig::kDefaultGpuMemFraction 0.9, by which KVCacheManager::calculateMaxNumBlocks multiplies
# cudaMemGetInfo's free bytes once the engine is loaded (the code index's pre-1.0 copies of cpp/tensorrt_llm/
# batch_manager/kvCacheManager.cpp, file ids 36938158234 and 36927720914, and of its header, 2614816921; no commit
# given); trtllm-bench throughput hands the runtime its --kv_cache_free_gpu_mem_fraction, 0.90 untold (KV_FRACTION)
FREE_SHARE = TRTLLM_KV_FRACTION


class Running(NamedTuple):
    cap: float | None  # requests one replica (one micro-batch of a pipeline) runs at once; None: not sized here
    chunk: int | None  # tokens one prefill step takes; None: not known here
    waves: bool = False  # decodes only when no prefill batch forms (kvplan.engines.scheduler.runs_waves)
    lockstep: int = 1  # data-parallel workers whose forwards run together (kvplan.engines.scheduler.lockstep_workers)
    lock_mixed: bool = False  # their prefill chunks ride in decode steps (kvplan.engines.scheduler.lockstep_mixed)
    recompute: float = 0.0  # prompt prefills a request redoes after a preemption (kvplan.speed.cohort)
    balance: tuple | None = None  # attention-DP balancing's (timeout, batching wait) iterations (case_balance)
    batch_wait: tuple | None = None  # batch waiting's (timeout iterations, max tokens ratio): batch_wait_opts
    poll_wait: float = 0.0  # decode steps an arriving request waits for the scheduler's next poll (case_poll_wait)
    fetch_lag: float = 0.0  # decode steps more it waits, fetched as the step before its own starts (case_fetch_lag)
    packed: bool = False  # a prefill step packs whole prompts up to `chunk`, the server's length (case_packed)
    ssm_dtype: str = ""  # the dtype the engine's state pool holds the recurrent states in (case_ssm_dtype)
    joins_late: bool = False  # a request joins the running batch after its prefill batch (joins_after_prefill)
    prefill_graph: bool = False  # its prefill steps replay a CUDA graph (case_prefill_graph)
    limit: float | None = None  # a running limit, the pool not sized here: the fit's pool binds within it (unsized)
    free_share: float = 0.0  # the share of the memory free after loading that the fit's pool takes (unsized)
    mixed: bool = False  # the step budget takes the running decodes before waiting prompts (sized, shares_budget)
    graph_context: int = 0  # vLLM V0: decode steps within this cached context replay a CUDA graph (case_graph)
    graph_batch: int = 0  # ... of at most this many sequences (case_graph; 0: no limit below the running cap)


V0_CAPTURE_LEN = 8192  # vLLM V0's max_seq_len_to_capture default (engine/arg_utils.py, 0.4.1-0.7.3 sdists)
CAPTURE_NAMES = ("max_seq_len_to_capture", "max_context_len_to_capture")  # the second: its name to 0.4.1
V0_GRAPH_BATCH = ((0, 6, 0), 256)  # releases before it capture batches up to 256 (case_graph)


def case_waves(case, spec=None, v1: bool | None = None) -> bool:
    """Whether the case's engine, with the flags it ran, decodes only when no prefill batch forms (a closed loop of
    equal lengths then runs in waves: kvplan.engines.scheduler.runs_waves, kvplan.speed.load), its release and the
    model `spec` included (vLLM's V0 on an MLA model: kvplan.engines.scheduler.prefill_first_release)."""
    adp = case.dp > 1 and attention_dp(case)
    mla = spec is not None and has_mla(spec.layers)
    return runs_waves(case.engine, mixed_chunk(case.engine, case.flags), adp) or (
        prefill_first_release(case.engine, case.version, mla, v1) and not adp)


def case_packed(case, spec, stated: dict, v1: bool | None = None) -> int | None:
    """The tokens one prefill step of `case` takes where its engine packs whole prompts into a budget of the server's
    max_model_len (kvplan.engines.scheduler.whole_prompt_budget: vLLM's V0 on an MLA model), at the length the run
    stated (`--max-model-len`) or else the model's own, which the server then runs at; None elsewhere, under
    attention DP, or where the run stated the budget (`stated`: its engine options)."""
    if "max_num_batched_tokens" in stated or (case.dp > 1 and attention_dp(case)):
        return None
    mla = has_mla(spec.layers)
    length = served_length(case, spec)
    return whole_prompt_budget(case.engine, case.version, mla, int(length), v1) if length else None


def at_server_length(case, spec, engine):
    """`spec` with max_model_len the context length the case's server ran at, where its engine sizes settings by that
    and not by a request's (SERVER_LENGTH: SGLang's model_config.context_len): the one its run stated
    (`--context-length`), else the length the engine derives for the model (Engine.context_limit: SGLang's
    get_context_length); `spec` as it was for another engine."""
    key = SERVER_LENGTH.get(case.engine)
    if key is None:
        return spec
    stated = (case.flags or {}).get(key)
    return replace(spec, max_model_len=int(stated) if stated else engine.context_limit(spec).default)


def served_length(case, spec):
    """The max_model_len the case's server ran at: the one its run stated (`--max-model-len`), else the model's own."""
    return (case.flags or {}).get("max_model_len") or spec.max_context


def case_lockstep(case, spec) -> int:
    """The data-parallel workers of the case's engine that run each forward together: attention DP's, or the ranks
    of one engine by its own size flag around a MoE model `spec` (kvplan.speed.corpus.one_engine_dp: vLLM's, whose
    DPEngineCoreProc runs only for a MoE model, kvplan.engines.scheduler.LOCKSTEP_DP)."""
    moe = spec is not None and bool(spec.params.num_experts)
    return lockstep_workers(case.engine, case.dp, case.dp > 1 and (attention_dp(case) or (moe and one_engine_dp(case))))


def case_lock_mixed(case) -> bool:
    """Whether the case's lockstep workers carry their prefill chunks inside decode steps, with the flags it ran
    (kvplan.engines.scheduler.lockstep_mixed: vLLM's mixed batches, not SGLang's prefill batches)."""
    return lockstep_mixed(case.engine, mixed_chunk(case.engine, case.flags))


def case_balance(case) -> tuple[int, int] | None:
    """(timeout_iters, batching_wait_iters) where the case's engine, with the flags it ran, holds context requests
    until every attention-DP rank has one (kvplan.engines.scheduler.balance_iters; kvplan.speed.balance), else None."""
    return balance_iters(case.engine, case.flags, case.dp > 1 and attention_dp(case))


def case_poll_wait(case) -> float:
    """Decode steps a request of `case` arriving while its engine decodes waits, with the flags it ran, for the
    scheduler's next poll beyond the default's (kvplan.engines.scheduler.poll_wait_steps: SGLang's
    --scheduler-recv-interval)."""
    return poll_wait_steps(case.engine, case.flags, case.dp > 1 and attention_dp(case))


def case_fetch_lag(case) -> float:
    """Decode steps a request of `case` arriving while its engine decodes waits because the executor fetches new
    requests before the running step ends (kvplan.engines.scheduler.fetch_lag_steps): only on the backend that runs
    that loop, TensorRT-LLM's PyTorch backend (its current era's set: kvplan.speed.eras puts its TensorRT-engine runs
    and releases before 1.0, C++ executors that fetch after each step, in sets of their own). vLLM V1's asynchronous
    schedule has the same lag by its source (fetch_lag_steps gives it), but charging it failed the rule for a cited
    correction on the training CV (all figures +0.07 pt; docs/speed-history.md, "vLLM's async fetch lag"): unpriced."""
    return fetch_lag_steps(case.engine, case.flags, case.pp, case.version, case.date) if case.era == case.engine \
        and case.engine not in ASYNC else 0.0


def running(case, spec, gpu) -> Running | None:
    """The engine's running cap and prefill chunk for a corpus case (kvplan.speed.corpus.Case) on `spec`
    and `gpu`, one replica's, or None where the engine's rules do not take the setting (attention-DP ranks); with
    its attention-DP balancing (`case_balance`), batch waiting (batch_wait_opts), its scheduler's polling wait
    (`case_poll_wait`), its state pool's dtype (`case_ssm_dtype`) and when a request joins its running batch
    (joins_after_prefill) wherever they apply, sized or not (scheduler rules and the pool's type, not memory)."""
    got, held, poll, lag = sized(case, spec, gpu), case_balance(case), case_poll_wait(case), case_fetch_lag(case)
    ssm, late, lock = case_ssm_dtype(case, spec, gpu), joins_after_prefill(case.engine), case_lockstep(case, spec)
    graph, wait = case_prefill_graph(case, spec, gpu), batch_wait_opts(case.engine, case.flags, attention_dp(case))
    if lock > 1:  # lockstep workers, sized or not: how their steps pace each other is the scheduler's
        got = (got or Running(None, None))._replace(lockstep=lock, lock_mixed=case_lock_mixed(case))
    if got is None and only_v0(case):  # V0 by its release, not sized: its graph rule all the same
        got = Running(None, None, **v0_graph(case, spec, True))
    if held is None and not poll and not lag and not ssm and not late and not graph and wait is None:
        return got
    return (got or Running(None, None))._replace(balance=held, poll_wait=poll, fetch_lag=lag, ssm_dtype=ssm,
                                                 joins_late=late, prefill_graph=graph, batch_wait=wait)


def only_v0(case) -> bool:
    """A vLLM run of a release before V1's first (0.8: kvplan.speed.overlap.ASYNC's `first`), which can only have run
    V0 (VLLM_USE_V1 stated aside)."""
    rule, release = ASYNC.get(case.engine or ""), release_of(case.version) if case.version else None
    return rule is not None and release is not None and release < rule.first and \
        not opt_bool(case.flags or {}, "use_v1", False)


def sized(case, spec, gpu) -> Running | None:
    """running()'s cap and chunk, before its attention-DP balancing."""
    load = case.load
    if load.bench != "serve" or case.engine not in OPTS:
        return None
    flags = case.flags or {}
    opts = case_opts(case)
    util = next((flags[k] for k in UTILISATION if flags.get(k) is not None), None)
    policy = next((flags[k] for k in POLICY.get(case.engine, ()) if flags.get(k) is not None), None)
    ranks = case.dp if per_rank(case) else 1  # attention-DP ranks: the deployment with them, by the engine's rules
    tool = harness_limits(case, spec, gpu, case.tp * ranks) if case.dp == ranks else None
    if tool is not None:  # the tool's step tokens are what the engine's memory plan is made at
        opts[HARNESS_SETTINGS[case.harness][0]] = tool[1]
    # outside the try: a policy the engine does not have is the corpus's error, not a setting to price plainly
    context = max(1, int(resident_context(case.engine, case.version, load.isl, load.osl, policy,
                                          load.out_cv2 if load.drawn else None)))
    try:
        engine, _ = configure(case.engine, case.version, opts, util, usage_context=usage_context(case))
        dep = engine.deployment(Deployment(tp=case.tp, pp=case.pp, dp=ranks, ep=case.ep))
        spec = at_server_length(case, spec, engine)  # SGLang's context_len: the server's, not the request's
        req = read_request(spec, context=context, kv_dtype=case.kv_dtype or "auto",
                           weight_dtype=weight_dtype_of(case.weight_dtype))
        st = engine.settings(spec, gpu, dep, req)  # its engine: V1, or V0 by release or fallback (vllm.v0_fallback)
        if server_sized(case.engine, case.version, getattr(st, "v1", None)):  # V0's step budget: the server's length
            served = spec.max_model_len or served_length(case, spec)
            spec = replace(spec, max_model_len=int(served))
            st = engine.settings(spec, gpu, dep, req)
        own = model_own(case, spec, st)
        if own is not None:
            return own
        if case.dp > ranks and attention_dp(case):  # DP ranks of one engine: not sized here; one worker's prefill
            # chunk told (kvplan.engines.scheduler.worker_chunk; their lockstep: running())
            chunk = worker_chunk(case.engine, limits(case.engine, st.as_dict() if st is not None else {})[1], case.dp,
                                 case.version)
            return Running(None, chunk) if chunk else None
        res = engine.result(spec, gpu, dep, req)
        default, chunk = limits(case.engine, res.settings, res.capacity)  # refuses chunked prefill off (SGLang's -1)
    except KvplanError:
        return unsized(case, tool)
    cap = res.capacity  # a dp rank's, per micro-batch: its admission, else what decoding requests hold, else printed
    held = next(x for x in (cap.admitted, cap.resident, cap.max_concurrency) if x is not None) / case.pp
    if held < 1:  # not one request fits: kvplan's view of the checkpoint is not what ran (the plain estimate)
        return None
    default = tool[0] if tool is not None else default
    limit = min(x for x in (case.max_seqs, default, float("inf")) if x)  # a running limit the run stated binds
    if limit == float("inf") or not chunk:
        return None
    bound = budget_bound(case.engine, chunk, load.isl, load.osl)  # what its step budget keeps fed, where it mixes
    limit = limit if bound is None else min(limit, bound)
    cap, redo = float(min(held, limit)), 0.0
    n = cohort_size(case, limit)
    if n is not None and preempts_on_growth(case.engine):  # equal lengths run together: their cycle at the pool's edge
        mean, redo = cohort(held * context, n, load.isl, load.osl)
        cap = min(cap, mean) if redo else cap  # (n, 0): nothing preempted, the cap as it was
    v1 = getattr(st, "v1", None)  # vLLM's engine for this run (None: another engine's settings)
    whole, waves = case_packed(case, spec, opts, v1), case_waves(case, spec, v1)  # V0's budget: the server's length
    # decodes first in the step budget (shares_budget), not in V0's packed or unchunked prefill steps, nor in waves
    mixed = shares_budget(case.engine) and not (whole or waves or (v1 is False and not st.v0_chunked))
    return Running(cap, whole or chunk, waves, recompute=redo, packed=bool(whole), mixed=mixed,
                   **v0_graph(case, spec, v1 is False))


def v0_graph(case, spec, v0: bool) -> dict:
    """Running's graph_context and graph_batch for a run: case_graph's where it ran V0, else none (0, 0)."""
    return dict(zip(("graph_context", "graph_batch"), case_graph(case, spec) if v0 else (0, 0)))


def case_graph(case, spec) -> tuple[int, int]:
    """(the cached context past which a vLLM V0 decode step runs eagerly, the largest batch it replays; 0: none past the
    running cap). The context: max_seq_len_to_capture as the run states it (0 too; `max_context_len_to_capture`, its
    name to 0.4.1, an alias after, refused by 0.6.3's ModelConfig), else V0's default 8,192, within the server's length
    (V0 `config.py` ModelConfig: min(max_seq_len_to_capture, max_model_len)). The batch: `_use_captured_graph` also
    needs batch_size <= the largest captured, 256 up to 0.5.x (_BATCH_SIZES_TO_CAPTURE[-1], [1, 2, 4] + 8 x 1..32: vllm
    0.4.1 sdist vllm/worker/model_runner.py L37-39, L480-484; 0.5.5 L64-66, L632-636), from 0.6.0 max_num_seqs padded up
    to a captured size (`max_batchsize_to_capture`, _get_max_graph_batch_size: 0.6.0 L669, 0.6.3 L717-726, L985;
    compilation_config.max_capture_size in 0.6.6 / 0.7.x, vllm/config.py L3191-3225 0.6.6, L3368-3402 0.7.3), so never
    below the running cap. An enforce_eager run is not in the corpus (kvplan.speed.corpus skips it)."""
    flags = case.flags or {}
    stated = next((flags[k] for k in CAPTURE_NAMES if flags.get(k) is not None), None)
    context = int(min(int(V0_CAPTURE_LEN if stated is None else stated), spec.max_model_len or float("inf")))
    release = release_of(case.version) if case.version else None
    return context, V0_GRAPH_BATCH[1] if release is not None and release < V0_GRAPH_BATCH[0] else 0


def unsized(case, tool: tuple[int, int] | None) -> Running | None:
    """For a run whose release kvplan's TensorRT-LLM memory rules do not take (era `trtllm<1.0`: they start at 0.20.0),
    what its C++ runtime reads, the pool left to the fit (kvplan.speed.fit.Built): the KV pool is the share of the
    memory free after the engine loads that the run gives it (FREE_SHARE untold), and the running limit the engine's
    max_batch_size where the tool tuned it (`tool`: harness_limits); None for any other era."""
    if case.era != ENGINE_BUILT[0]:
        return None
    share = float(case_opts(case).get("free_gpu_memory_fraction") or FREE_SHARE)
    return Running(None, None, limit=float(tool[0]) if tool else None, free_share=share,
                   mixed=shares_budget(case.engine))  # its step budget takes the running decodes first


def cohort_size(case, limit: float) -> float | None:
    """How many requests of `case` one replica admits together and runs in step (kvplan.speed.cohort): a closed loop's
    concurrency, or a burst's prompts, over the replicas, within the running `limit`, where every request has the same
    lengths (`fixed`) and none is paced by a rate; None otherwise (drawn lengths, an open loop, a run of untold
    size)."""
    load = case.load
    if not load.fixed or (load.rate and load.rate != float("inf")):
        return None
    n = load.concurrency or load.num_prompts
    if load.concurrency and load.num_prompts:
        n = min(load.concurrency, load.num_prompts)
    return min(float(n) / load.dp, limit) if n else None


def per_rank(case) -> bool:
    """Whether `case`'s dp replicas are attention-DP ranks of one engine that runs its running limit on each rank
    (kvplan.speed.corpus.PER_RANK_LIMIT), so running() sizes them (the module's docstring)."""
    return case.dp > 1 and attention_dp(case) and case.engine in PER_RANK_LIMIT


def usage_context(case) -> str | None:
    """vLLM's usage context for a run of a tool USAGE_TOOLS names, whose V1 step tokens and sequences the run does
    not state are that context's (kvplan.engines.vllm.defaults.USAGE_DEFAULTS; a V0 run reads none:
    kvplan.engines.vllm.v0_chunked, nor a release before 0.10.0 here); None for any other tool (`vllm serve`'s)."""
    return USAGE_TOOLS.get(case.engine, {}).get(case.harness)


def harness_limits(case, spec, gpu, tp: int | None = None) -> tuple[int, int] | None:
    """(running limit, tokens a step) the benchmark tool of `case` chooses itself (HARNESS_SETTINGS: trtllm-bench's
    heuristics), or None: another tool, a run that stated either setting, or the tool's own refusal. `tp`: the
    tensor-parallel size the tool is given (every attention-DP rank of one engine; the case's tp where None)."""
    entry = HARNESS_SETTINGS.get(case.harness or "")
    flags = case.flags or {}
    if entry is None or case.max_seqs or flags.get(entry[0]) is not None:
        return None
    fraction = next((float(flags[k]) for k in HARNESS_FRACTION if flags.get(k) is not None), None)
    if case.era in ENGINE_BUILT:
        fraction = TRTLLM_BUILD_FRACTION
    kw = {"fraction": fraction} if fraction else {}
    got = entry[1](spec, gpu.memory_smi_bytes or gpu.memory_usable_bytes, tp=tp or case.tp, pp=case.pp,
                   isl=case.load.isl, osl=case.load.osl, weight_dtype=weight_dtype_of(case.weight_dtype),
                   kv_dtype=case.kv_dtype, **kw)
    return None if got is None else (got[0], got[1])


def model_own(case, spec, settings) -> Running | None:
    """The running limit and chunk an engine sets itself for a model whose pool kvplan's rules for it do not
    size (kvplan.engines.scheduler.model_limits: SGLang's DeepSeek-V4, 256 requests a deployment), one
    data-parallel worker's, under the engine's `settings` for the deployment; None where it sets none or no chunk
    is known. Its pool is not sized, so memory is not checked: the limit binds where the pool holds more (at the
    cookbook's 8k + 1k tokens, kvplan's own compressed-cache estimate holds over 1,000 requests a replica)."""
    own = model_limits(case.engine, case.version, spec.layers, case.dp, case.max_seqs,
                       settings.as_dict() if settings is not None else {})
    if own is None or not own[1]:
        return None
    return Running(float(own[0]), own[1], case_waves(case, spec))  # its lockstep: running()
