"""Each engine's admission rule, as the simulator (kvplan.simulator.engine) applies it step by step.

The speed corpus prices one steady running batch per run by the same rules (kvplan.engines.scheduler.
resident_context); this module gives the simulator the rule itself, one `Admission` per engine and policy:

* `ON_DEMAND` (vLLM, kvplan's own rules, llama.cpp, transformers; TensorRT-LLM under MAX_UTILIZATION): a waiting
  request is admitted while the pool holds its first chunk's pages; pages are taken as tokens arrive, and when they
  run out the newest running request is preempted and recomputed later (vLLM v1's scheduler; TensorRT-LLM's
  MaxUtilizationScheduler pauses the last started request the same way, NVIDIA/TensorRT-LLM@
  02a10fed0dbf5db74c7da035be9c5fbef6d2df7a:cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp).
* `RESERVE_OUTPUT` (TensorRT-LLM's default GUARANTEED_NO_EVICT, kvplan.engines.capacity_policy.reserves_output): a
  request is admitted only if the blocks it needs to completion, ceil((prompt + max new tokens) / tokens per
  block), fit in the free blocks less every running request's blocks still to come (GuaranteedNoEvictScheduler::impl
  at 02a10fed: in-progress requests first `decrementReservedBlocks`, then pending ones while `enoughAvailableBlocks`,
  the first that does not fit ending the pass; both through NoEvictScheduledBlocksManager, @ca64fd93be51dc8dae7e87fd
  7018976517acd586:cpp/tensorrt_llm/batch_manager/scheduledBlocksManager.cpp). A running request's blocks still to
  come are its total ceil((prompt + max new tokens) / block) less those already allocated to it
  (KVCacheManager::getRemainingBlocksToCompletion, @b35ac1b64368513d215c57d2ed01d62d910df8da:cpp/tensorrt_llm/
  batch_manager/kvCacheManager.cpp), so allocated and reserved blocks together are its whole total from admission to
  the end: nothing is ever preempted. Blocks shared through block reuse are counted once among the running (each
  holds them, allocated); a pending request has no sequence yet (`mSequences` does not hold it), so it needs its
  whole total free, the blocks it would reuse from another request included. Under STATIC_BATCH (the same impl,
  StaticBatchScheduling true) pending requests are tried only when no request is generating
  (`scheduledRequests.size() == 0` after the in-progress pass). Not modelled: a sliding window's one extra block
  (getRemainingBlocksToCompletion's numExtraBlocksPerBeam), `beneficialToSkip` (a request held back a step to reuse a
  block another context request is writing), and, under MAX_UTILIZATION, a first context chunk needing its whole
  prompt's blocks (getNeededBlocksOneStep @b35ac1b6: min(prompt, window + mMaxNewTokens)) where vLLM's rule takes the
  first chunk's pages: the two differ only for a prompt longer than a step's token budget.
* `NEW_TOKEN_RATIO` (SGLang; kvplan.engines.sglang.admission for the source, release by release): each running
  request counts its tokens plus min(remaining output, 4096) x new_token_ratio, a request admitted in the same
  prefill batch its prompt plus min(output, 4096) in full; a request is admitted while its prompt plus
  min(output, 4096) is below what is free (and evictable) less those counts. The ratio starts at 0.7, falls by
  (0.7 - 0.098) / 600 a decode step that retracts nothing down to 0.098, and a retraction sets it to
  (tokens decoded + 20 x running) / (max new tokens of the running + 1), at most 1; an idle scheduler resets it to
  0.7. A refused admission (NO_TOKEN) marks the batch full, and no admission is tried again until the batch
  shrinks (a request leaves or is retracted). Out of memory in decode, SGLang retracts the running request with
  the fewest output tokens (the longest prompt among equals), keeping at least one, until the next decode step
  fits, and queues it at the back (FCFS keeps the queue's order). Lines per release read (sdists of sglang;
  `managers/`):
    - v0.5.9: `schedule_batch.py` retract_decode L1847-1905 (order L1858-1865, loop on check_decode_mem L1869-1881,
      ratio L1894-1903); `scheduler.py` NO_TOKEN sets batch_is_full L2106-2113, the prefill pass skipped while it is
      set L1990-1993, cleared when the batch shrinks L1910, L2209, L2263; decay L2256-2260; the retracted request
      appended to the queue L1686;
    - v0.5.3: retract_decode L1504 (order L1514-1520, loop on check_decode_mem L1523, ratio L1563-1566);
      `scheduler.py` L1912, L1821, L1766 / L1997 / L2031, decay L2026, queue L1469;
    - v0.5.1.post3: the same order (L1407-1413) and ratio (L1514-1517), but retraction goes on until 20 decode
      tokens per remaining request are free (L1424-1442; not modelled: the simulator stops when the next step fits,
      as 0.5.3 on); `scheduler.py` L1655, L1577, L1521 / L1728 / L1756, decay L1751, queue L1296.
    - v0.5.10.post1 (the last sdist on PyPI; sha256 01f7adfe...): the same order (`schedule_batch.py` L1961-1968),
      loop (L1972-1984) and ratio with + 1 (L2008-2017; v0.5.3 and v0.5.1.post3 divide by the max new tokens alone),
      but the last request is aborted where even it does not fit (L1987-2003; 0.5.9 raises); `scheduler.py` NO_TOKEN
      L2457-2464, skipped L2340-2343, cleared L2227, L2553, L2618, decay L2611-2615, queue L1943; the same-batch count
      gains one page (`schedule_policy.py` L518-527, page_overhead; one token at SGLang's default page).
  Later releases (kvplan models SGLang to 0.5.23) were not re-read for the retraction and batch_is_full paths; their
  ratio constants are sglang/admission.py's, read to v0.5.16.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.neutral import NeutralEngine
from kvplan.engines.registry import canonical_engine
from kvplan.engines.capacity_policy import DEFAULT_NO_EVICT, NO_EVICT, POLICY_NAMES, policy_key
from kvplan.engines.sglang import admission as sglang_admission

ON_DEMAND_RULE = "on_demand"
RESERVE_RULE = "reserve_output"
RATIO_RULE = "new_token_ratio"
# the engine option that names TensorRT-LLM's capacity scheduler policy (its LLM API's scheduler_config field)
POLICY_OPTION = "capacity_scheduler_policy"


@dataclass(frozen=True)
class Admission:
    """How an engine admits waiting requests and frees memory when it runs out: `rule` (ON_DEMAND_RULE,
    RESERVE_RULE, RATIO_RULE), a line that says so (`said`), and the new_token_ratio's constants (RATIO_RULE)."""

    rule: str
    said: str
    init_ratio: float = 0.0
    min_ratio: float = 0.0
    decay_steps: int = 0
    clip: int = 0
    retract_steps: int = 0
    static: bool = False  # RESERVE_RULE under STATIC_BATCH: admissions only while no request is generating

    @property
    def decay(self) -> float:
        """What each decode step without a retraction takes off the ratio."""
        return (self.init_ratio - self.min_ratio) / self.decay_steps if self.decay_steps else 0.0


