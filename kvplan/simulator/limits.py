"""The scheduler limits a simulation runs with, and where each came from: the input given, else the engine's own.

The speed coefficients are fitted at each engine's own running limit and tokens per step (kvplan.bench.running),
so a simulation takes the same: `max_num_seqs` and `max_num_batched_tokens` given (a flag, a keyword) win; left
out (None), they are the engine's, read from its EngineResult by kvplan.engines.scheduler.limits (vLLM's
`max_num_seqs` / `max_num_batched_tokens` by release and GPU, kvplan/engines/vllm/defaults.py; SGLang's
`chunked_prefill_size` and its request pool or computed `max_running_requests`; TensorRT-LLM's `max_num_tokens`
and `max_batch_size`); where the engine states none (kvplan's own engine-neutral rules, llama.cpp,
transformers), the simulator's defaults, 256 and 8,192 (kvplan.simulator.engine.EngineConfig). With them, the
engine's admission rule (kvplan.engines.admission: vLLM's on demand, TensorRT-LLM's GUARANTEED_NO_EVICT unless its
options name MAX_UTILIZATION, SGLang's new_token_ratio), and its steps (kvplan.engines.scheduler.prefill_first:
SGLang's prefill apart from decode unless its options turn mixed chunks on; vLLM's mixed budget else), which `config`
hands the simulator. Data-parallel workers that run each forward together (SGLang's DP attention, vLLM's ranks of a
MoE model: kvplan.engines.scheduler.lockstep_of) are not simulated: one worker's pool and requests are, and a note
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.core.errors import KvplanError, arg
from kvplan.engines.admission import ON_DEMAND, Admission, admission
from kvplan.engines.registry import canonical_engine
from kvplan.engines.scheduler import (CHUNK_KEYS, MIXED_CHUNK_OPTS, RUNNING_KEYS, limits, lockstep_of, mixed_chunk,
                                     prefill_first)
from kvplan.simulator.engine import DEFAULT_MAX_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, EngineConfig

GIVEN = "given"  # a limit's source where the input named it
# the settings keys (kvplan.engines.scheduler) an --engine-opt may set, per limit
OPT_KEYS = {"max_num_seqs": RUNNING_KEYS, "max_num_batched_tokens": CHUNK_KEYS}


@dataclass(frozen=True)
class Limits:
    """The scheduler's two counts a simulation runs with, each with a few words on where it came from."""

    max_num_seqs: int
    max_num_batched_tokens: int
    seqs_from: str  # GIVEN, or e.g. "vllm 0.33.0's default on this GPU", "the simulator's default: ..."
    tokens_from: str
    admission: Admission = field(default=ON_DEMAND)  # how the engine admits requests (paged pool)
    prefill_first: bool = False  # the engine's steps: prefill apart from decode (SGLang's), else one mixed budget
    lockstep: int = 1  # data-parallel workers running each forward together (not simulated: a note says so)
    label: str = ""  # the engine as its notes name it
    mix_opt: str | None = None  # the engine's option that mixes decode into prefill batches (prefill_first engines)
    # the engine's prefix cache as its options leave it (Request.prefix_cache: SGLang's disable_radix_cache turns it
    # off), which the speed figures' MLA prefill form reads too: off, the simulator reuses no prefix either
    prefix_cache: bool = True
    attention_dp: bool = True  # the lockstep workers are attention DP's (SGLang's), else a MoE's DP ranks (vLLM's)

    def config(self, **kw) -> EngineConfig:
        """The simulator's config at these limits, this admission rule and these steps (`kw`: the pool's others;
        prefix caching off where the engine's options turn its cache off, whatever `kw` asks)."""
        if not self.prefix_cache:
            kw["prefix_caching"] = False
        return EngineConfig(max_num_seqs=self.max_num_seqs, max_num_batched_tokens=self.max_num_batched_tokens,
                            admission=self.admission, prefill_first=self.prefill_first, **kw)

    def notes(self) -> list[str]:
        """stderr lines: the counts and why (each names its input, so a person sees how to change it), the steps."""
        return [f"at most {self.max_num_seqs:,} requests running at once ({_said(self.seqs_from, 'max_num_seqs')})",
                f"{self.max_num_batched_tokens:,} tokens a step ({_said(self.tokens_from, 'max_num_batched_tokens')})",
                *self.scheduler_notes(),
                *([] if self.prefix_cache else [f"prefix caching off: {self.label or 'the engine'}'s options turn "
                                                "its prefix cache off, so no request reuses a cached prefix"])]

    def scheduler_notes(self) -> list[str]:
        """What the steps schedule, and (attention DP) what is not simulated."""
        who = self.label or "the engine"
        if self.prefill_first:
            lines = [f"steps as {who} schedules them: a prefill batch (up to the tokens a step) whenever one forms, "
                     "decoding no one; otherwise one decode step of every running request"
                     + (f" ({arg('engine_opts')} {self.mix_opt}=true mixes them)" if self.mix_opt else "")]
        else:
            lines = ["steps mixed, as vLLM's scheduler runs them: each step's token budget holds every running "
                     "request's decode token and prefill chunks beside them"]
        if self.lockstep > 1:
            workers = "attention-DP workers" if self.attention_dp else "data-parallel ranks of a MoE"
            lines.append(f"note: {who}'s {self.lockstep} {workers} run every forward together (one "
                         "worker's prefill paces the others' decode): not simulated; one worker's pool and requests "
                         "are")
        return lines

    def admission_meta(self) -> dict:
        """The admission rule, for --json: its name and the line that says it."""
        return {"admission": {"rule": self.admission.rule, "said": self.admission.said}}

    def meta(self) -> dict:
        """The counts and their sources, for --json."""
        return {"max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
                "scheduler_limits_from": {"max_num_seqs": self.seqs_from,
                                          "max_num_batched_tokens": self.tokens_from},
                "scheduler": {"prefill_first": self.prefill_first, "lockstep_workers": self.lockstep}}


