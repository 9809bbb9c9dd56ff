"""Which requests an engine's capacity scheduler holds KV for: TensorRT-LLM's capacity scheduler policies
(whether a request's whole output is reserved at admission) and vLLM's preemption of the newest running request.

Split from kvplan.engines.scheduler (round 37, house37) so that file keeps to the scheduler limits; the rules are
unchanged. Read by engines.scheduler's `resident_context`, engines.admission, bench.running and speed.cohort.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.registry import canonical_engine

# TensorRT-LLM's capacity scheduler policies, as runs spell them (the LLM API's scheduler_config
# capacity_scheduler_policy, trtllm-bench's --scheduler_policy, the Triton backend's and NVIDIA's MLPerf harness's
# batch_scheduler_policy), and whether each admits a request only with the KV blocks for its whole output reserved.
# GUARANTEED_NO_EVICT keeps the blocks "needed to drive all in-progress requests to completion" and admits a new
# request only if its own blocks to completion (prompt + max new tokens) fit beside them (NVIDIA/TensorRT-LLM@
# 02a10fed0dbf5db74c7da035be9c5fbef6d2df7a:cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp,
# GuaranteedNoEvictScheduler::impl; StaticBatchScheduler derives from it); MAX_UTILIZATION takes blocks as tokens
# arrive and pauses requests when the pool runs out, as vLLM preempts. GUARANTEED_NO_EVICT is the default of:
#   * the LLM API, so trtllm-serve and the PyTorch backend: SchedulerConfig capacity_scheduler_policy
#     (@fcd3f31682808ae56118ae43c1d7864a3a945e6f:tensorrt_llm/llmapi/llm_args.py; the docs' "Useful Runtime Options":
#     "GUARANTEED_NO_EVICT (default)"), handed to the C++ CapacityScheduler by the PyTorch executor
#     (tensorrt_llm/_torch/pyexecutor/_util.py, BindCapacityScheduler(..., scheduler_config.capacity_scheduler_policy));
#   * trtllm-bench throughput, which sets it itself whatever ExecutorSettingsConfig's own default (MAX_UTILIZATION):
#     --scheduler_policy default "guaranteed_no_evict" (@000a01de66f0eab4ab05640711f0253f50f5209c:
#     tensorrt_llm/bench/benchmark/throughput.py), hard-set before that option existed (NVIDIA/TensorRT-LLM#3122,
#     2025-03-27: 0.17.0.post1's trtllm-bench "defaults to Guaranteed_no_evict" with no option to change it);
#   * the Triton backend where batch_scheduler_policy is not given (its model instance's scheduler config starts
#     from kGUARANTEED_NO_EVICT and warns "batch_scheduler_policy parameter was not found").
# NVIDIA's MLPerf harness sets MAX_UTILIZATION
# (mlcommons/inference_results_v5.1@965182b03376a00fcae415c54e560e1c83937932:
# closed/NVIDIA/code/llmlib/config.py DEFAULT_RUNTIME_FLAGS 'batch_scheduler_policy': 'max_util', each config's
# 'batch_scheduler_policy': 'max_util'; v4.1@198fc46799b3328b36ee4bcbdebfa2db5a8e6183: closed/NVIDIA/code/common/
# arguments.py default "max_util"), which its corpus points state (kvplan.bench.running reads the flag).
# A request's max new tokens are its OpenAI max_completion_tokens (trtllm-serve's ChatCompletionRequest field, alias
# max_tokens; tensorrt_llm/serve/openai_protocol.py), or max_seq_len - prompt where it sends none
# (tensorrt_llm/executor/base_worker.py, `_deduce_max_tokens`; both as the code index holds them, 1.x). vllm bench
# serve's openai-chat backend sends the dataset's output length as max_completion_tokens (vllm-project/vllm@
# 02cfb534df5674737558730b10f23d1b7aef9b7c:vllm/benchmarks/lib/endpoint_request_func.py,
# `async_request_openai_chat_completions`), so such a run reserves prompt + output, in whole blocks
# (KVCacheManager::getRemainingBlocksToCompletion, @002ba6a7cc5eb28f180d45d4a91142d9d927a606:
# cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: ceil((prompt + max new tokens) / tokens_per_block) at beam
# width 1, no extra block); the engine sees the prompt after the chat template, a few tokens more than the client
# counts.
# each spelling a run or an option may use, and its name in TensorRT-LLM's CapacitySchedulerPolicy (what the
# simulator's assumption line prints); every policy but MAX_UTILIZATION reserves a request's whole output (NO_EVICT)
POLICY_NAMES = {"guaranteed_no_evict": "GUARANTEED_NO_EVICT", "no_evict": "GUARANTEED_NO_EVICT",
                "static_batch": "STATIC_BATCH", "static": "STATIC_BATCH", "max_utilization": "MAX_UTILIZATION",
                "max_util": "MAX_UTILIZATION"}
NO_EVICT = {key: name != "MAX_UTILIZATION" for key, name in POLICY_NAMES.items()}
DEFAULT_NO_EVICT = frozenset({"trtllm"})  # engines whose default policy is GUARANTEED_NO_EVICT


def reserves_output(engine: str | None, policy: str | None = None) -> bool:
    """Whether `engine` admits a request only with the KV blocks for its prompt and its whole output reserved,
    under its capacity scheduler `policy` as the run stated it (None: the engine's default). A policy the engine
    does not have is refused (a misspelt corpus flag would otherwise price its point at the wrong cap)."""
    if canonical_engine(engine or "") not in DEFAULT_NO_EVICT:
        return False
    return NO_EVICT[policy_key(engine, policy)]


def policy_key(engine: str | None, policy: str | None) -> str:
    """`policy` as NO_EVICT spells it ("guaranteed_no_evict" where the run states none, or an empty string), in
    any casing, with dashes, or as the enum prints it (CapacitySchedulerPolicy.MAX_UTILIZATION); one the engine
    does not have is a one-line error."""
    if policy is None or str(policy).strip() == "":
        return "guaranteed_no_evict"
    key = str(policy).strip().lower().replace("-", "_").removeprefix("capacityschedulerpolicy.")
    if key not in NO_EVICT:
        raise KvplanError(f"{engine}'s capacity scheduler policy {policy!r} is not one of "
                          f"{', '.join(sorted(NO_EVICT))}",
                          EXIT_USAGE)
    return key


# Engines that admit a waiting request on the blocks of the tokens it computes in that step alone and, when a running
# request's next tokens find no free block, preempt the newest running request, dropping its KV to recompute it later:
# vLLM V1's Scheduler.schedule runs its RUNNING requests first and, where `kv_cache_manager.allocate_slots` fails,
# pops the last of `self.running` (FCFS: the newest admitted) and calls `_preempt_request`, which frees its blocks,
# sets num_computed_tokens to 0 and prepends it to the waiting queue (the request keeps its output tokens); no waiting
# request is admitted in a step that preempted (`if not preempted_reqs`), and a resumed request prefills its prompt
# and its outputs so far (`num_new_tokens = request.num_tokens - num_computed_tokens`, "to consider the resumed
# requests, which have output tokens") (vllm-project/vllm@00024d314514900f361ad072af6931e403b7f589:
# vllm/v1/core/sched/scheduler.py, `schedule` and `_preempt_request`). vLLM's V0 engine (the default before 0.8) is
# not read here: assumed the same (recompute, its default for a one-sequence request). A lockstep cohort on such an
# engine is priced by kvplan.speed.cohort. SGLang (which reserves part of a request's output at admission and
# retracts) and TensorRT-LLM (whose default policy reserves the whole output: `reserves_output`) are not in it.
PREEMPTS_NEWEST = frozenset({"vllm"})


def preempts_on_growth(engine: str | None) -> bool:
    """Whether `engine` admits requests on their prompts and preempts the newest running one, by recompute, when the
    running requests' growth fills its pool (PREEMPTS_NEWEST): what a cohort of equal lengths run together meets at
    the end of its outputs where the pool holds its prompts but not their whole outputs (kvplan.speed.cohort)."""
    return canonical_engine(engine or "") in PREEMPTS_NEWEST
