"""The scheduler limits an engine runs with: how many requests at once and how many tokens one step takes.

Read from the settings an engine's rules produce (EngineResult.settings), so a release's or a GPU's default
(vLLM's `max_num_seqs` / `max_num_batched_tokens` tiers, SGLang's `chunked_prefill_size` by memory,
TensorRT-LLM's `max_num_tokens`) is the one the engine module already cites. Where the settings carry no
running limit, the engine's documented default stands: SGLang sizes its request pool at
min(max(tokens / context x 512, 2048), 4096) requests (sgl-project/sglang python/sglang/srt/model_executor/
model_runner.py, init_memory_pool), read here as its ceiling 4,096; TensorRT-LLM's `max_batch_size` as
2,048, trtllm-build's and trtllm-serve's default (NVIDIA/TensorRT-LLM@00209af149e7774406881a37283dce303571eb11:
tensorrt_llm/commands/serve.py, `get_llm_args`: BuildConfig's max_batch_size 2048 and max_num_tokens 8192, max_seq_len
from the model, KV fraction 0.9, GUARANTEED_NO_EVICT). That function also passes a DynamicBatchConfig with batch size
tuning on, but the PyTorch backend's capacity scheduler does not read it: it is built from
max_batch_size x pp, the KV cache manager and the policy alone (tensorrt_llm/_torch/pyexecutor/_util.py,
`create_py_executor_instance`: BindCapacityScheduler), so no tuned batch size caps a served run below its KV pool.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.capacity_policy import reserves_output
from kvplan.engines.options import opt_bool
from kvplan.speed.overlap import ASYNC, overlaps_host
from kvplan.engines.registry import canonical_engine
from kvplan.engines.sglang import admission as sglang_admission
from kvplan.engines.sglang import defaults as sglang_defaults
from kvplan.engines.sglang import dsv4 as sglang_dsv4
from kvplan.engines.versions import parse_version

RUNNING_KEYS = ("max_num_seqs", "max_running_requests", "max_batch_size")
CHUNK_KEYS = ("max_num_batched_tokens", "chunked_prefill_size", "max_num_tokens")
DEFAULT_RUNNING = {"sglang": 4096, "trtllm": 2048}
# Each engine's own option for (requests running at once, tokens per step), where its memory rules read one:
# vLLM's profile run sizes its sampler by max_num_seqs and its forward by max_num_batched_tokens; SGLang's
# request pool by max_running_requests and its chunk by chunked_prefill_size; TensorRT-LLM's activations by
# max_num_tokens (its max_batch_size is not one of kvplan's TensorRT-LLM options).
OWN_KEYS = {"vllm": ("max_num_seqs", "max_num_batched_tokens"),
            "sglang": ("max_running_requests", "chunked_prefill_size"), "trtllm": (None, "max_num_tokens")}


# Engines whose step budget (tokens per step) holds the running requests' decode tokens beside the prefill chunks:
# vLLM's v1 scheduler schedules the RUNNING requests first (one token each in decode, the rest of a chunked
# prompt) and admits WAITING ones with what is left of max_num_batched_tokens (vllm-project/vllm@v0.11.0
# vllm/v1/core/sched/scheduler.py, Scheduler.schedule). So a steady state cannot run more requests than the
# budget keeps fed: `budget_bound`. TensorRT-LLM's micro-batch scheduler does the same with max_num_tokens: it takes
# the generation requests first, each beam width + draft tokens of the budget, and chunks the context requests into
# what is left (maxNumTokens - batchNumTokens), in the same forward (NVIDIA/TensorRT-LLM@
# b8b7b782622c5dc57307f42ea96628f66b34f922:cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp,
# MicroBatchScheduler::operator(); the TensorRT engines' executor and the PyTorch backend alike). SGLang runs its
# prefill batches apart from its decode batches by default (--enable-mixed-chunk off), so its running requests are
# not bounded so.
MIXED_BUDGET = frozenset({"vllm", "trtllm"})


def shares_budget(engine: str | None) -> bool:
    """Whether `engine`'s step budget takes its running requests' decode tokens before any waiting prompt's
    (MIXED_BUDGET): a burst's first-wave prompts then share each step with the wave's earlier requests' decodes
    (kvplan.speed.wave.shared_wave)."""
    return canonical_engine(engine or "") in MIXED_BUDGET


# Engines that decode only when no prefill batch forms: SGLang's scheduler builds a prefill batch first and runs it
# whenever one forms ("Run prefill first if possible"), decoding the running batch only otherwise, and a decode
# batch rides a prefill batch only with --enable-mixed-chunk, off by default (sglang 0.5.15 wheel,
# srt/managers/scheduler.py `get_next_batch_to_run` L2683-2709, `is_mixed_chunk` L1018-1021, the mix L2992-3004;
# srt/server_args.py `enable_mixed_chunk` default False). So a closed loop whose requests all have the same lengths
# runs in waves: a wave's requests start decoding together after its last prefill and finish in the same step, and
# the next wave of waiting requests is prefilled before anyone decodes again (kvplan.speed.load: `waves`).
PREFILL_FIRST = frozenset({"sglang"})


# Each PREFILL_FIRST engine's option that lets a decode batch ride its prefill batches (SGLang's
# --enable-mixed-chunk: `is_mixed_chunk` needs it and chunked prefill on, 0.5.15 scheduler.py L1018-1021).
MIXED_CHUNK_OPTS = {"sglang": "enable_mixed_chunk"}


def mixed_chunk(engine: str | None, opts) -> bool:
    """Whether `engine`'s options `opts` ({key: value}) turn its mixed chunks on (MIXED_CHUNK_OPTS; off by default)."""
    key = MIXED_CHUNK_OPTS.get(canonical_engine(engine) if engine else "")
    return key is not None and opt_bool(dict(opts or {}), key, False)