def _said(source: str, name: str) -> str:
    return f"{arg(name)} given" if source == GIVEN else f"{source}; {arg(name)} to change"


def _why(engine, name: str, found: int | None, computed: bool) -> str:
    """Where the engine's figure for limit `name` came from, or the simulator's default's reason."""
    label = getattr(engine, "label", None)
    if not found:
        return "the simulator's default: " + (f"{label} states none" if label else
                                              f"no {arg('engine')}, and kvplan's own rules set none")
    if any(k in (getattr(engine, "opts", None) or {}) for k in OPT_KEYS[name]):
        return f"{label} as {arg('engine_opts')} sets it"
    if computed:
        return f"{label}'s own limit for this KV pool"
    return f"{label}'s default on this GPU"


def scheduler_limits(engine, result=None, max_num_seqs: int | None = None,
                     max_num_batched_tokens: int | None = None) -> Limits:
    """The limits a simulation of `result` (the EngineResult of `engine`, a configured engine; None: the
    engine-neutral plan) runs with: the inputs given, else the engine's own, else the simulator's defaults."""
    name = getattr(engine, "name", None)
    own_seqs, own_tokens = limits(name, result.settings, result.capacity) if result is not None else (None, None)
    cap = result.capacity.max_running if result is not None else None
    computed = bool(cap) and own_seqs == cap  # SGLang's max_running_requests under a recurrent-state pool
    seqs = (max_num_seqs, GIVEN) if max_num_seqs is not None else (
        own_seqs or DEFAULT_MAX_NUM_SEQS, _why(engine, "max_num_seqs", own_seqs, computed))
    tokens = (max_num_batched_tokens, GIVEN) if max_num_batched_tokens is not None else (
        own_tokens or DEFAULT_MAX_BATCHED_TOKENS, _why(engine, "max_num_batched_tokens", own_tokens, False))
    opts, label = getattr(engine, "opts", None), getattr(engine, "label", None)
    known = canonical_engine(name) if label else None  # a named engine's rules; kvplan's own rules none
    settings = result.settings if result is not None else {}
    workers = int(settings.get("attention_dp") or 1)  # SGLang's DP-attention workers: one is simulated
    cache = result.plan.request.prefix_cache if result is not None else True  # as the engine's options leave it
    return Limits(seqs[0], tokens[0], seqs[1], tokens[1], admission(name, opts, workers),
                  prefill_first(known, mixed_chunk(known, opts)), lockstep_of(known, settings),
                  label or "", MIXED_CHUNK_OPTS.get(known or ""), cache, attention_dp=workers > 1)


def plan_limits(engine, plan, model, gpu) -> Limits:
    """The engine's own limits for a plan whose EngineResult is not at hand (sweep's and cheapest's plans): the
    result made again from the plan's deployment and request (an engine's result is a function of them, so it is
    the same plan); the simulator's defaults where `engine` is None or refuses it."""
    res = None
    if engine is not None:
        try:
            res = engine.result(model, gpu, plan.deployment, plan.request)
        except KvplanError:
            res = None
    return scheduler_limits(engine, res)


def per_plan_note(engine) -> str:
    """One line for a command that simulates many plans (sweep, cheapest): which limits each run takes."""
    label = getattr(engine, "label", None)
    if not label:
        return (f"each plan simulated at the simulator's {DEFAULT_MAX_NUM_SEQS} requests running at once and "
                f"{DEFAULT_MAX_BATCHED_TOKENS:,} tokens a step (no {arg('engine')}, and kvplan's own rules set none)")
    return (f"each plan simulated at {label}'s own running limit and tokens per step on its GPU (the "
            f"simulator's {DEFAULT_MAX_NUM_SEQS} and {DEFAULT_MAX_BATCHED_TOKENS:,} where it states none): "
            "sim_max_num_seqs, sim_max_num_batched_tokens; "
            + admission(getattr(engine, "name", None), getattr(engine, "opts", None)).said
            + ("; a prefill batch whenever one forms, decoding no one in it (the engine's steps)"
               if prefill_first(engine.name, mixed_chunk(engine.name, getattr(engine, "opts", None))) else ""))
