"""check-log reads the cudagraph_mode and compilation mode a vLLM log prints and prices the graphs they key (issue 22).

vLLM prints its resolved VllmConfig at start-up (v1/engine/core.py 0.21.0 L109-112), `'cudagraph_mode':
<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>` and `'mode': <CompilationMode.VLLM_COMPILE: 3>` among it (0.10's JSON
form: `"cudagraph_mode":1`, `"level":3`); a backend that cannot run the mode logs "...; setting cudagraph_mode=X"
later (config/compilation.py 0.21.0 L1338-1389). The dispatcher keys (v1/cudagraph_dispatcher.py 0.21.0 L188-230):
the mixed routine at every capture size (PIECEWISE, or FULL in FULL mode), a separate routine's FULL decode graphs at
the sizes up to max_num_seqs. Records are training records of tests/fixtures/logs/corpus (budget_corpus.py's split);
the variants below edit only the mode fields of a training log's config line.
"""

from __future__ import annotations

import pytest
from conftest import training_log

from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.engines.vllm import cudagraphs as cg
from kvplan.engines.vllm.log_graphs import NO_GRAPHS, mode_shape
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import require_in_catalog

LLMD = "llmd-qwen-qwen2-5-7b-i-h100-80gb-tp1pp1dp1-8192-dtbf16"
DEFAULT_MODE = "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>"
MIB, GIB = 2**20, 2**30


def _graph_row(text: str):
    """check-log's CUDA-graph row and notes for the llm-d Qwen2.5-7B log (vLLM 0.19.0, H100) as edited."""
    res = reconcile(parse_log(text), require_in_catalog("qwen2.5-7b-instruct"), find_gpu("h100-sxm"), None)
    row = next(r for r in res.rows if r.quantity.startswith("CUDA graphs"))
    return row, [n for n in res.notes if "cudagraph_mode" in n]


def test_the_printed_modes_are_read():
    """The llm-d log prints FULL_AND_PIECEWISE under VLLM_COMPILE (3); kvplan's estimate is the one it gave with the
    default assumed (0.61 GiB, the printed 0.61: test_checklog_graphs), now said to be the log's mode."""
    text = training_log(LLMD)
    assert f"'cudagraph_mode': {DEFAULT_MODE}" in text and "'mode': <CompilationMode.VLLM_COMPILE: 3>" in text
    rec = parse_log(text)
    assert (rec.cudagraph_mode, rec.compilation_mode) == ("FULL_AND_PIECEWISE", 3)
    row, notes = _graph_row(text)
    assert (row.reported, row.predicted) == ("0.61 GiB", "0.61 GiB (estimate)")
    said = "cudagraph_mode FULL_AND_PIECEWISE (from the log's engine config; compilation mode 3, VLLM_COMPILE)"
    assert said in notes[0]


@pytest.mark.parametrize("mode, shape, mib", [
    # 51 PIECEWISE graphs only: the 209 MiB first capture + 50 further x 4 MiB (28 layers x 0.126 = 3.53 -> 4) = 409
    ("PIECEWISE", (("PIECEWISE", 51, 512),), 209 + 50 * 4),
    # FULL decode graphs at the 51 sizes up to max_num_seqs 1024: FA3's accumulator at 512 tokens, 32 splits x 4 B x
    # 512 x 28 heads x 128 = 224 MiB, + 4 = 228 above the constant; 228 + 50 x 4 = 428
    ("FULL_DECODE_ONLY", (("FULL", 51, 512),), 228 + 50 * 4),
    # one FULL routine at every capture size: the same 51 graphs here (max_num_seqs 1024 covers them all)
    ("FULL", (("FULL", 51, 512),), 228 + 50 * 4),
    ("NONE", NO_GRAPHS, 0),  # no graphs: vLLM's profile_cudagraph_memory returns 0
])
def test_each_mode_prices_the_graphs_it_keys(mode, shape, mib):
    text = training_log(LLMD).replace(DEFAULT_MODE, f"<CUDAGraphMode.{mode}: 1>")
    row, notes = _graph_row(text)
    assert row.predicted == f"{mib * MIB / GIB:.2f} GiB (estimate)"
    assert f"cudagraph_mode {mode} (from the log's engine config" in notes[0]
    sizes = cg.capture_sizes(512)
    assert mode_shape(mode, sizes, sizes) == shape
    if mode.startswith("FULL"):
        assert "an extrapolation" in notes[0]