def prefill_first(engine: str | None, mixed: bool = False) -> bool:
    """Whether `engine` runs a prefill batch whenever one forms and decodes no one in it (PREFILL_FIRST, without
    mixed chunks): what the simulator's steps do for it (kvplan.simulator.prefill_first)."""
    return bool(engine) and canonical_engine(engine) in PREFILL_FIRST and not mixed


# Engine releases that run prefills first whatever PREFILL_FIRST says of the current ones, (engine, first release
# whose default engine does not): vLLM's V0 without chunked prefill runs `_schedule_default`, which schedules no decode
# in a step that prefills ("Don't schedule decodes if prefills are scheduled", `core/scheduler.py` 0.7.3 L1204-1246,
# 0.8.5 L1255, 0.10.1 L1252; `_schedule` L1440-1443, 0.8.5 L1455-1460, 0.10.1 L1466-1471). V0 is the default before
# 0.8.0, and 0.8.0-0.10.x run it where their oracle falls back (kvplan.engines.vllm.v0_fallback; `v1` below). Read
# only for an MLA model, whose chunked prefill V0 forces off (0.7.x `config.py` L3327-3331) or leaves off by default
# (vllm#12639: `engine/arg_utils.py` 0.8.0 L1611-1614, 0.10.1 L1529); another model's follows v0_chunked (on by
# default over 32K, by release; the step budget is the server's: server_sized), and is not read as prefill-first.
PREFILL_FIRST_BEFORE = {"vllm": (0, 8, 0)}


def prefill_first_release(engine: str | None, version: str | None, mla: bool, v1: bool | None = None) -> bool:
    """Whether `engine` at `version` decodes only when no prefill batch forms for a model with (`mla`) or without MLA
    attention (PREFILL_FIRST_BEFORE); no version: its current release, not such. `v1`: the run is on vLLM's V1 (None:
    by release; False: a 0.8-0.10 run on the V0 fallback)."""
    before = PREFILL_FIRST_BEFORE.get(canonical_engine(engine or "")) if engine else None
    told = before is not None and version is not None
    return mla and told and (parse_version(version) < before if v1 is None else not v1)


# The least step budget of a PREFILL_FIRST_BEFORE release, whose prefill steps pack whole waiting prompts while they
# fit the step's token budget (`_schedule_prefills`, vllm 0.7.3 wheel `core/scheduler.py` L1148-1151 with
# SchedulingBudget.can_schedule L69-75), a budget that defaults, with chunked prefill off, to
# max(max_model_len, 2048) (`config.py` SchedulerConfig.__post_init__ L1533-1536; 0.8.0 L1669-1674, where V0 leaves
# an MLA model's chunked prefill off by default, `engine/arg_utils.py` L1611-1614): the server's max_model_len, so a
# step takes every prompt that fits it, not one. (0.7.1-0.7.3 on CUDA over a 32K max_model_len turned chunked prefill
# on first, left the budget at 2,048 and then forced it off, rejecting longer prompts, `config.py` L3327-3331 and
# `core/scheduler.py` L924-932: vllm#12639, in the nightlies by 2025-02-25, ended that; not priced.)
WHOLE_PROMPT_FLOOR = {"vllm": 2048}


