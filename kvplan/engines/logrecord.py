"""A parsed start-up log: the record, the printed numbers it holds (with their rounding), the sanity bounds
every figure passes before any arithmetic, and where each deployment size came from. The parsers that fill a
record are in kvplan.engines.logparse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.lognodes import node_gpus, node_note
from kvplan.planning.deploy import Deployment


@dataclass(frozen=True)
class Num:
    """A printed number: its value and the decimals it was printed with (the rounding it carries)."""

    value: float
    decimals: int
    text: str

    @property
    def interval(self) -> tuple[float, float]:
        half = 0.5 * 10 ** -self.decimals
        return self.value - half, self.value + half


# Linear parsing: every number or word run is matched only from its start (the lookbehinds), so a
# search over a long run of digits cannot restart inside it; no pattern crosses a line end; `.*?`
# between two phrases is replaced by finding the first phrase once and searching the rest of its
# line once. A 1 MB line parses in milliseconds (tests/test_fuzz.py).
N = r"(?<![\d.,])(\d{1,30}(?:\.\d{1,30})?)(?!\.?\d)"  # a decimal printed as a decimal: not `.`, `1.2.3`
I = r"(?<![\d.,])(\d{1,30})(?!\.?\d)"  # a whole number
C = r"(?<![\d.,])(\d{1,3}(?:,\d{3}){0,10}|\d{1,30})(?![\d,]|\.\d)"  # a count, maybe with thousands commas
MAX_FIGURE = 10**15  # no real KV figure (bytes, tokens, blocks, GiB) reaches this; bigger is a corrupt log
MAX_LAYERS = 10_000  # the deepest real models have a few hundred layers


def _num(text: str) -> Num:
    t = text.replace(",", "")
    return Num(float(t), len(t.split(".")[1]) if "." in t else 0, text)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


@dataclass
class LogRecord:
    engine: str
    version: str | None = None
    model: str | None = None
    architecture: str | None = None
    tp: int | None = None
    pp: int | None = None  # SGLang: pp_size, or the PP ranks its lines are tagged with
    dp: int | None = None  # SGLang: dp_size, or the DP ranks its lines are tagged with
    read: dict = field(default_factory=dict)  # "tp"/"pp"/"dp" -> where in the log the size was read
    settings: dict = field(default_factory=dict)  # gpu_memory_utilization, max_model_len, kv_cache_dtype, ...
    reported: dict = field(default_factory=dict)  # name -> Num
    layers: list = field(default_factory=list)  # llama.cpp: (n_embd_k, n_embd_v) per layer when printed
    era: str = ""  # which log format was seen (for versionless logs)
    written: datetime | None = None  # the earliest dated timestamp the log prints (kvplan.engines.logdates)
    floor: tuple[str, str] | None = None  # (first release printing a line the log has, the line): vllm/releases.py
    stage_layers: tuple[int, ...] | None = None  # vLLM: VLLM_PP_LAYER_PARTITION on the command line it shows
    capture_sizes: tuple = ()  # vLLM: the engine-config line's cudagraph_capture_sizes, ascending
    graph_shape: tuple = ()  # vLLM: ((mode, graphs, largest capture), ...) as "Profiling CUDA graph memory:" prints
    cudagraph_mode: str | None = None  # vLLM: the CUDAGraphMode it ran (kvplan.engines.logparse_graphs)
    cudagraph_mode_from: str = ""  # ... and where the log said so (its engine config, or a later downgrade)
    compilation_mode: int | None = None  # vLLM: CompilationMode (3 VLLM_COMPILE) or 0.10's level, as printed
    nodes: int | None = None  # the node count the log states (kvplan.engines.lognodes)
    node_gpus: int | None = None  # ... or the node size (TensorRT-LLM's gpus_per_node)
    spans: bool = False  # the log says a tp group spans nodes (the custom all-reduce's warning)


def _check_figures(rec: LogRecord) -> None:
    """Refuse figures no real deployment prints (a corrupt or hand-edited log), before any arithmetic."""
    figures = {**rec.reported, **{k: v for k, v in rec.settings.items() if not isinstance(v, str)}}
    if rec.tp is not None:
        figures["tensor_parallel_size"] = rec.tp
    for name, fig in figures.items():
        value = fig.value if isinstance(fig, Num) else fig
        text = fig.text if isinstance(fig, Num) else str(fig)
        if not value < MAX_FIGURE:
            raise KvplanError(f"the log's {name} = {text[:40]} is beyond any real deployment; not checked", EXIT_USAGE)
    for name in ("max_model_len", "n_ctx", "kv_size", "n_ctx_slot", "context_len", "n_layer", "n_embd",
                 "n_embd_k_gqa", "n_embd_v_gqa", "block_size", "tensor_parallel_size"):
        value = figures.get(name)
        value = value.value if isinstance(value, Num) else value
        if value is not None and value <= 0:
            raise KvplanError(f"the log's {name} = {value:g} must be positive", EXIT_USAGE)
    depth = max(rec.settings.get("n_layer") or 0, len(rec.layers))
    if depth > MAX_LAYERS:
        raise KvplanError(f"the log shows {depth:,} layers; more than {MAX_LAYERS:,} is no real model", EXIT_USAGE)
    if rec.tp is not None and rec.tp > 4096:
        raise KvplanError(f"the log's tensor-parallel size {rec.tp:,} is beyond any real deployment", EXIT_USAGE)
    if rec.pp is not None and not 0 < rec.pp <= MAX_LAYERS:
        raise KvplanError(f"the log's pipeline-parallel size {rec.pp:,} is not a real deployment", EXIT_USAGE)


def deployment_said(dep, rec: LogRecord, given, inferred: bool = False) -> str:
    """Where each size planned came from: the command line, the log (and where in it), the weights (`inferred`:
    the caller matched the log's weights to a split, tp 1 included), or an assumption."""
    parts = []
    for key, n in (("tp", dep.tp), ("pp", dep.pp), ("dp", rec.dp or 1)):
        where = ("given" if key == "tp" and given else f"from the log: {rec.read[key]}" if key in rec.read
                 else "inferred from the weights" if key == "tp" and (inferred or n > 1) else "assumed")
        parts.append(f"{key} {n} ({where})")
    if dep.stage_layers is not None:
        sizes = ",".join(map(str, dep.stage_layers))
        parts.append(f"layers per stage {sizes} (from the log: {rec.read['stage_layers']})")
    return "planned as " + ", ".join(parts)


def logged_deployment(rec: LogRecord, given: int | None, notes: list[str], gpu=None) -> Deployment:
    """The deployment a log is checked at: tp as given, else the log's, else 1 (a note says it was assumed), pp the
    log's; where each size came from appended to `notes` (deployment_said). vLLM's and TensorRT-LLM's checks."""
    if not (given or rec.tp):
        notes.append(f"the log does not show the tensor-parallel size; tp 1 assumed (pass {arg('tp')})")
    return deployment_at(rec, given or rec.tp or 1, given, notes, gpu)


def deployment_at(rec: LogRecord, tp: int, given: int | None, notes: list[str], gpu=None,
                  inferred: bool = False) -> Deployment:
    """The log's deployment at `tp` (settled by the caller: SGLang's check infers it from the weights, `inferred`):
    pp and the layers per stage the log's, the nodes as it states them (kvplan.engines.lognodes); where each came
    from appended to `notes` (deployment_said, node_note)."""
    pp = rec.pp or 1
    dep = Deployment(tp, pp, node_gpus=node_gpus(rec, tp, pp), **logged_split(rec))
    notes.append(deployment_said(dep, rec, given, inferred))
    notes.extend(filter(None, [node_note(rec, dep, gpu)]))  # the nodes read, or assumed (kvplan.engines.lognodes)
    return dep


def logged_split(rec: LogRecord) -> dict:
    """The layers per stage a log sets, as the Deployment fields that carry them and say where they came from (what a
    plan's assumption names: kvplan.engines.stage_split.said); {} where it sets none. The log checks' deployment
    (logged_deployment) and benchmarks/budget_corpus.py's both read a log's split through it."""
    if rec.stage_layers is None:
        return {}
    return {"stage_layers": rec.stage_layers, "stage_from": f" as the log sets them ({rec.read['stage_layers']})"}
