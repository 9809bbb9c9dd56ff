"""Every engine's memory table adds up: usable x utilisation - weights - overhead [- LoRA] [x free fraction] = KV cache.

Issue 21: TensorRT-LLM's table printed 79.18 x 1 - 14.96 - 1.18 "= KV cache 56.73" (that is 63.04): the engine's
free_gpu_memory_fraction 0.9 of what is left (engines/trtllm/engine.py kv_budget) was applied but not shown. The
step is now Plan.kv_share, set by the engine layer and printed as a row of its own. These checks redo each table's
arithmetic from the plan's integers, then read the printed rows back and check they show those integers, in order.
"""
from __future__ import annotations

import re

import pytest
from rich.console import Console

from kvplan import api
from kvplan.core.units import gib
from kvplan.report.text import render_plans
from kvplan.sources.catalog import find_in_catalog

ENGINES = (None, "vllm", "sglang", "llama.cpp", "trtllm", "transformers")
# (model, gpu, keyword arguments): a dense model, a unified-memory GPU (gb10), tp x pp, a utilisation asked for
# (TensorRT-LLM reads it as its fraction), adapters, a given KV budget, a hybrid with SGLang's state pool
CASES = (
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-8b", "gb10", {}),
    ("llama-3.1-70b", "h100-sxm", {"tp": 2, "pp": 2}),
    ("qwen3-30b-a3b", "h100-sxm", {"gpu_memory_utilization": 0.8}),
    ("llama-3.1-8b", "h100-sxm", {"lora": "4:16"}),
    ("llama-3.1-8b", "h100-sxm", {"kv_cache_memory": "20GiB"}),
    ("nvidia-nemotron-3-nano-30b-a3b-bf16", "h100-sxm", {}),
)
# what an engine refuses outright (its own reason, tested elsewhere): llama.cpp and transformers price no LoRA,
# TensorRT-LLM keeps recurrent states in a Mamba cache manager kvplan does not model
REFUSED = {("llama.cpp", "lora"), ("transformers", "lora"), ("trtllm", "nvidia-nemotron-3-nano-30b-a3b-bf16")}
GIB = re.compile(r"(-?[\d,]+\.\d\d) GiB")


def _rows(plan, model_name: str, gpu_key: str) -> dict[str, str]:
    """The printed memory table, label -> cell, in order."""
    console = Console(width=120, record=True, force_terminal=False)
    render_plans(console, [plan], find_in_catalog(model_name), api.gpu(gpu_key), ["1 GPU"])
    text = console.export_text().split("Answers per deployment")[0]
    rows = {}
    for line in text.splitlines():
        if "│" in line:
            label, cell = (part.strip() for part in line.split("│")[:2])
            rows[label] = cell
    return rows


def _num(cell: str) -> float:
    return float(GIB.findall(cell)[-1].replace(",", ""))