def whole_prompt_budget(engine: str | None, version: str | None, mla: bool, server_len: int,
                        v1: bool | None = None) -> int | None:
    """The tokens one prefill step of `engine` at `version` takes where it packs whole prompts into a budget of the
    server's max_model_len `server_len` (WHOLE_PROMPT_FLOOR: vLLM's V0 on an MLA model, `v1` False), else None."""
    if not prefill_first_release(engine, version, mla, v1):
        return None
    return max(int(server_len), WHOLE_PROMPT_FLOOR[canonical_engine(engine or "")])


def runs_waves(engine: str | None, mixed_chunk: bool = False, attention_dp: bool = False) -> bool:
    """Whether `engine` runs a closed loop of equal lengths in waves (PREFILL_FIRST): not with mixed chunks, and not
    under attention DP, whose workers run every forward together, each exchanging its batch's tokens before the MoE
    (an idle worker runs an idle batch), so one worker's prefill steps pace every worker's decode (sglang 0.5.15
    srt/managers/scheduler_components/dp_attn.py `prepare_mlp_sync_batch_raw` L143-255)."""
    return prefill_first(engine, mixed_chunk) and not attention_dp


# Engines whose attention-DP workers run every forward together: before each forward, SGLang's DP-attention workers
# exchange their batches' token counts and an idle worker runs an idle batch, so that the MoE's dispatch and combine
# see every rank (sglang 0.5.15 srt/managers/scheduler_components/dp_attn.py `prepare_mlp_sync_batch_raw` L143-255,
# called for every batch from `get_next_batch_to_run`, srt/managers/scheduler.py L2714-2716). A step lasts as long as
# its slowest worker's: one worker's prefill step paces the others' decode steps (kvplan.speed.load: `lockstep`).
# vLLM runs a MoE model's data-parallel ranks the same way, with no flag beyond --data-parallel-size: each rank is a
# DPEngineCoreProc (a dense model's ranks are independent engines, "Non-MoE DP ranks are completely independent"),
# whose busy loop runs a dummy batch whenever the rank has nothing scheduled while another has (vllm 0.25.0 wheel
# `v1/engine/core.py` L1189-1200 and `run_busy_loop` L1925-1961; 0.33.0 likewise), and every forward all-reduces the
# ranks' token counts, padding each rank to the largest under CUDA graphs, before the MoE's dispatch among them
# (`v1/worker/dp_utils.py` `coordinate_batch_across_dp` L164-215, `_post_process_dp_padding` L77-89). Its prefill
# chunks ride in decode steps (MIXED_BUDGET), so one rank's chunk lengthens the others' decode steps rather than
# replacing them (`lockstep_mixed`).
LOCKSTEP_DP = frozenset({"sglang", "vllm"})


def lockstep_workers(engine: str | None, dp: int, together: bool) -> int:
    """How many data-parallel workers run each forward together: dp where `together` (the ranks are one engine's
    around a MoE: SGLang's DP attention, vLLM's data-parallel MoE) and the engine is in LOCKSTEP_DP, else 1."""
    return max(1, dp) if together and canonical_engine(engine or "") in LOCKSTEP_DP else 1


def lockstep_mixed(engine: str | None, mixed: bool = False) -> bool:
    """Whether `engine`'s lockstep workers carry a prefill chunk inside a decode step (vLLM's mixed batches), so a
    step in which one worker prefills is a decode step lengthened by its chunk; not where the engine runs prefill
    batches apart (PREFILL_FIRST without mixed chunks: SGLang's), whose workers' prefill steps replace decode steps."""
    return not prefill_first(engine, mixed)


