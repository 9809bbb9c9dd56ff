"""SGLang's admission reservation: how many tokens of its KV pool one running request counts for when the
scheduler decides whether a waiting request fits (what kvplan.engines.scheduler.resident_context gives for SGLang).

Read from the releases the speed corpus holds (PyPI wheels / sdist of sgl-project/sglang, tags v0.5.1.post3, v0.5.3,
v0.5.6.post2, v0.5.9, v0.5.13.post1, v0.5.16; restated, not copied; line numbers are v0.5.9's unless named):

* `srt/managers/schedule_policy.py` PrefillAdder: the room left is the pool's free and evictable tokens less, for
  every running request, min(max_new_tokens - tokens output so far, CLIP_MAX_NEW_TOKENS) x new_token_ratio
  (`_get_running_request_total_token_offset`, L439-446; v0.5.16 L556-563; v0.5.1.post3 L303-312 inline), and, for each
  request admitted in the same prefill batch, its prompt plus min(max_new_tokens, CLIP) in full
  (`_update_prefill_budget` L510-516); a waiting request is admitted while its prompt plus min(max_new_tokens, CLIP)
  is below that room (`add_one_req` L744-752). CLIP_MAX_NEW_TOKENS = SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, 4096.
* `srt/managers/scheduler.py` L811-823 (v0.5.13.post1 on: `scheduler_components/new_token_ratio_tracker.py`): the
  ratio starts at init = min(SGLANG_INIT_NEW_TOKEN_RATIO x schedule_conservativeness, 1), its floor is init x
  SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, and each decode step that retracts nothing lowers it by (init - floor) /
  SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS (L2257-2260); a retraction sets it to (tokens decoded + 20 x running) / total
  max_new_tokens (+ 1), at most 1 (`schedule_batch.py` `retract_decode` L1894-1903, SGLANG_RETRACT_DECODE_STEPS 20,
  `environ.py` L228); an idle scheduler resets it to init (`scheduler_runtime_checker_mixin.py` L334; v0.5.16
  scheduler.py L3675). Defaults 0.7, 0.14, 600, 4096 in every release read (v0.5.1.post3 and v0.5.3
  `global_config.py` L24-31, later `srt/environ.py`: v0.5.9 L225-229, v0.5.16 L356-360); --schedule-conservativeness
  1.0 (`server_args.py`).
* `get_next_batch_to_run` runs a prefill batch whenever one can be formed and decodes only otherwise ("Run
  prefill first if possible", L1936; v0.5.16 L2797).

So a benchmark run, which starts from an idle server, admits its first wave in back-to-back prefill batches before
any decode step lowers the ratio: each admitted request counts its prompt plus 0.7 x min(output, 4096) against the
pool. That first wave is what a burst's and a closed loop's start are, and kvplan prices one running batch per run:
`reserved_context` is that wave's count. Later admissions see the ratio lowered by about 0.001 a decode step toward
0.098, so a long run's staggered steady state holds more (up to the pool over prompt + 0.549 x output at the floor);
resident_context does not model that (it needs the run's length in decode steps, which it is not told); the
simulator does, step by step (kvplan.engines.admission, kvplan.simulator.admit).
Not read here: the radix cache disabled with ignore_eos requests (`add_one_req_ignore_eos`, ratio 1.0 for them),
a stated --schedule-conservativeness or the environment variables.
"""

from __future__ import annotations

INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the floor is init x this
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: decode steps from init to the floor
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS: decode steps a retraction's new ratio allows each request
SCHEDULE_CONSERVATIVENESS = 1.0  # --schedule-conservativeness
# Under DP attention SGLang scales --schedule-conservativeness by 0.3 (so new_token_ratio starts at 0.21) and gives each
# attention-DP worker chunked_prefill_size // dp_size (sglang 0.4.6.post5 `srt/server_args.py` L327-334, 0.5.15
# L4899-4902, 0.5.23 `srt/arg_groups/parallel_hook.py` L314-332, "to avoid MoE kernel issues"; every release between
# read the same way: kvplan.engines.scheduler.limits divides the chunk). Before 0.4.4.post1 the same 0.3, but the
# chunk halved, not divided by dp_size (0.4.3.post2 L253-257: kvplan.engines.sglang.defaults.dp_chunk_divisor).
DP_ATTENTION_CONSERVATIVENESS = 0.3


def initial_ratio(conservativeness: float = SCHEDULE_CONSERVATIVENESS) -> float:
    """new_token_ratio as a run from an idle scheduler starts: min(0.7 x conservativeness, 1)."""
    return min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)


def reserved_context(isl: float, osl: float, conservativeness: float = SCHEDULE_CONSERVATIVENESS) -> float:
    """Tokens one request of a run's first wave counts against SGLang's pool at admission: its prompt of `isl`
    tokens plus the initial ratio of its `osl` output tokens, clipped at CLIP_MAX_NEW_TOKENS."""
    return max(1.0, isl + initial_ratio(conservativeness) * min(max(0.0, osl), CLIP_MAX_NEW_TOKENS))


def floor_ratio(conservativeness: float = SCHEDULE_CONSERVATIVENESS) -> float:
    """new_token_ratio's floor, which 600 decode steps without a retraction bring it to: init x 0.14 (0.098)."""
    return min(initial_ratio(conservativeness) * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)


def steady_context(isl: float, osl: float, out_cv2: float,
                   conservativeness: float = SCHEDULE_CONSERVATIVENESS) -> float:
    """Tokens one running request counts against SGLang's pool in the staggered steady state of a run whose output
    lengths are drawn per request with squared coefficient of variation `out_cv2`: a running request that has
    generated g of its o tokens counts its prompt, its g tokens and new_token_ratio x min(o - g, CLIP) (the
    PrefillAdder's offset, module docstring). Requests finish apart, so no retraction resets the ratio (each count
    holds at least the tokens the request holds) and it settles at its floor (floor_ratio); over the running set,
    length-biased (a request stays in proportion to o: mean output o_b = osl (1 + cv^2)) with g uniform on
    [0, o], E[g] = E[o - g] = o_b / 2: isl + o_b / 2 + floor x min(o_b / 2, CLIP)."""
    half = osl * (1 + max(0.0, out_cv2)) / 2
    return max(1.0, isl + half + floor_ratio(conservativeness) * min(half, CLIP_MAX_NEW_TOKENS))
