"""`disagg` from what a person gives: every input checked, the model, GPU, link and engine found, the requests
made, and the run (kvplan.simulator.disagg.run_disagg). The one path under the CLI's `kvplan disagg` and the
Python API's `kvplan.disagg`: the front ends differ only in how they take the inputs and what they print.

Inputs are named by their keyword (kvplan.core.errors.arg: the CLI shows its flags). The pools step with the
engine's own calibrated coefficients (kvplan.speed.model.coefficients; vLLM's where the corpus has none for
it, kvplan.speed.model.covered), as `simulate` does; `speed="roofline"` takes the bare roofline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvplan.compare.disagg import pool_layout
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg, out_of_range
from kvplan.core.units import parse_tokens
from kvplan.engines import configure
from kvplan.engines.scheduler import with_limits
from kvplan.hardware.gpus import GPU, find_gpu
from kvplan.hardware.links import DEFAULT_LINK, Link, find_link
from kvplan.model.spec import ModelSpec
from kvplan.planning.request import read_request
from kvplan.simulator.disagg import Result, fixed_requests, run_disagg
from kvplan.simulator.inputs import check_workload_inputs
from kvplan.simulator.session import load_requests
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model
from kvplan.speed.coverage import check_speed

DEFAULT_DURATION = 60.0  # seconds of arrivals: a search simulates many splits
MAX_LENGTH = 1 << 24  # tokens in a request or a pool's max_model_len
MAX_GPUS = 4096  # the most GPUs a split may use


@dataclass(frozen=True)
class DisaggRun:
    """A run and what its front end says of it: the configured engine (its serve flags), the model, and
    one line on the requests (None without a rate); `gpu` the profile both pools run on."""

    result: Result
    engine: object
    spec: ModelSpec
    requests_said: str | None
    gpu: GPU


def _tokens(value, name: str) -> int | None:
    if value is None:
        return None
    n = parse_tokens(value, name)
    if n > MAX_LENGTH:
        raise out_of_range(name, n, 1, MAX_LENGTH)
    return n


def check_inputs(*, speed: str, max_gpus: int, **workload) -> None:
    """Every number and choice refused with its reason before any work: the speed, the split's GPUs and the
    workload's inputs as every simulation checks them (kvplan.simulator.inputs)."""
    check_speed(speed)
    check_workload_inputs(**workload)
    if not 1 <= max_gpus <= MAX_GPUS:
        raise out_of_range("max_gpus", max_gpus, 1, MAX_GPUS)


def _requests(workload, trace, trace_format: str, qps, duration, seed: int, isl, osl) -> tuple[list | None, str | None]:
    """(the requests to simulate, a line on them): a workload or trace, or isl/osl at `qps`; None without a rate."""
    if workload is not None or trace is not None:
        if isl is not None or osl is not None:  # the requests carry their own lengths; the timings take their means
            raise KvplanError(f"{arg('isl')} / {arg('osl')} with a workload or trace: its requests carry their own "
                              f"lengths and the pools are timed at their means; drop {arg('isl')} and {arg('osl')}",
                              EXIT_USAGE, param="isl" if isl is not None else "osl")
        loaded = load_requests(workload, trace, trace_format, qps, duration or DEFAULT_DURATION, seed)
        requests, said = loaded.requests, loaded.said
    elif qps is not None:
        if isl is None or osl is None:
            raise KvplanError(f"{arg('qps')} needs {arg('isl')} and {arg('osl')} (or a workload or trace)", EXIT_USAGE,
                              param="qps", value=qps)
        requests = fixed_requests(isl, osl, qps, duration or DEFAULT_DURATION, seed)
        said = (f"{len(requests):,} requests of {isl:,} in / {osl:,} out, Poisson {qps:g}/s over "
                f"{duration or DEFAULT_DURATION:g} s, seed {seed}")
    else:
        return None, None
    if not requests:
        raise KvplanError(f"the workload has no request to simulate; raise {arg('qps')} or {arg('duration')}",
                          EXIT_USAGE, param="qps", value=qps)
    return requests, said


def disagg_run(model: str | ModelSpec, gpu: str | GPU, *, isl=None, osl=None, prefill_tp: int | None = None,
               prefill_pp: int | None = None, decode_tp: int | None = None, decode_pp: int | None = None,
               prefill_max_model_len=None, decode_max_model_len=None, link: str | Link = DEFAULT_LINK,
               workload: str | None = None, trace: str | Path | None = None, trace_format: str = "auto",
               qps: float | None = None, duration: float | None = None, seed: int = 0, slo_ttft: float = 2.0,
               slo_tpot: float = 0.1, slo_percent: float = 90.0, max_gpus: int = 64, engine: str | None = "vllm",
               engine_version: str | None = None, engine_opts=(), kv_dtype: str = "auto",
               weight_dtype: str | None = None, gpu_memory_utilization=None, block_size: int | None = None,
               max_num_seqs: int | None = None,
               max_num_batched_tokens: int | None = None, step_overhead: float = 0.0,
               hw_profiles=(), speed: str = "calibrated") -> DisaggRun:
    """`disagg`'s inputs, as the CLI's flags and the Python API's keywords name them, run (see the module)."""
    check_inputs(qps=qps, duration=duration, seed=seed, slo_ttft=slo_ttft, slo_tpot=slo_tpot, slo_percent=slo_percent,
                 step_overhead=step_overhead, speed=speed, workload=workload, trace=trace, max_gpus=max_gpus,
                 max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    n_in, n_out = _tokens(isl, "isl"), _tokens(osl, "osl")
    lens = (_tokens(prefill_max_model_len, "prefill_max_model_len"),
            _tokens(decode_max_model_len, "decode_max_model_len"))
    opts = with_limits(engine, engine_opts, max_num_seqs, max_num_batched_tokens)  # both pools plan at them too
    chosen, _ = configure(engine, engine_version, opts, gpu_memory_utilization, block_size)
    fabric = link if isinstance(link, Link) else find_link(link)
    hw = gpu if isinstance(gpu, GPU) else find_gpu(gpu, tuple(hw_profiles or ()))
    spec = model if isinstance(model, ModelSpec) else resolve_model(model, loaded_bytes=loaded_as_model_dtype).spec
    deps = [chosen.deployment(pool_layout(spec, role, t, p))
            for role, t, p in (("prefill", prefill_tp, prefill_pp), ("decode", decode_tp, decode_pp))]
    requests, said = _requests(workload, trace, trace_format, qps, duration, seed, n_in, n_out)
    req = read_request(spec, context=1, kv_dtype=kv_dtype, weight_dtype=weight_dtype, block_size=block_size,
                       gpu_memory_utilization=gpu_memory_utilization)
    res = run_disagg(spec, hw, chosen, req, deps[0], deps[1], fabric, isl=n_in, osl=n_out, requests=requests,
                     prefill_max_model_len=lens[0], decode_max_model_len=lens[1], max_gpus=max_gpus,
                     max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, slo_ttft=slo_ttft,
                     slo_tpot=slo_tpot, slo_percent=slo_percent, step_overhead_s=step_overhead, speed=speed,
                     speed_engine=chosen.speed_key, speed_version=chosen.version)
    return DisaggRun(res, chosen, spec, said, hw)
