"""SGLang's recurrent-state pool (Mamba-2, Gated DeltaNet, KDA, short conv): the state slots
(`max_mamba_cache_size`) it takes out of the static budget before the full-attention token pool, and the
cap on running requests that follows, by release.

Sources (PyPI wheels of sgl-project/sglang; docs/engines.md, "SGLang: hybrid models' state pool"):
  * a slot: conv states in SGLANG_MAMBA_CONV_DTYPE (bfloat16) + recurrent states in --mamba-ssm-dtype (default
    float32 to 0.5.8, 0.5.8.post1 `server_args.py` L497; from 0.5.9, L522, no default: the config's
    `mamba_ssm_dtype`, else float32, 0.5.10 `configs/mamba_utils.py` L47-105), summed over the state layers
    (`mamba_cache_per_req`: 0.5.2 `configs/qwen3_next.py` L317-327; 0.5.23 `configs/mamba_utils.py` L47-125). The
    shapes are vLLM's (SGLang ported mamba_utils), kvplan.model.recurrent.RecurrentState.state_parts.
  * MambaPool buffers carry one padding slot: (size + 1) rows of each state, printed "Mamba Cache is allocated.
    [max_mamba_cache_size: N, ]conv_state size: X GB, ssm_state size: Y GB" in GiB (0.5.2
    `mem_cache/memory_pool.py` L117-170; the slot count is printed from 0.5.4, L212-223).
  * 0.5.2-0.5.3 (`model_executor/model_runner.py` 0.5.2 L308-326, L1125-1131, L1262-1263): radix cache off for
    Qwen3-Next; slots = --max-mamba-cache-size, else --max-running-requests, else 512 (// dp under DP attention);
    rest -= slots x per slot; max_running_requests <= slots.
  * 0.5.4-0.5.16 (0.5.4 `model_runner.py` L1433-1480, L1657-1666; 0.5.10 `model_runner_kv_cache_mixin.py`
    L179-236): with the radix cache on, slots = int(rest x r / (1 + r) / per slot), r = --mamba-full-memory-ratio
    (0.9), and rest -= slots x per slot; with it off, --max-running-requests (or 512 before 0.5.10). An explicit
    --max-mamba-cache-size wins from 0.5.8 (0.5.4-0.5.7 used it only with the radix cache off).
  * 0.5.17+ (0.5.17 `mem_cache/kv_cache_configurator.py` L1911-1978; 0.5.23 L3229-3410): the padding slot is
    paid for: slots = int((rest x r / (1 + r) - per slot) / per slot), rest -= (slots + 1) x per slot; under pp
    the slot is priced on the stage with the most state layers (0.5.17 onwards, `pp_layer_scale`).
  * max_running_requests (per dp worker) = min(clamp(tokens / context_len x 512, 2048, 4096) or the flag,
    tokens // 2, slots // k), k = state slots one request may hold: 1 with the radix cache off, else 3
    (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO) + 2 from 0.5.15 where the `extra_buffer` strategy is the
    default (overlap schedule on; `_MAMBA_EXTRA_BUFFER_ARCHS`: Qwen3-Next/3.5, Nemotron-H, Granite 4 hybrids,
    Falcon-H1, and Kimi-Linear from 0.5.16; 0.5.15 `arg_groups/overrides.py` L982-1044, 0.5.23
    `mem_cache/kv_cache_configurator.py` L3062-3160).
  * which state layers each release has: Qwen3-Next (Gated DeltaNet) from 0.5.2, Nemotron-H (Mamba-2) from 0.5.4,
    Kimi-Linear (KDA) from 0.5.5, Qwen3.5, Granite 4 hybrids and LFM2 by 0.5.10 (`srt/models/`); Mamba-1 only in
    attention-free models from 0.5.21 (mamba.py, falcon_mamba.py; `configs/mamba_utils.py` create_full_rank), not
    sized here; no Jamba nor MiniMax lightning attention in any.
Not modelled: speculative decoding's intermediate states (kvplan's SGLang refuses speculative plans), ReplaySSM,
HiCache's host state pool, the slack floor 0.5.23 applies to hybrids under post-capture KV sizing
(off by default: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, `environ.py` L640).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.dtypes import BF16, FP32, canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.capacity import Figure
from kvplan.engines.options import opt_bool, opt_choice, opt_int, opt_positive
from kvplan.engines.versions import parse_version
from kvplan.model.recurrent import recurrent_states
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.plan import PooledStates

OPTS = ("max_mamba_cache_size", "mamba_ssm_dtype", "mamba_full_memory_ratio", "max_running_requests",
        "disable_radix_cache", "mamba_radix_cache_strategy")
# --mamba-radix-cache-strategy (--mamba-scheduler-strategy before 0.5.14; from 0.5.8): the state slots one running
# request holds beside the radix cache's 3: extra_buffer's ping-pong pair (overlap schedule on), the lazy variant's
# one (from 0.5.13); 0.5.10 model_runner_kv_cache_mixin.py L373-385, 0.5.23 mem_cache/allocation_sizing.py L11-19
STRATEGIES = {"no_buffer": 0, "extra_buffer": 2, "extra_buffer_lazy": 1}
SSM_DTYPES = ("float32", "bfloat16", "float16")  # --mamba-ssm-dtype choices (0.5.23 arg_groups/fields/exec_.py)
CONFIG_SSM_DTYPE = (0, 5, 9)  # the first release whose unset --mamba-ssm-dtype reads the config's (module docstring)
# the first release whose srt/models/ has a model with this kind of state layer (kvplan's RecurrentState.variant)
SINCE = {"gated_deltanet": (0, 5, 2), "mamba2": (0, 5, 4), "kda": (0, 5, 5), "short_conv": (0, 5, 10)}
# when each variant joined _MAMBA_EXTRA_BUFFER_ARCHS (0.5.15 `arg_groups/overrides.py` L982-995; KDA: 0.5.16)
EXTRA_BUFFER = {"gated_deltanet": (0, 5, 15), "mamba2": (0, 5, 15), "kda": (0, 5, 16)}
DEFAULT_SLOTS = 512  # with the radix cache off and no --max-running-requests (0.5.2-0.5.9)
RATIO = 3  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
EXTRA_BUFFER_SLOTS = 2  # get_mamba_tracking_slots(extra_buffer=True, overlap=True)


@dataclass(frozen=True)
class StateSettings:
    """The state pool's settings for one SGLang release (`--engine-opt`s given or the release's defaults)."""

    version: tuple[int, ...]
    ssm_dtype: str  # "" = SGLang's own default (float32, or the config's mamba_ssm_dtype)
    slots: int | None  # --max-mamba-cache-size
    memory_ratio: float  # --mamba-full-memory-ratio
    max_running: int | None  # --max-running-requests
    radix: bool  # the radix cache on (Qwen3-Next before 0.5.4: always off)
    attn_dp: int  # DP attention ranks (the slot counts given are the whole server's)
    strategy: str = "auto"  # --mamba-radix-cache-strategy

    def as_dict(self) -> dict:
        return {"ssm_dtype": self.ssm_dtype or "default", "max_mamba_cache_size": self.slots,
                "mamba_full_memory_ratio": self.memory_ratio, "max_running_requests": self.max_running,
                "radix_cache": self.radix, "mamba_radix_cache_strategy": self.strategy}


@dataclass(frozen=True)
class StatePool:
    """The state slots of one rank and what they cost."""

    slots: int  # max_mamba_cache_size on this rank
    conv_slot: int  # bytes of one slot's conv states, all state layers of the rank
    ssm_slot: int
    reserved: int  # bytes taken out of the static budget ("rest") before the token pool
    per_request: int  # state slots one running request may hold
    rule: str
    ssm_dtype: str = "fp32"  # the recurrent states' element type (conv states: bf16)
    held: int = 1  # of per_request, the slots a running request holds itself (held_slots)

    @property
    def requests(self) -> int:
        """Running requests whose states the slots hold at once."""
        return self.slots // max(1, self.per_request)

    @property
    def conv_bytes(self) -> int:
        return (self.slots + 1) * self.conv_slot  # the buffers' padding slot

    @property
    def ssm_bytes(self) -> int:
        return (self.slots + 1) * self.ssm_slot


# The state layers are kvplan.model.recurrent.recurrent_states: recurrent ones, and the Mamba-2 mixer beside the
# attention of Falcon-H1's layers (SGLang's FalconH1Config: attention and Mamba on every layer,
# `configs/falcon_h1.py` 0.5.23 L292-299).


def has_states(model) -> bool:
    return bool(recurrent_states(model.layers))


def state_settings(model, version: str, opts: dict, attn_dp: int) -> StateSettings | None:
    """The settings, after refusing a release that has no such state layer; None for a model without one (its
    options still checked)."""
    v = parse_version(version)
    if not has_states(model):
        _options(opts, v)  # checked on every model
        _strategy(opts, v, version)
        return None
    for layer in dict.fromkeys(recurrent_states(model.layers)):
        since = SINCE.get(layer.variant)
        if since is None:
            why = (" (Mamba-1 runs only in attention-free models from 0.5.21: Mamba, Falcon-Mamba; no Jamba)"
                   if layer.variant == "mamba" else "")
            raise KvplanError(f"kvplan does not size SGLang's pool for {layer.variant} state layers{why}; plan it "
                              "with another engine", EXIT_USAGE, param="engine", value="sglang")
        if v < since:
            raise KvplanError(f"SGLang {version} has no {layer.variant} state pool: the first release with a model "
                              f"of this kind is {'.'.join(map(str, since))} (pass {arg('engine_version')})",
                              EXIT_USAGE, param="engine_version", value=version)
    return StateSettings(v, *_options(opts, v), max(1, attn_dp), _strategy(opts, v, version))


def _options(opts: dict, v: tuple[int, ...]) -> tuple:
    """(ssm dtype, slots, memory ratio, running limit, radix cache on) from the options, each checked."""
    ssm = opt_choice(opts, "mamba_ssm_dtype", "", SSM_DTYPES)
    slots = opt_int(opts, "max_mamba_cache_size", 0) or None
    running = opt_int(opts, "max_running_requests", 0) or None
    ratio = opt_positive(opts, "mamba_full_memory_ratio", 0.9)
    radix = not opt_bool(opts, "disable_radix_cache", False) and v >= (0, 5, 4)
    return ssm, slots, ratio, running, radix


def _strategy(opts: dict, v: tuple[int, ...], version: str) -> str:
    """--mamba-radix-cache-strategy as given (auto when not), refused where the release has no such value."""
    name = opt_choice(opts, "mamba_radix_cache_strategy", "auto", ("auto", *STRATEGIES))
    if name == "auto":
        return name
    if v < ((0, 5, 13) if name == "extra_buffer_lazy" else (0, 5, 8)):
        raise KvplanError(f"SGLang {version} has no mamba_radix_cache_strategy {name} (from "
                          f"{'0.5.13' if name == 'extra_buffer_lazy' else '0.5.8'})", EXIT_USAGE,
                          param="engine_opts", value={"mamba_radix_cache_strategy": name})
    return name


def ssm_dtype_of(layer, ss: StateSettings):
    """The recurrent state's element type: the flag's, else (from 0.5.9) the config's mamba_ssm_dtype (kvplan
    reads it for Qwen3.5 and KDA), else float32: Qwen3-Next's, whose config has no such key, at every release."""
    own = getattr(layer, "ssm_dtype", "") if layer.variant in ("gated_deltanet", "kda") else ""
    own = own if ss.version >= CONFIG_SSM_DTYPE else ""
    return canonical_kv_dtype(ss.ssm_dtype or own) if ss.ssm_dtype or own else FP32


