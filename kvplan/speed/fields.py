"""A speed-corpus point's named fields read and checked, each against the values its engine may state: `backend`
(`backend_of`), `harness_kind` (`harness_kind_of`), `sliding_window` (`windowed_of`), `arrival` (`arrival_of`, the
kinds of kvplan.speed.queueing), whether its requests crossed the engine's HTTP front end (`served`), whether its engine
flags turn CUDA graphs off (`graphless`), and the boolean flags kvplan reads off a run stated true or false
(`bool_flags_check`)."""

from __future__ import annotations

import re

from kvplan.speed.queueing import ARRIVALS, arrival_cv2

IN_PROCESS_TOOLS = ("trtllm-bench",)  # tools that drive the engine in their own process, no HTTP front end
# (NVIDIA/TensorRT-LLM@89fd9b74ab7ae753b4c6b3db25a400dca7ea54a0:tensorrt_llm/bench/benchmark/utils/asynchronous.py)


def served(engine: str, p: dict) -> bool:
    """Whether a point's requests crossed the engine's HTTP front end (kvplan.speed.frontend.ingress_queue)."""
    return harness_kind_of(engine, p.get("harness_kind")) != "inprocess" and p.get("harness") not in IN_PROCESS_TOOLS


# The flag, and the value stated, that runs an engine's steps without CUDA graphs, every kernel launched from Python
# each step, which no coefficient set (fitted on graph runs) has a term for. vLLM's --enforce-eager
# (kvplan.engines.vllm.settings `eager`); SGLang's --disable-cuda-graph, store_true, 'Disable cuda graph.'
# (sgl-project/sglang@469c63e54e7d94591617ef9590c6aa26d54dc1bb:python/sglang/srt/server_args.py, ServerArgs
# `disable_cuda_graph`); TensorRT-LLM's LLM API option `use_cuda_graph: false` (PyTorch backend before 1.0:
# NVIDIA/TensorRT-LLM@fcd3f31682808ae56118ae43c1d7864a3a945e6f:tensorrt_llm/llmapi/llm_args.py, TorchLlmArgs
# `use_cuda_graph`, default False, 'If true, use CUDA graphs for decoding') and its successor `cuda_graph_config`
# stated null (GRAPHS_NULL: Optional[CudaGraphConfig], default_factory=CudaGraphConfig, so graphs are on unless
# set to None). Only a stated flag is read: a run that states none is priced as the engine's default runs it.
GRAPHS_OFF = {"vllm": ("enforce_eager", "true"), "sglang": ("disable_cuda_graph", "true"),
              "trtllm": ("use_cuda_graph", "false")}
GRAPHS_NULL = {"trtllm": "cuda_graph_config"}


def graphless(engine: str, flags: dict) -> str:
    """The flag by which a run states its engine ran without CUDA graphs (GRAPHS_OFF, GRAPHS_NULL), "" where none."""
    key, off = GRAPHS_OFF.get(engine, (None, ""))
    if key is not None and str(flags.get(key, "")).lower() == off:
        return f"{key}: {off}"
    null = GRAPHS_NULL.get(engine)
    if null is not None and null in flags and flags[null] is None:
        return f"{null}: null"
    return ""


# The backends a run may state (`backend`), per engine: the first is what it runs where none is stated; a backend
# kvplan.speed.eras.BACKENDS fits apart reads its own coefficient set, the rest the engine's era.
BACKEND_NAMES = {"trtllm": ("pytorch", "tensorrt")}


def backend_of(engine: str, value) -> str | None:
    """The `backend` field checked (_choice); another engine's is kept as written: llama.cpp's `backend` names its
    ggml backend, CUDA or Metal, which no coefficient set reads."""
    return _choice("backend", BACKEND_NAMES, engine, value, others_free=True)


# How a run's requests reached the engine (`harness_kind`), per engine: the first is what a point reads where none is
# stated; a kind kvplan.speed.eras.HARNESSES fits apart reads its own coefficient set, the rest the engine's era.
HARNESS_KINDS = {"vllm": ("served", "inprocess"), "sglang": ("served", "inprocess"), "trtllm": ("served", "inprocess")}


def harness_kind_of(engine: str, value) -> str | None:
    """The `harness_kind` field checked (_choice); an engine with no kinds takes none."""
    return _choice("harness_kind", HARNESS_KINDS, engine, value, others_free=False)


def _choice(field: str, table: dict, engine: str, value, others_free: bool) -> str | None:
    """A per-engine named field read: None where absent, else its lower-cased value; a value not among the engine's
    names in `table` is refused with a ValueError naming them (an engine not in `table`: any value where
    `others_free`, none otherwise)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    allowed = table.get(engine)
    if (allowed is not None or not others_free) and text not in (allowed or ()):
        raise ValueError(f"{field} {value!r} is not one of {engine}'s: {', '.join(allowed or ()) or 'none'}")
    return text


def windowed_of(value) -> bool:
    """The `sliding_window` field: absent, the model's windows as its config gives them; `none`, an engine that
    applied none of them (TensorRT-LLM's engine flow builds Mistral as LLaMA: docs/speed.md); else a ValueError."""
    if value is None:
        return True
    if str(value).strip().lower() != "none":
        raise ValueError(f"sliding_window {value!r} is not none (the only value; absent: the config's windows)")
    return False


def arrival_of(value) -> float | None:
    """The `arrival` field read as the squared coefficient of variation of the gaps (kvplan.speed.queueing.arrival_cv2;
    None: no queueing wait). Absent reads as unstated; a value not in ARRIVALS (gamma as `gamma(k)`, k > 0 the
    burstiness) is refused with a ValueError naming the allowed ones."""
    text = "unstated" if value is None else str(value).strip().lower()
    m = re.fullmatch(r"gamma\(\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*\)", text)
    if m and float(m.group(1)) > 0:
        return arrival_cv2("gamma", float(m.group(1)))
    if text not in ARRIVALS or text == "gamma":
        raise ValueError(f"arrival {value!r} is not one of poisson, gamma(k) with k > 0, constant, closed, burst, "
                         "unstated")
    return arrival_cv2(text)


def bool_flags_check(flags: dict | None, names: tuple[str, ...]) -> None:
    """The boolean flags kvplan reads off a run (`names`, dashes read as _) are true or false where stated: a 1 or an
    `on` would read as off (kvplan.speed.corpus `_on` takes only true) and price the run at the engine's default, so
    any other value is refused with a ValueError naming the flag."""
    for key, value in (flags or {}).items():
        if str(key).replace("-", "_") in names and str(value).strip().lower() not in ("true", "false"):
            raise ValueError(f"flag {key} {value!r} is not true or false")