# Engines that can hold context requests back until every attention-DP rank has one, and the run options that turn
# it on and size it: TensorRT-LLM's attention_dp_config (enable_balance, timeout_iters, batching_wait_iters; the
# corpus writes them attention_dp_*). Its PyTorch executor allgathers each rank's scheduled context and generation
# counts every iteration; where some rank has no context request it schedules none on any rank and counts the
# iteration, releasing them when the count reaches timeout_iters (or when a rank has no generation request); where
# every rank has one it resets the count and releases them after batching_wait_iters more iterations (py_executor.py
# `_balance_adp_requests`, as the code index holds it, 1.x; NVIDIA/TensorRT-LLM@
# 011cfc2cc18a24a95603f91dc53f8fc60bc80189:docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md, "Coordinated
# Waiting Mechanism": "Increased TTFT due to strategic waiting"). Off by default; its defaults timeout_iters 50,
# batching_wait_iters 10 (@0004396720054fd8e205cbf616f21f0b57c6b412:tensorrt_llm/llmapi/llm_args.py
# AttentionDpConfig). The wait it adds is priced by kvplan.speed.balance.
ADP_BALANCE = {"trtllm": ("attention_dp_enable_balance", "attention_dp_timeout_iters",
                          "attention_dp_batching_wait_iters", 50, 10)}


def balance_iters(engine: str | None, flags: Mapping, attention_dp: bool) -> tuple[int, int] | None:
    """(timeout_iters, batching_wait_iters) where `engine`, run with `flags` ({key: value}) under attention DP, holds
    context requests until every rank has one (ADP_BALANCE), else None."""
    entry = ADP_BALANCE.get(canonical_engine(engine or ""))
    opts = dict(flags or {})
    nested = opts.get("attention_dp_config")  # the YAML form of extra_llm_api_options, as trtllm-bench's pages write it
    if isinstance(nested, Mapping):
        opts.update({f"attention_dp_{k}": v for k, v in nested.items()})
    if entry is None or not attention_dp or not opt_bool(opts, entry[0], False):
        return None
    timeout, batching = (int(opts[k]) if opts.get(k) is not None else d for k, d in zip(entry[1:3], entry[3:]))
    return timeout, batching


# Engines that can hold context requests back to batch them, and the run options that size it: TensorRT-LLM's
# batch_wait_timeout_iters and batch_wait_max_tokens_ratio (both 0 by default: off; llm_args.py's fields, "the
# scheduler will delay batch processing to gather more requests up to the specified iteration limit", "accumulate
# requests locally until the total token count reaches batch_wait_max_tokens_ratio * max_num_tokens"). Without
# attention DP, on an iteration that has both context and generation requests, its PyTorch executor schedules none of
# the context requests and counts the iteration, until the count reaches timeout_iters or the scheduled context
# requests' prompt tokens plus the generation requests' tokens reach ratio x max_num_tokens; then it releases them all
# and restarts the count (py_executor.py `_schedule` and `_waiting_requests`, as the code index holds it, 1.x;
# `enable_batch_waiting` is timeout_iters > 0 or ratio > 0, and either at 0 releases at once: a count >= 0, tokens >=
# 0). Each held iteration is a decode step of the running batch. The wait it adds is priced by kvplan.speed.balance.
BATCH_WAIT = {"trtllm": ("batch_wait_timeout_iters", "batch_wait_max_tokens_ratio")}


def batch_wait_opts(engine: str | None, flags: Mapping, attention_dp: bool) -> tuple[int, float] | None:
    """(timeout_iters, max_tokens_ratio) where `engine`, run with `flags` ({key: value}) and no attention DP, holds
    context requests back to batch them (BATCH_WAIT: both above 0), else None."""
    keys = BATCH_WAIT.get(canonical_engine(engine or ""))
    if keys is None or attention_dp:
        return None
    timeout, ratio = int((flags or {}).get(keys[0]) or 0), float((flags or {}).get(keys[1]) or 0)
    return (timeout, ratio) if timeout > 0 and ratio > 0 else None

