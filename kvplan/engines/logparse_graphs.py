"""Reading the CUDA-graph settings a vLLM start-up log states: capture shape, capture sizes, graph and compile modes.

What sizes the budget's CUDA-graph term is what vLLM captured, so each setting is read as the engine printed it
rather than assumed from its defaults (kvplan.engines.vllm.log_graphs turns them into the plan's shape and notes):

* the shape it profiles, "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)"
  (gpu_model_runner.py profile_cudagraph_memory: one `MODE=len(descs) (largest=descs[0].num_tokens)` a mode, PIECEWISE
  then FULL, 0.18.0 L5607-5614 ... 0.22.0 L6279-6286; from 0.23.0 L6398-6412 an "ENCODER=N (largest=L)" group);
* the engine-config line's resolved `'cudagraph_capture_sizes': [...]` (v1/engine/core.py 0.21.0 L109-112 prints the
  VllmConfig after config/vllm.py L1638 set the sizes);
* the same line's `'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>` and `'mode':
  <CompilationMode.VLLM_COMPILE: 3>` (0.11+), or the 0.10 JSON form `"cudagraph_mode":1` and `"level":3`: the modes
  after VllmConfig.__post_init__'s overrides (enforce_eager, a pooling or encoder-decoder model, a KV connector, a
  mode needing piecewise compilation without VLLM_COMPILE: config/vllm.py 0.21.0 L941-947, L1020-1030, L1080-1136);
* a later "...; setting cudagraph_mode=X" warning, the runner's downgrade where the attention backend cannot run the
  mode (config/compilation.py 0.21.0 resolve_cudagraph_mode_and_sizes L1301-1444): it replaces the printed mode;
* enforce_eager from the engine-config line (`enforce_eager=True`) or the non-default args (`'enforce_eager': True`).
"""

from __future__ import annotations

import re
from kvplan.engines.logscan import search, findall

_SHAPE_LINE = re.compile(r"Profiling CUDA graph memory: ([^\n]{1,400})")
_SHAPE_GROUP = re.compile(r"(?<!\w)([A-Z]{1,20})=(\d{1,7}) \(largest=(\d{1,7})\)")
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
# CUDAGraphMode's values (config/compilation.py 0.21.0 L59-63), as the 0.10 JSON config line prints them
_MODE_BY_VALUE = {"0": "NONE", "1": "PIECEWISE", "2": "FULL", "[2,0]": "FULL_DECODE_ONLY",
                  "[2,1]": "FULL_AND_PIECEWISE"}
_CONFIG_MODE = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.([A-Z_]{1,30}): |\"cudagraph_mode\": ?(\d|\[\d, ?\d\])")
_SET_MODE = re.compile(r"setting cudagraph_mode=([A-Z_]{1,30})\b")
_COMPILE_MODE = re.compile(r"'mode': <CompilationMode\.[A-Z_]{1,30}: (\d)>|[\"']level[\"']: ?(\d)\b")


def vllm_graph_settings(text: str, rec) -> None:
    """Fill `rec` with the CUDA-graph settings the log states (the module docstring lists them)."""
    m = search(_SHAPE_LINE, text)
    if m:
        rec.graph_shape = tuple((mode, int(n), int(top)) for mode, n, top in _SHAPE_GROUP.findall(m.group(1)))
    m = search(r"'cudagraph_capture_sizes': \[((?:\d{1,7}, ){0,4000}\d{1,7})\]", text)
    if m:
        rec.capture_sizes = tuple(sorted({int(x) for x in m.group(1).split(", ")}))
    m = search(r"enforce_eager=(True|False)\b|'enforce_eager': (True|False)\b", text)
    if m:
        rec.settings["enforce_eager"] = (m.group(1) or m.group(2)) == "True"
    _graph_modes(text, rec)


def _graph_modes(text: str, rec) -> None:
    """The cudagraph_mode and compilation mode the log states, and where the mode was read."""
    m = search(_COMPILE_MODE, text)
    if m:
        rec.compilation_mode = int(m.group(1) or m.group(2))
    m = search(_CONFIG_MODE, text)
    if m:
        name = m.group(1) or _MODE_BY_VALUE.get(m.group(2).replace(" ", ""))
        if name in GRAPH_MODES:
            rec.cudagraph_mode, rec.cudagraph_mode_from = name, "the log's engine config"
    downgrades = [name for name in findall(_SET_MODE, text) if name in GRAPH_MODES]
    if downgrades:
        rec.cudagraph_mode = downgrades[-1]
        rec.cudagraph_mode_from = "vLLM's warning \"setting cudagraph_mode=" + downgrades[-1] + "\""