def test_a_mode_without_capture_sizes_takes_vllms_default_list():
    """The llm-d log with its `'cudagraph_capture_sizes': [...]` cut: the mode is still the log's, the sizes vLLM's
    default list up to min(2 x 1024, 512) = 512 (51), FULL decode graphs at the 51 up to max_num_seqs 1024: the same
    228 + (50 + 50) x 4 = 628 MiB = 0.61 GiB, and the note says the sizes are the default list."""
    full = ", ".join(str(x) for x in cg.capture_sizes(512))
    text = training_log(LLMD).replace(f"'cudagraph_capture_sizes': [{full}]", "")
    assert not parse_log(text).capture_sizes
    row, notes = _graph_row(text)
    assert row.predicted == "0.61 GiB (estimate)" and 628 * MIB / GIB == pytest.approx(0.613, abs=1e-3)
    assert notes[0].startswith("CUDA-graph capture sizes: vLLM's default list (the log prints none), cudagraph_mode "
                               "FULL_AND_PIECEWISE (from the log's engine config")
    assert notes[0].endswith("PIECEWISE=51 (largest=512), FULL=51 (largest=512)")


def test_a_compilation_mode_without_vllm_compile_turns_piecewise_graphs_off():
    """config/vllm.py 0.21.0 L1020-1030: a cudagraph_mode that needs piecewise compilation under a compilation mode
    other than VLLM_COMPILE is overridden to NONE; the note says why the estimate is 0."""
    text = training_log(LLMD).replace("<CompilationMode.VLLM_COMPILE: 3>", "<CompilationMode.NONE: 0>")
    row, notes = _graph_row(text)
    assert row.predicted == "0.00 GiB (estimate)"
    assert "compilation mode 0, NONE, not VLLM_COMPILE, so vLLM overrides it to NONE" in notes[0]


def test_a_downgrade_warning_replaces_the_printed_mode():
    """club3090#104 (training): FlashInfer cannot run FULL decode graphs with spec-decode, so vLLM warns "...; setting
    cudagraph_mode=PIECEWISE" (config/compilation.py 0.21.0 L1372-1389) and profiles PIECEWISE graphs only."""
    rec = parse_log(training_log("club3090-104-qwen36-27b-autoround-2x3090"))
    assert rec.cudagraph_mode == "PIECEWISE" and "setting cudagraph_mode=PIECEWISE" in rec.cudagraph_mode_from
    assert rec.graph_shape == (("PIECEWISE", 5, 16),)
    line = ("(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:109] Initializing a V1 LLM engine (v0.21.0) with config: "
            f"compilation_config={{'mode': <CompilationMode.VLLM_COMPILE: 3>, 'cudagraph_mode': {DEFAULT_MODE}}}\n"
            "(EngineCore pid=1) WARNING 01-01 00:00:01 [compilation.py:1390] CUDAGraphMode.FULL_AND_PIECEWISE is not "
            "supported with spec-decode for attention backend FlashInferBackend (support: "
            "AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting cudagraph_mode=PIECEWISE\n"
            "(EngineCore pid=1) INFO 01-01 00:00:02 [kv_cache_utils.py:1710] GPU KV cache size: 46,368 tokens\n")
    rec = parse_log(line)
    assert (rec.cudagraph_mode, rec.compilation_mode) == ("PIECEWISE", 3)


def test_the_json_config_of_0_10_is_read():
    """dennislee22's vLLM 0.10.1.1 log (training) prints its config as JSON: `"level":3` and `"cudagraph_mode":1`,
    PIECEWISE (CUDAGraphMode's values, config/compilation.py 0.21.0 L59-63), 0.10's default."""
    text = training_log("dennislee22-7b-2gpua10080gb-0-25gram-same-node")
    assert '"cudagraph_mode":1' in text and '"level":3' in text
    rec = parse_log(text)
    assert (rec.cudagraph_mode, rec.compilation_mode) == ("PIECEWISE", 3)