# Engines whose scheduler can be told to poll for new requests only every n-th decode step, and the option that says
# how often: SGLang's --scheduler-recv-interval (default 1). Its SchedulerRecvSkipper adds the last batch's weight to a
# counter each event-loop pass, 1 after a decode (or no batch), 1,000 after any other (a prefill), and receives only
# once the counter reaches the interval (sgl-project/sglang v0.5.12 wheel `srt/managers/scheduler_recv_skipper.py`
# `handle`, weights `srt/environ.py` L229-232 SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*; called first in
# `srt/managers/scheduler.py` `recv_requests` L1661-1666; `server_args.py` L766 scheduler_recv_interval = 1, "Can be set
# to >1 to reduce the overhead of this"). While it decodes, a request that reaches the scheduler waits for the next
# poll, one every n steps: n / 2 steps on average, (n - 1) / 2 more than the default's half step (`poll_wait_steps`).
# Not under DP attention (the skipper asserts it off there). vLLM V0's --num-scheduler-steps n (multi-step
# scheduling, default 1; vllm-project/vllm#7000, merged 2024-08-19, RFC vllm#6854; removed with V0, vllm#22779,
# 2025-08-13) runs n forward steps per scheduler call: LLMEngine.step calls the scheduler only once the cached
# multi-step batch has no remaining steps (`_has_remaining_steps`), so a request that arrives while it decodes waits
# for the block's end, n / 2 steps on average, as the skipper's (AMD's MLPerf v5.1 server configs state 8-10).
POLL_INTERVAL_OPTS = {"sglang": "scheduler_recv_interval", "vllm": "num_scheduler_steps"}


def poll_wait_steps(engine: str | None, flags: Mapping, attention_dp: bool = False) -> float:
    """Decode steps a request arriving while `engine` decodes waits for its scheduler to take it in, beyond the
    default's (POLL_INTERVAL_OPTS): (n - 1) / 2 for a stated interval of n steps; 0 at n = 1, where the engine has no
    such option or under attention DP."""
    key = POLL_INTERVAL_OPTS.get(canonical_engine(engine or ""))
    value = dict(flags or {}).get(key) if key else None
    if value is None or attention_dp:
        return 0.0
    return max(0.0, (int(value) - 1) / 2)


# Engines whose executor schedules step n + 1 before step n ends. TensorRT-LLM's PyTorch backend, on unless
# `disable_overlap_scheduler` (NVIDIA/TensorRT-LLM@9521caf4696c1fb79b0f946f0d980f8f0ebd3e64:tensorrt_llm/_torch/
# pyexecutor/py_executor.py, PyExecutor.__init__ picks `_executor_loop_overlap`, `_executor_loop_pp` where pp_size > 1):
# each pass of that loop fetches (`_fetch_new_requests`), schedules and launches step n + 1 (`_forward_step`), and only
# then ends step n (`_process_previous_batch`: `_update_requests`, `_handle_responses`). vLLM V1 under async
# scheduling (kvplan.speed.overlap): `step_with_batch_queue` schedules and launches n + 1, then blocks on n, and
# `run_busy_loop` reads new requests only between those calls (vllm 0.28.0 sdist vllm/v1/engine/core.py L624-738,
# L1375-1386). Either way the next fetch comes as step n + 1 starts, so a request arriving while the engine decodes
# is taken in one step later than by a loop that fetches after each step, and waits one decode step more before its
# prefill (`fetch_lag_steps`). The overlap's other cost, the step it runs past a request's stop before seeing it
# (TRT-LLM's docs/source/features/overlap-scheduler.md, same commit: "introduces one extra decoding step"), is not
# priced. Pipeline parallelism: not read here (no lag charged). vLLM's lag is not priced: it failed the training-CV
# rule (kvplan.bench.running.case_fetch_lag).
OVERLAP_OFF = {"trtllm": "disable_overlap_scheduler"}


def fetch_lag_steps(engine: str | None, flags: Mapping, pp: int = 1, version: str | None = None,
                    date: str | None = None) -> float:
    """Decode steps a request arriving while `engine` decodes waits beyond a loop that fetches after each step, because
    its executor schedules the next step before the current one ends: 1 for TensorRT-LLM unless the run turns the
    overlap off (OVERLAP_OFF, opt_bool), for vLLM where its release or flag schedules asynchronously
    (kvplan.speed.overlap.overlaps_host of `version` / `date`); 0 at `pp` > 1 and for other engines. The caller applies
    it only to the backend that runs that loop."""
    name, flags = canonical_engine(engine or ""), dict(flags or {})
    if pp > 1:
        return 0.0
    if name in ASYNC:
        return 1.0 if overlaps_host(name, version, flags, pp, date) else 0.0
    key = OVERLAP_OFF.get(name)
    return 0.0 if key is None or opt_bool(flags, key, False) else 1.0


# Engines whose attention-DP workers each take the stated prefill chunk over the workers: SGLang's
# chunked_prefill_size // dp_size under DP attention (kvplan.engines.sglang.admission, DP_ATTENTION_CONSERVATIVENESS's
# citation), // 2 before 0.4.4.post1 (kvplan.engines.sglang.defaults.dp_chunk_divisor); `limits` gives one worker's.
CHUNK_PER_WORKER = frozenset({"sglang"})


