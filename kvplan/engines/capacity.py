"""What an engine reports for one deployment: `Figure` (one printed figure, raw), `Capacity` (its pool as it
prints it) and `EngineResult` (a plan made its way, with those figures and its settings).
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.planning.plan import Plan, PooledStates


class Figure(NamedTuple):
    """One figure an engine prints, in the engine's own words: a raw value and the unit it is in.

    Values are numbers (or a tuple of numbers for a compound line), never formatted text: the edge
    (kvplan.report.text.format_figure) decides how a unit reads (GiB, MiB, thousands separators).
    """

    label: str
    value: object  # int | float | tuple of ints/floats
    unit: str  # a key of kvplan.report.text.FIGURE_FORMATS


class Capacity(NamedTuple):
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
    lines: tuple[Figure, ...] = ()  # what the engine prints, as raw figures
    notes: tuple[str, ...] = ()
    # requests of `context` tokens the scheduler admits at once where that is not the printed concurrency
    # (vLLM's DeepSeek-V4 pool: block ids over all its groups); None elsewhere
    admitted: int | None = None
    # requests of `context` tokens the pool holds while they decode, where the engine frees what a request no longer
    # reads (vLLM V1's sliding-window groups: kvplan.engines.vllm.pool.resident_blocks); a benchmark's running cap
    # divides this (kvplan.bench.running); None where it is max_concurrency
    resident: float | None = None
    # the scheduler's cap on running requests (per dp rank) whatever their length, where the engine sets one below
    # what its token pool would hold (SGLang's max_running_requests under a recurrent-state pool); None elsewhere
    max_running: int | None = None
    # recurrent-state slots allocated up front out of the KV memory, the running requests' states among them
    # (SGLang's state pool); the Plan's memory rows read it. None where a sequence's states are its own allocation
    pooled: PooledStates | None = None
    # what the engine's own lines count over (per GPU, per engine instance), in words, where the engine says; their
    # labels stay the engine's log words. None: not stated
    scope: str | None = None
    # the answers table's labels for the pool row and the tokens-requests-can-use row, where the engine's pool is not
    # what memory holds (llama.cpp allocates the -c it is given: kvplan.engines.llamacpp.engine); None: the defaults
    answer_labels: tuple[str, str] | None = None
    # what the engine allocates per GPU above its budget once the pool is sized, and the room there: (what, bytes,
    # room bytes) (SGLang's request-slot pool, kvplan.engines.sglang.req_pool); None where kvplan prices none
    above: tuple[str, int, int] | None = None

    @property
    def max_concurrency_int(self) -> int:
        return int(self.max_concurrency)


class EngineResult(NamedTuple):
    """A plan made one engine's way, with what that engine prints and the settings it used."""

    plan: Plan
    capacity: Capacity
    settings: dict
    gpu: object = None  # the GPU profile it was planned on (--emit reads its dtype facts: kvplan.engines.emit)
