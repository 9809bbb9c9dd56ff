"""Engine registry: how vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers each size the KV cache.

Each engine is one module with one frozen `Engine` object. An engine turns the user's request
into the numbers that engine would print at start-up: its KV budget per GPU, its token capacity
(with its own page/cell rounding), its maximum concurrency and its longest context. The rules and
their sources (file and version) are in each module and in docs/engines.md; no engine code is
copied, only its arithmetic restated.

The common shape:
  * `settings(model, gpu, dep, req, version, opts)` - the engine's defaults for this GPU and
    version (gpu_memory_utilization, block size, max_num_batched_tokens, ...), overridden by
    `--engine-opt key=value` and by the explicit fit flags;
  * `capacity(model, dep, kv_bytes, context, batch, settings)` - pure arithmetic from a per-GPU KV
    budget in bytes to the engine's printed figures (tokens, concurrency, blocks);
  * `plan(model, gpu, dep, req, settings)` - the whole deployment: the planner's Plan with the
    engine's budget rule and the engine's answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import import_module

from kvplan.errors import EXIT_USAGE, KvplanError

ENGINE_MODULES = {
    "vllm": "kvplan.engines.vllm",
    "sglang": "kvplan.engines.sglang",
    "trtllm": "kvplan.engines.trtllm",
    "llama.cpp": "kvplan.engines.llamacpp",
    "transformers": "kvplan.engines.hf_transformers",
}
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "tensorrt-llm": "trtllm", "trt-llm": "trtllm",
            "tensorrt_llm": "trtllm", "hf": "transformers", "huggingface": "transformers"}
ENGINE_NAMES = tuple(ENGINE_MODULES)


@dataclass(frozen=True)
class Capacity:
    """What one engine reports for one deployment, per GPU (rank), and how it got there."""

    engine: str
    version: str
    kv_memory_bytes: int  # the engine's KV budget on the tightest rank
    tokens: int  # the token capacity as the engine prints it
    max_concurrency: float  # requests of `context` tokens the pool holds (the engine's ratio)
    context: int
    bytes_per_token: int  # per rank, all caching layers, before page rounding
    blocks: int | None = None  # pages (vLLM blocks, TRT-LLM blocks); None where the engine has none
    block_size: int | None = None
    lines: tuple[tuple[str, str], ...] = ()  # (label, value) for people, the engine's own terms
    notes: tuple[str, ...] = ()

    @property
    def max_concurrency_int(self) -> int:
        return int(self.max_concurrency)


@dataclass(frozen=True)
class EngineResult:
    """A plan made the engine's way: the planner's Plan (engine budget rule) plus the engine's answers."""

    plan: object  # kvplan.planner.Plan with engine figures substituted
    capacity: Capacity
    settings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class EngineChoice:
    """An engine as the user chose it (name, version, --engine-opt, explicit flags), ready to plan with.

    What `fit --engine` does for one deployment, reusable by sweep and cheapest: the engine's
    settings for this GPU and deployment, then its plan (the planner's Plan, engine figures in).
    """

    name: str
    version: str | None = None
    opts: tuple[tuple[str, str], ...] = ()
    explicit: tuple[tuple[str, object], ...] = ()  # flags the user gave: gpu_memory_utilization, block_size

    @classmethod
    def make(cls, name: str, version: str | None = None, opt_items=(), **explicit) -> EngineChoice:
        """Checked: an unknown engine, version or option is a one-line error before any work."""
        key = canonical_engine(name)
        eng = get_engine(key)
        check_version(key, version, eng.versions, eng.default_version)
        opts = parse_engine_opts(opt_items)
        check_opts(key, opts, eng.opts)
        return cls(key, version, tuple(opts.items()), tuple(explicit.items()))

    @property
    def label(self) -> str:
        eng = get_engine(self.name)
        return f"{self.name} {self.version or eng.default_version}"

    def deployment(self, dep):
        """The deployment this engine runs on dep.gpus GPUs: llama.cpp splits layers (pp), it has no tp."""
        if self.name == "llama.cpp" and dep.tp > 1:
            return type(dep)(1, dep.gpus)
        return dep

    def result(self, model, gpu, dep, req) -> EngineResult:
        """`req` on `dep` as this engine allocates: its settings, Plan and printed figures
        (KvplanError where it cannot run)."""
        self.check_layout(model, dep)
        eng = get_engine(self.name)
        st = eng.settings(model, gpu, dep, req, self.version, dict(self.opts), dict(self.explicit))
        return eng.plan(model, gpu, dep, req, st)

    def check_layout(self, model, dep) -> None:
        """A one-line error for a layout this engine's model here cannot place (before any output)."""
        dp, dcp = getattr(dep, "dp", 1), getattr(dep, "dcp", 1)
        if dcp > 1:
            raise KvplanError(f"--dcp with --engine {self.name}: the engine's decode-context-parallel pool "
                              "(pages x dcp) is not modelled; plan it without --engine", EXIT_USAGE)
        if dp > 1 and self.name not in ("vllm", "sglang"):
            raise KvplanError(f"--dp with --engine {self.name}: data-parallel ranks are modelled for vllm and sglang",
                              EXIT_USAGE)
        if self.name == "sglang":
            from kvplan.engines.sglang import dp_attention

            dp_attention(model, dep, dict(self.opts))

    def plan(self, model, gpu, dep, req):
        """The kvplan.planner.Plan of result()."""
        return self.result(model, gpu, dep, req).plan