@pytest.mark.parametrize("engine", ENGINES)
def test_memory_table_adds_up(engine, kvplan_home):
    for model, gpu, kw in CASES:
        if (engine, model) in REFUSED or (engine, next(iter(kw), "")) in REFUSED:
            continue
        p = api.plan(model, gpu, context="32k", engine=engine, **kw)
        r = p.request
        assert p.budget_bytes == int(p.usable_memory_bytes * r.gpu_memory_utilization)
        left = p.budget_bytes - p.weight_bytes_per_gpu - p.overhead_bytes_per_gpu - r.lora_bytes
        rows = _rows(p, model, gpu)
        labels = list(rows)
        if p.above_budget:  # what the engine allocates above its budget (SGLang's request slots): not a step of the sum
            above = f"above it: {p.above_budget[0]}"
            after = "× utilisation" if "× utilisation" in labels else "usable memory"  # a given budget: no scaling
            assert labels[labels.index(after) + 1] == above, (engine, model, rows)
            assert rows[above] == f"{gib(p.above_budget[1])} of {gib(p.above_budget[2])}"
            labels.remove(above)
        if r.kv_cache_memory_bytes is not None:  # the budget given: shown as it is, nothing scaled
            assert p.kv_share == 1 and p.kv_memory_bytes_per_gpu == 20 * 2**30
            given = [label for label in labels if label.startswith("KV cache (")]  # (its input's name)
            assert len(given) == 1 and rows[given[0]] == gib(20 * 2**30) and "× free fraction" not in rows
            continue
        # TensorRT-LLM keeps free_gpu_memory_fraction (0.9, or the utilisation asked) of what is left; the rest all
        want = (0.8 if "gpu_memory_utilization" in kw else 0.9) if engine == "trtllm" and left > 0 else 1.0
        assert p.kv_share == want, (engine, model)
        kv = int(left * p.kv_share) if p.kv_share != 1 else left
        assert p.kv_memory_bytes_per_gpu == kv, (engine, model, left, p.kv_share)
        steps = ["usable memory", "× utilisation", "− weights", labels[3]]
        cells = [gib(p.usable_memory_bytes), f"{r.gpu_memory_utilization:g} → {gib(p.budget_bytes)}",
                 gib(p.weight_bytes_per_gpu), gib(p.overhead_bytes_per_gpu)]
        if r.lora is not None:
            steps.append(f"− LoRA {r.lora.text}")
            cells.append(gib(r.lora_bytes))
        if p.kv_share != 1:
            steps.append("× free fraction")
            cells.append(f"{p.kv_share:g} → {gib(kv)}")
        steps.append("= KV cache")
        cells.append(gib(kv))
        assert labels[:len(steps)] == steps and [rows[s] for s in steps] == cells, (engine, model, rows)
        # the printed figures add up to within their rounding (each to 0.005 GiB)
        printed = _num(rows["× utilisation"]) - sum(_num(rows[s]) for s in steps[2:-1] if s[0] == "−")
        assert abs(printed * p.kv_share - _num(rows["= KV cache"])) < 0.03, (engine, model, rows)
        if p.state_pool_bytes_per_gpu and kv > 0:  # SGLang's hybrids: KV cache - state pool = token pool
            rest = kv - p.state_pool_bytes_per_gpu - p.token_pool_bytes_per_gpu
            assert 0 <= rest < p.kv_bytes_per_token_per_gpu + 2**20, (engine, model, rest)
            assert labels[labels.index("= KV cache") + 1:][:2] == ["− state pool", "= token pool"]


def test_trtllm_issue_21_table(kvplan_home):
    # the issue's command: 79.18 GiB x 1 - 14.96 - 1.18 = 63.04 GiB left, x 0.9 = 56.73 GiB
    p = api.plan("llama-3.1-8b", "h100-sxm", context="32k", engine="trtllm")
    rows = _rows(p, "llama-3.1-8b", "h100-sxm")
    assert rows["× free fraction"] == "0.9 → 56.73 GiB" and rows["= KV cache"] == "56.73 GiB"
    assert rows["− weights"] == "14.96 GiB" and rows["usable memory"] == "79.18 GiB"


def test_a_hybrid_that_does_not_fit_shows_its_whole_shortfall(kvplan_home):
    # Qwen3.5-35B-A3B's bf16 weights (65.47 GiB) on one H100 under SGLang leave -5.08 GiB of KV memory; its state pool
    # (0.06 GiB) comes out of that too, so the token pool row is -5.14 GiB, not the engine's empty pool of 0, and
    # free is that less the request's 5.00 GiB: -10.14 (the table's rows subtract as printed)
    p = api.plan("qwen3.5-35b-a3b", "h100-sxm", engine="sglang")
    rows = _rows(p, "qwen3.5-35b-a3b", "h100-sxm")
    kv, state, pool = (_num(rows[k]) for k in ("= KV cache", "− state pool", "= token pool"))
    assert kv < 0 and abs(kv - state - pool) < 0.011, rows
    assert abs(pool - _num(rows["− batch × context"]) - _num(rows["= free"])) < 0.011, rows
    assert p.free_bytes_per_gpu == p.kv_memory_bytes_per_gpu - p.state_pool_bytes_per_gpu - p.kv_used_bytes_per_gpu