def lockstep_of(engine: str | None, settings: Mapping) -> int:
    """lockstep_workers of a plan whose engine settings (EngineResult.settings) name its attention-DP workers
    (`attention_dp`, SGLang's: 1 where DP attention is off) or its data-parallel ranks that step together
    (`dp_lockstep`, vLLM's: a MoE model's ranks, 1 for a dense model's or at dp 1)."""
    workers = int(settings.get("attention_dp") or 1)
    workers = workers if workers > 1 else int(settings.get("dp_lockstep") or 1)
    return lockstep_workers(engine, workers, workers > 1)


def budget_bound(engine: str | None, chunk: int | None, isl: float, osl: float) -> float | None:
    """The most requests `engine` keeps running in a steady state of prompts of `isl` tokens and outputs of `osl`,
    where its step budget of `chunk` tokens holds decode tokens and prefill chunks alike (MIXED_BUDGET): admitting
    r requests a step costs r x isl prompt tokens, and each runs about osl steps, one token a step, so r (isl + osl)
    <= chunk and the running ones number r x osl <= chunk x osl / (isl + osl). None where the engine has no such
    budget or no chunk is known."""
    if canonical_engine(engine or "") not in MIXED_BUDGET or not chunk or osl <= 0:
        return None
    return max(1.0, chunk * osl / (max(0.0, isl) + osl))


def resident_context(engine: str | None, version: str | None, isl: float, osl: float,
                     policy: str | None = None, out_cv2: float | None = None) -> float:
    """Tokens of KV one running request counts against `engine`'s pool in a steady state of prompts of `isl`
    tokens and outputs of `osl`, as its admission accounts for them: what a KV-bound running cap divides the
    pool by (kvplan.bench.running). `policy`: the engine's capacity scheduler policy as the run stated it (None:
    its default). SGLang counts a running request's prompt plus its remaining output times new_token_ratio, and a
    run's first wave is admitted at the ratio's initial 0.7 (kvplan.engines.sglang.admission). An engine that
    takes blocks as tokens arrive (vLLM, TensorRT-LLM under MAX_UTILIZATION) holds the mean resident length,
    isl + osl / 2 (each running request is, on average, half-way through its output); one that reserves each
    request's whole output at admission (TensorRT-LLM's default GUARANTEED_NO_EVICT: `reserves_output`) holds
    isl + osl a request, whatever it has generated so far. No release is known to have changed TensorRT-LLM's
    default (every version read, NO_EVICT's sources, has it), so `version` reads nothing yet.

    `out_cv2`: where output lengths are drawn per request (None: every request the same lengths), their squared
    coefficient of variation cv^2 (kvplan.speed.spread). A request then stays in the running set in proportion to
    its output o, so the running set is length-biased, its mean output E[o^2] / E[o] = osl (1 + cv^2): a paged
    engine holds isl + osl (1 + cv^2) / 2 a request (half-way through a length-biased output), a reserving one
    isl + osl (1 + cv^2); SGLang's staggered steady state (sglang.admission.steady_context) its own count over that
    set. A random range of ratio 0 (cv^2 1/3) under a paged engine: isl + 0.667 osl, not isl + osl / 2."""
    if canonical_engine(engine or "") == "sglang":
        if out_cv2 is not None:
            return sglang_admission.steady_context(isl, osl, out_cv2)
        return sglang_admission.reserved_context(isl, osl)
    held = osl * (1 + max(0.0, out_cv2 or 0.0))  # a running request's mean output, length-biased
    return max(1.0, isl + (held if reserves_output(engine, policy) else held / 2))


def limits(engine: str | None, settings: dict, capacity=None) -> tuple[int | None, int | None]:
    """(requests running at once, tokens per step) as `engine` runs with `settings`; None where not known.
    `capacity` (the engine's Capacity): where it computed a running limit of its own (SGLang's
    max_running_requests under a recurrent-state pool), that limit."""
    running = next((int(settings[k]) for k in RUNNING_KEYS if settings.get(k)), None)
    if capacity is not None and capacity.max_running:
        running = min(running, capacity.max_running) if running else capacity.max_running
    chunk = next((int(settings[k]) for k in CHUNK_KEYS if settings.get(k)), None)
    if chunk is not None and chunk <= 0:
        raise KvplanError(chunk_off_reason(chunk), EXIT_USAGE, param="engine_opts", value=chunk)
    workers = int(settings.get("attention_dp") or 1)
    return running or DEFAULT_RUNNING.get(engine or ""), worker_chunk(engine, chunk, workers, settings.get("version"))


