"""What the speed corpus's training sources may not hold (issue 21, SGLang before 0.5.14 on H200): one run counted
twice, and a run whose decode ran SGLang's torch.compile path, which kvplan has no term for. Held-out sources are
not checked: their records are not edited while the model is chosen."""

import json
import math
from collections import defaultdict
from pathlib import Path

from conftest import speed_corpus_points
from kvplan.speed.corpus import in_training, read_corpus

CORPUS = Path(__file__).parent / "fixtures" / "speed"
# sgl-project/sglang@v0.4.1:python/sglang/srt/server_args.py: torch_compile_max_bs = 32 (the default every release
# since keeps); model_executor/cuda_graph_runner.py compiles the captured batch sizes up to it, no larger one
TORCH_COMPILE_MAX_BS = 32


def test_no_training_source_prints_one_run_twice():
    # GPUStack's GLM-4.6 H200 page (gpustack/gpustack docs/performance-lab/glm-4.x/h200.md) re-prints its section-2
    # SGLang FP8 TP8 block as section 3's TP8 baseline: duration 52.72 s, 3,791.55 tok/s, mean TTFT 5,085.56 ms,
    # mean TPOT 271.63 ms, mean ITL 105.34 ms in both. Three or more figures equal to the last digit are one run
    # (one or two may coincide: TensorRT-LLM's perf overviews print a single tok/s per cell).
    seen = defaultdict(list)
    for source, p in speed_corpus_points():
        metrics = p.get("metrics") or {}
        if in_training(source.removesuffix(".yaml")) and len(metrics) >= 3:
            seen[(source, json.dumps(metrics, sort_keys=True))].append(p["id"])
    assert [ids for ids in seen.values() if len(ids) > 1] == []
    glm = [p["id"] for s, p in speed_corpus_points() if s == "gpustack-perflab-glm-4x-h200.yaml"]
    assert "L160-sglang" in glm and "L195-sglang" not in glm


def test_no_priced_training_run_decodes_in_torch_compile_graphs():
    # A run at a request rate holds rate x mean E2E requests on average (Little's law). Datacrunch's Llama-3.3-70B
    # on 4 x H200 at 1 request/s: 1 x 7.84 s = 7.8 requests, within 32, left out; at 4/s: 4 x 12.90 s = 51.6, kept.
    cases, _ = read_corpus(CORPUS)
    held = {}
    for c in cases:
        rate = c.load.rate
        if c.flags.get("enable_torch_compile") and c.gpu and in_training(c.source) and rate and rate != math.inf:
            held[(c.source, c.id)] = rate * c.targets["e2el"]
    assert held, "no torch.compile run at a request rate left to check"
    assert {k: round(v, 1) for k, v in held.items() if v <= TORCH_COMPILE_MAX_BS} == {}
    assert math.isclose(held[("datacrunch-h200-sglang-outputs", "l33-70b-tp4-online-random-1024x1024-r4")],
                        4 * 12.896330808075727, rel_tol=1e-9)
