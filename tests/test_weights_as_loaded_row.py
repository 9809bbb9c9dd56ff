"""The engine table's weights line as the engine's log prints it, beside the checkpoint's bytes (issue 22 item 2:
"weights as loaded per engine and version ... beside the checkpoint's bytes")."""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.report.text import format_figure
from kvplan.sources.catalog import find_in_catalog

GIB = 2**30


def _row(engine, version, model="llama-3.1-8b", gpu="h100-sxm"):
    res = resolve_engine(engine, version).result(find_in_catalog(model), find_gpu(gpu), Deployment(1),
                                                 Request(context=8192))
    rows = [f for f in res.capacity.lines if f.unit == "checkpoint + loading"]
    return res, rows


def test_vllm_llama_31_8b_is_its_checkpoint_plus_the_rope_table_as_the_log_prints_it():
    # checkpoint: 16,060,522,496 B, the safetensors index total of meta-llama/Meta-Llama-3.1-8B
    # (../shared/configs/checkpoints.yaml); loading adds vLLM's RoPE cos/sin cache, max_position 131,072 x rotary
    # dim 128 x 2 B (bf16) = 33,554,432 B. Sum 16,094,076,928 B = 14.99 GiB, shown as vLLM's "Model loading took"
    # line prints it (the corpus's llm-d log of this model is held out: not read here).
    res, rows = _row("vllm", "0.19.0")
    assert len(rows) == 1 and rows[0].label.startswith("Model loading took")
    assert rows[0].value == (16_060_522_496, 131_072 * 128 * 2)
    assert format_figure(rows[0]) == "14.99 GiB = 14.96 checkpoint + 0.03 loading"
    assert sum(rows[0].value) == res.plan.weight_bytes_per_gpu == 16_094_076_928


def test_no_row_where_loading_adds_nothing():
    # kvplan's own rules load the checkpoint as stored: its weights line is the checkpoint, nothing to put beside it
    _, rows = _row(None, None)
    assert rows == []