def chunk_off_reason(chunk: int) -> str:
    """Why kvplan's step model refuses a run with chunked prefill off (SGLang's chunked_prefill_size -1,
    kvplan.engines.sglang.defaults.CHUNK_OFF): its prefill steps are chunks of a token budget, the prompt that
    crosses it split; with the chunk off SGLang's PrefillAdder (rem_chunk_tokens None) adds waiting prompts whole
    while they fit what is left of max_prefill_tokens (16,384), the batch's first one even above it ("Without
    chunking, allow the first request even above the input cap", sglang 0.5.23 wheel
    `srt/managers/schedule_policy.py` L1627-1632), and never splits one."""
    return (f"chunked_prefill_size {chunk} turns SGLang's chunked prefill off (whole prompts a prefill step, up to "
            f"max_prefill_tokens 16,384, a longer one alone), which kvplan's step model does not simulate (it "
            f"splits the prompt that crosses the budget): plan memory with it; simulate or price speed at a "
            f"positive chunk")


def worker_chunk(engine: str | None, chunk: int | None, workers: int, version: str | None = None) -> int | None:
    """The prefill chunk one of `workers` attention-DP workers takes where the deployment's is `chunk`, under an
    engine that divides it (CHUNK_PER_WORKER: SGLang's chunked_prefill_size // dp_size, // 2 before 0.4.4.post1:
    kvplan.engines.sglang.defaults.dp_chunk_divisor at `version`, None: the current rule), else chunk."""
    if chunk and workers > 1 and canonical_engine(engine or "") in CHUNK_PER_WORKER:
        return max(1, chunk // sglang_defaults.dp_chunk_divisor(version, workers))
    return chunk


def with_limits(engine: str | None, opts, running: int | None, chunk: int | None) -> list[str]:
    """`opts` (['key=value', ...] or {key: value}) with a simulation's explicit limits added under `engine`'s own
    option names (OWN_KEYS), so the engine's memory plan is made at the limits it is then
    simulated at, as the engine started with those flags would be. A limit the engine's memory rules do not
    read is left to the scheduler alone; the same option given twice with two values is a usage error."""
    items = [f"{k}={v}" for k, v in opts.items()] if isinstance(opts, Mapping) else list(opts or ())
    given = {i.split("=", 1)[0].strip().replace("-", "_"): i.split("=", 1)[1].strip() for i in items if "=" in i}
    own = OWN_KEYS.get(canonical_engine(engine), ()) if engine is not None else ()
    for key, value, name in zip(own, (running, chunk),
                                ("max_num_seqs", "max_num_batched_tokens")):
        if key is None or value is None:
            continue
        if key in given and given[key] != str(value):
            raise KvplanError(f"{arg(name)} {value} and {arg('engine_opts')} {key}={given[key]} disagree: give one",
                              EXIT_USAGE, param=name, value=value)
        if key not in given:
            items.append(f"{key}={value}")
    return items


def model_limits(engine: str | None, version: str | None, layers, dp: int, per_worker: int | None,
                 settings: dict) -> tuple[int, int | None] | None:
    """(requests running at once, tokens per prefill step) of one data-parallel worker of `engine` at `version`
    for a model whose running limit the engine sets itself, whatever its pool holds: SGLang's DeepSeek-V4 (256 a
    deployment from 0.5.15; its pools, sized for 0.5.15-0.5.18, in kvplan.engines.sglang.dsv4), the speed fit's limit
    for every such release, its chunk per DP-attention worker the deployment's
    chunked_prefill_size // dp (0.5.15 `server_args.py` L4899-4902). `per_worker`: a stated limit already
    divided by dp; `settings`: the engine's settings for the deployment. None where the engine has no such rule."""
    if engine is None or canonical_engine(engine) != "sglang":
        return None
    running = sglang_dsv4.running_limit(version, layers, dp, per_worker)
    if running is None:
        return None
    return running, worker_chunk(engine, limits(engine, settings)[1], dp, version)