def canonical_engine(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in ENGINE_MODULES:
        raise KvplanError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINE_NAMES)}", EXIT_USAGE)
    return key


def get_engine(name: str):
    """The engine object for `name` (imported on demand, so `fit` without --engine stays light)."""
    return import_module(ENGINE_MODULES[canonical_engine(name)]).ENGINE


def parse_version(text: str) -> tuple[int, ...]:
    """'0.11.0' -> (0, 11, 0); '0.4.3.post4' -> (0, 4, 3); 'v0.20.1rc1' -> (0, 20, 1)."""
    nums = re.findall(r"\d+", str(text).lstrip("vV").split("+")[0].split("rc")[0].split(".post")[0].split(".dev")[0])
    if not nums:
        raise KvplanError(f"cannot read engine version {text!r} (expected e.g. 0.11.0)", EXIT_USAGE)
    return tuple(int(n) for n in nums[:3])


def check_version(engine: str, version: str | None, known: tuple[str, ...], default: str) -> str:
    """The version to model: `version` if it is a readable release of a known era, else a one-line error."""
    if version is None:
        return default
    v = str(version).strip()
    if not v:
        raise KvplanError("--engine-version is empty", EXIT_USAGE)
    if engine == "llama.cpp":
        if v not in known:
            raise KvplanError(f"unknown llama.cpp version {v!r}; choose one of: {', '.join(known)}", EXIT_USAGE)
        return v
    parsed = parse_version(v)
    lo, hi = parse_version(known[0]), parse_version(known[-1])
    if not lo <= parsed <= hi + (999,):
        raise KvplanError(f"{engine} version {v} is outside the modelled range {known[0]} .. {known[-1]}", EXIT_USAGE)
    return v


def parse_engine_opts(items) -> dict[str, str]:
    """['max_num_batched_tokens=4096', 'kv_unified=true'] -> dict; a one-line error on a malformed item."""
    out: dict[str, str] = {}
    for item in items or ():
        if "=" not in item:
            raise KvplanError(f"--engine-opt expects KEY=VALUE, got {item!r}", EXIT_USAGE)
        k, v = item.split("=", 1)
        out[k.strip().replace("-", "_")] = v.strip()
    return out


def opt_int(opts: dict, key: str, default: int) -> int:
    if key not in opts:
        return default
    try:
        value = int(str(opts[key]).replace("_", ""))
    except ValueError:
        raise KvplanError(f"--engine-opt {key} must be an integer, got {opts[key]!r}", EXIT_USAGE) from None
    if value < 0:
        raise KvplanError(f"--engine-opt {key} must not be negative, got {value}", EXIT_USAGE)
    return value


def opt_float(opts: dict, key: str, default: float) -> float:
    if key not in opts:
        return default
    try:
        value = float(opts[key])
    except ValueError:
        raise KvplanError(f"--engine-opt {key} must be a number, got {opts[key]!r}", EXIT_USAGE) from None
    if not 0 < value <= 1:
        raise KvplanError(f"--engine-opt {key} must be in (0, 1], got {value}", EXIT_USAGE)
    return value


def opt_bool(opts: dict, key: str, default: bool) -> bool:
    if key not in opts:
        return default
    v = str(opts[key]).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise KvplanError(f"--engine-opt {key} must be true or false, got {opts[key]!r}", EXIT_USAGE)


def check_opts(engine: str, opts: dict, allowed: tuple[str, ...]) -> None:
    for k in opts:
        if k not in allowed:
            raise KvplanError(f"unknown --engine-opt {k!r} for {engine}; allowed: {', '.join(allowed)}", EXIT_USAGE)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