def pool_ssm_dtype(model, ss: StateSettings | None) -> str:
    """kvplan's name of the dtype the pool holds `model`'s recurrent states in ("" without a pool): what a plan's
    speed figures price them in (`Request.ssm_dtype`, set by the engine's request step)."""
    if ss is None or not has_states(model):
        return ""
    return ssm_dtype_of(recurrent_states(model.layers)[0], ss).name


def slot_bytes(layers, tp: int, ss: StateSettings) -> tuple[int, int]:
    """(conv, recurrent) bytes of one slot over `layers`' state layers on one rank of tp."""
    conv = ssm = 0
    for layer in recurrent_states(layers):
        c, s = layer.state_parts(tp)
        conv += BF16.bytes_for(c)
        ssm += ssm_dtype_of(layer, ss).bytes_for(s)
    return conv, ssm


def _stage_layers(model, dep, ss: StateSettings):
    """The layers a slot is priced on: the whole model's before 0.5.17, the stage with the most state layers after."""
    if dep.pp == 1 or ss.version < (0, 5, 17):
        return model.layers
    stages = [model.layers[a:b] for a, b in stage_ranges(model, dep)]
    return max(stages, key=lambda ls: len(recurrent_states(ls)))


def per_request(model, ss: StateSettings) -> int:
    """State slots one running request may hold (see the module docstring)."""
    if not ss.radix:
        return 1
    if ss.strategy != "auto":
        return RATIO + STRATEGIES[ss.strategy]
    variants = {layer.variant for layer in recurrent_states(model.layers)}
    extra = all(ss.version >= EXTRA_BUFFER.get(v, (99,)) for v in variants)
    return RATIO + (EXTRA_BUFFER_SLOTS if extra else 0)


