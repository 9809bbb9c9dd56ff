"""The flags that choose how a plan is made: --engine and its settings as a configured engine, --speculative
as the model served with its drafter, and the line saying what room --lora's adapters keep. Shared by fit, sweep,
cheapest, simulate and check-log."""

from __future__ import annotations

import dataclasses
from typing import Optional

from kvplan.cli._common import EngineOpt, EngineSettingOpt, EngineVersionOpt, stderr
from kvplan.engines import configure
from kvplan.planning.speculative import apply, parse
from kvplan.engines.served_dtype import loaded_as_model_dtype
from kvplan.sources.resolve import resolve_model


def engine_from_flags(engine: Optional[str], version: Optional[str], opt_items, gpu_memory_utilization: Optional[str],
                      block_size: Optional[int], emit_to: Optional[str] = None):
    """(the configured engine, the --gpu-memory-utilization fraction or None) that --engine,
    --engine-version, --engine-opt, --gpu-memory-utilization, --block-size (and fit's --emit) ask
    for: the engine-neutral planner without --engine (kvplan.engines.configure, as the Python API's).
    Checked before anything is printed; how a release that is not a plain X.Y.Z is read, said on stderr."""
    chosen, gmu = configure(engine, version, opt_items or (), gpu_memory_utilization, block_size, emit=emit_to)
    if chosen.version_note:
        stderr(f"note: {chosen.version_note}")
    return chosen, gmu


@dataclasses.dataclass(frozen=True)
class EngineFlags:
    """--engine, --engine-version and --engine-opt as given (an option group of fit, sweep and cheapest:
    kvplan.cli._common.grouped)."""

    engine: EngineOpt = None
    engine_version: EngineVersionOpt = None
    engine_opt: EngineSettingOpt = None

    def configured(self, gpu_memory_utilization: Optional[str], block_size: Optional[int],
                   emit_to: Optional[str] = None):
        """engine_from_flags on these flags and the command's memory flags."""
        return engine_from_flags(self.engine, self.engine_version, self.engine_opt, gpu_memory_utilization,
                                 block_size, emit_to)


def speculative_request(text, engine=None):
    """--speculative parsed (None when not given); a one-line error before any work, also where the
    configured `engine` does not model that drafter (Engine.check_speculative)."""
    request = parse(text)
    if request is not None and engine is not None:
        engine.check_speculative(request.method)
    return request


def with_speculative(spec, request, *, token=None, timeout: float = 10.0):
    """`spec` as served with the drafter --speculative asks for (kvplan.planning.speculative); a draft model
    is found as any model is (catalog, folder or Hub)."""
    if request is None:
        return spec
    return apply(spec, request, lambda name: resolve_model(name, token=token, timeout=timeout,
                                                                       loaded_bytes=loaded_as_model_dtype).spec)


def lora_lines(adapters, chosen, what: str) -> list[str]:
    """The line that says every `what` (plan, candidate) keeps room for the --lora adapters (none without them)."""
    if adapters is None:
        return []
    return [f"every {what} keeps room for LoRA adapters {adapters.text} (MAX_LORAS:RANK:MODULES) as "
            f"{chosen.label or 'kvplan'} reserves them"]