ON_DEMAND = Admission(ON_DEMAND_RULE, "admission as vLLM's scheduler: a request is admitted while the pool holds its "
                      "first chunk's pages, pages are taken as tokens arrive, and when they run out the newest running "
                      "request is preempted and recomputed later")


def _sglang(attention_dp: int = 1) -> Admission:
    """SGLang's rule; under DP attention (`attention_dp` workers > 1) at its scaled conservativeness."""
    init = sglang_admission.initial_ratio(sglang_admission.SCHEDULE_CONSERVATIVENESS *
                                          (sglang_admission.DP_ATTENTION_CONSERVATIVENESS if attention_dp > 1 else 1.0))
    low = min(init * sglang_admission.MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
    clip, steps = sglang_admission.CLIP_MAX_NEW_TOKENS, sglang_admission.NEW_TOKEN_RATIO_DECAY_STEPS
    return Admission(
        RATIO_RULE,
        f"admission as SGLang's PrefillAdder: each running request counts its tokens plus min(remaining output, "
        f"{clip:,}) x new_token_ratio ({init:g} at the start, {(init - low) / steps:.4f} lower each decode step "
        f"down to {low:.3f}, reset by a retraction); a refused admission waits for a request to finish; out of "
        f"memory, the request with the fewest output tokens is retracted and queued at the back (recomputed)",
        init_ratio=init, min_ratio=low, decay_steps=steps, clip=clip,
        retract_steps=sglang_admission.RETRACT_DECODE_STEPS)


def policy_opts(engine: str | None, policy: str | None) -> dict:
    """The engine options that carry a capacity scheduler `policy` a benchmark file states ({} where `engine` has no
    such option or the file states none), for check-bench to simulate the run's own admission."""
    if not policy or not engine or engine == NeutralEngine.name or canonical_engine(engine) not in DEFAULT_NO_EVICT:
        return {}
    return {POLICY_OPTION: policy}


def admission(engine: str | None, opts: dict | None = None, attention_dp: int = 1) -> Admission:
    """The admission rule of `engine` (a name; None or kvplan's own rules: vLLM's) under its options `opts`
    (TensorRT-LLM's POLICY_OPTION, e.g. MAX_UTILIZATION; a policy it does not have is a one-line error), for one of
    its `attention_dp` attention-DP workers (SGLang's conservativeness under DP attention)."""
    name = canonical_engine(engine) if engine and engine != NeutralEngine.name else ""
    if name == "sglang":
        return _sglang(attention_dp)
    if name in DEFAULT_NO_EVICT:
        policy = (opts or {}).get(POLICY_OPTION)
        key = policy_key(name, policy)  # a policy TensorRT-LLM does not have is refused here
        named = POLICY_NAMES[key] + (" (its default)" if policy is None or not str(policy).strip() else "")
        if POLICY_NAMES[key] == "STATIC_BATCH":
            return Admission(RESERVE_RULE, f"admission as TensorRT-LLM's capacity scheduler policy {named}: "
                             "requests are admitted only while none is generating, each when the blocks for its "
                             "prompt and its whole output fit beside the others'; nothing is preempted", static=True)
        if NO_EVICT[key]:
            return Admission(RESERVE_RULE, f"admission as TensorRT-LLM's capacity scheduler policy {named}: a "
                             "request is admitted only when the blocks for its prompt and its whole output fit beside "
                             "every running request's blocks to completion; nothing is preempted")
        return Admission(ON_DEMAND_RULE, f"admission as TensorRT-LLM's capacity scheduler policy {named}: blocks are "
                         "taken as tokens arrive and the newest running request is paused (recomputed later) when they "
                         "run out, as vLLM preempts")
    return ON_DEMAND