def held_slots(model, ss: StateSettings) -> int:
    """State slots one running request holds in the pool: its own (`Req.mamba_pool_idx`) and, with the radix cache
    on, its strategy's tracking slots (`Req.mamba_ping_pong_track_buffer`: 2 under extra_buffer; 0.5.23
    `managers/schedule_batch.py` Req, `mem_cache/allocation_sizing.py` L11-19). The rest of per_request's slots are
    the radix cache's room for the states it keeps (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO 3 counts the own)."""
    return 1 + (per_request(model, ss) - RATIO if ss.radix else 0)


def pooled(model, dep, pool: StatePool, ss: StateSettings, token_pool: int) -> PooledStates:
    """The state pool as a plan's memory rows read it (kvplan.planning.plan.PooledStates): the pool allocated
    ((slots + 1) rows, as SGLang prints it), the token pool beside it, and the slots one running request holds, on
    the rank that bounds the pool and over the whole model's state layers of one tp rank."""
    whole = sum(slot_bytes(model.layers, dep.tp, ss))
    return PooledStates(pool.conv_bytes + pool.ssm_bytes, token_pool, pool.held * (pool.conv_slot + pool.ssm_slot),
                        pool.held * whole, pool.requests)


def state_pool(model, dep, rest: int, ss: StateSettings) -> StatePool:
    """The slots SGLang takes out of `rest` (bytes per rank, the token pool's budget before it)."""
    conv, ssm = slot_bytes(_stage_layers(model, dep, ss), dep.tp, ss)
    per = conv + ssm
    paid = 1 if ss.version >= (0, 5, 17) else 0  # the padding slot, paid for from 0.5.17
    v = ss.version
    if ss.slots and (v >= (0, 5, 8) or not ss.radix):
        slots, rule = ss.slots, "max_mamba_cache_size"
    elif not ss.radix and ss.max_running:
        slots, rule = ss.max_running, "max_running_requests (radix cache off)"
    elif not ss.radix and v < (0, 5, 10):
        slots, rule = DEFAULT_SLOTS, f"{DEFAULT_SLOTS} (radix cache off)"
    else:
        budget = max(0, rest) * ss.memory_ratio / (1 + ss.memory_ratio)
        slots = int((budget - paid * per) // per) if per else 0
        rule = f"mamba_full_memory_ratio {ss.memory_ratio:g}"
    # a count given for the whole server is split over DP attention ranks: from 0.5.8 the counts given; before,
    # Qwen3-Next's (Gated DeltaNet) whatever the branch and nobody else's (0.5.6 model_runner.py L1487-1490)
    if _split_over_dp(model, v, given=not rule.startswith("mamba_full")):
        slots //= ss.attn_dp
    slots = max(0, slots)
    return StatePool(slots, conv, ssm, (slots + paid) * per, per_request(model, ss), rule,
                     pool_ssm_dtype(model, ss), held_slots(model, ss))


def _split_over_dp(model, v: tuple[int, ...], given: bool) -> bool:
    """Whether a slot count is divided over DP attention ranks (see state_pool)."""
    if v >= (0, 5, 8):
        return given
    return any(layer.variant == "gated_deltanet" for layer in recurrent_states(model.layers))


def max_running(pool: StatePool, tokens: int, context_len: int, ss: StateSettings) -> int:
    """max_running_requests per dp worker: the flag's or SGLang's estimate, within tokens // 2 and the slots."""
    if ss.max_running:
        asked = max(1, ss.max_running // ss.attn_dp)
    else:
        asked = max(min(int(tokens / context_len * 512) if context_len else 4096, 4096), 2048)
    return max(0, min(asked, tokens // 2, pool.slots // pool.per_request))


def scheduler(pool: StatePool | None, ss: StateSettings | None, flag: int | None, tokens: int,
              context: int, context_len: int) -> tuple[int | None, list, list[str]]:
    """(the scheduler's cap on running requests or None, the state pool's figures, its note): the state pool's
    max_running_requests, else a --max-running-requests given (per dp worker), within tokens // 2. `context`: the
    plan's request; `context_len`: the server's (--context-length, else the request's), which SGLang's estimate
    reads (model_config.context_len, max_running)."""
    if pool is None:
        return (min(flag, tokens // 2) if flag else None), [], []
    running = max_running(pool, tokens, context_len, ss)
    return running, figures(pool), [note(pool, running, tokens, context)]


def figures(pool: StatePool) -> list[Figure]:
    """The state pool as SGLang prints it ("Mamba Cache is allocated"), raw; max_running_requests is the
    engine table's row after the token pool's, as SGLang prints it."""
    return [
        Figure("mamba_cache_per_req", pool.conv_slot + pool.ssm_slot, "B"),
        Figure("max_mamba_cache_size", pool.slots, "count"),
        Figure("conv_state size", pool.conv_bytes, "sglang GB"),
        Figure("ssm_state size", pool.ssm_bytes, "sglang GB"),
        Figure("state slots per request", pool.per_request, "count"),
    ]


def note(pool: StatePool, running: int, tokens: int, context: int) -> str:
    """Where the slots came from, and which of the two pools bounds concurrency at `context`."""
    by_tokens = tokens / context if context else 0.0
    bound = "the state slots bind" if running < by_tokens else "the token pool binds"
    held = f" ({pool.held} held while it runs, the rest the radix cache's)" if pool.held < pool.per_request else ""
    return (f"SGLang's state pool: conv states bf16, recurrent states {pool.ssm_dtype} (mamba_ssm_dtype); "
            f"max_mamba_cache_size from {pool.rule}, {pool.per_request} slot(s) per running request{held}, so "
            f"max_running_requests {running:,}; at {context:,} tokens {bound} concurrency")


def emit_flags(opts: dict, model, plan, version: str, attn_dp: int) -> list[str]:
    """SGLang's own flags for the state pool: the planned slots pinned (--max-mamba-cache-size, the whole server's,
    so that --max-running-requests does not resize them before 0.5.4), and the options given."""
    ss = state_settings(model, version, opts, attn_dp)
    if ss is None:
        return []
    pool = state_pool(model, plan.deployment, plan.kv_memory_bytes_per_gpu, ss)
    per_rank = ss.attn_dp if _split_over_dp(model, ss.version, given=True) else 1
    args = ["--max-mamba-cache-size", str(pool.slots * per_rank)]
    if ss.ssm_dtype:
        args += ["--mamba-ssm-dtype", ss.ssm_dtype]
    if "mamba_full_memory_ratio" in opts:
        args += ["--mamba-full-memory-ratio", f"{ss.memory_ratio:g}"]
    if opt_bool(opts, "disable_radix_cache", False):
        args += ["--disable-radix-cache"]
    if ss.strategy != "auto":
        flag = "--mamba-radix-cache-strategy" if ss.version >= (0, 5, 14) else "--mamba-scheduler-strategy"
        args += [flag, ss.strategy]
    return args
