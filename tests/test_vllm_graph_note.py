"""The plan's note on vLLM's CUDA-graph estimate (kvplan.engines.vllm.cudagraphs)."""

from __future__ import annotations

from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def test_the_plan_says_how_the_graphs_are_priced():
    model, gpu = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    from kvplan.engines.vllm.cudagraphs import graph_notes

    # Llama 3.1 8B: 32 layers x 0.126 MiB -> a 6 MiB graph, the figure the note names
    st = vllm_settings(model, gpu, Deployment(), Request(context=8192), "0.20.0")
    (fitted,) = graph_notes(model, Deployment(), st)
    assert "6 MiB a further graph" in fitted and "fitted" in fitted
    st = vllm_settings(model, gpu, Deployment(), Request(context=8192), "0.19.0")
    assert graph_notes(model, Deployment(), st) == ()  # not subtracted: nothing to say
