"""What the speed corpus may not hold: one run counted twice, in training, in the held-out split or across them
(issues 21 and 22: the same measurement twice weighs it twice, or scores it twice), and a training run whose decode
ran SGLang's torch.compile path, which kvplan has no term for (issue 21, SGLang before 0.5.14 on H200). Only the
records' measured figures are compared; no held-out error is read."""

import json
import math
from collections import defaultdict
from pathlib import Path

from conftest import speed_cases, speed_corpus_points
from kvplan.speed.corpus import in_training

CORPUS = Path(__file__).parent / "fixtures" / "speed"
# sgl-project/sglang@v0.4.1:python/sglang/srt/server_args.py: torch_compile_max_bs = 32 (the default every release
# since keeps); model_executor/cuda_graph_runner.py compiles the captured batch sizes up to it, no larger one
TORCH_COMPILE_MAX_BS = 32


def _figures(metrics: dict) -> list[float]:
    """A point's measured numbers, nested ones (mean / median / p99) each counted."""
    out = []
    for value in metrics.values():
        out.extend(_figures(value) if isinstance(value, dict) else [value] if isinstance(value, (int, float)) else [])
    return out


def _one_run(figures: list[float]) -> bool:
    """Enough equal figures to be one run: three or more (one or two may coincide: TensorRT-LLM's perf overviews
    print a single tok/s per cell), or two printed to 10+ significant digits (raw floats do not coincide)."""
    long = [f for f in figures if len(repr(float(f)).replace(".", "").replace("-", "").lstrip("0")) >= 10]
    return len(figures) >= 3 or len(long) >= 2


def test_no_run_is_printed_twice_in_either_split_or_across_them():
    # GPUStack's GLM-4.5-Air H100 page (gpustack/gpustack docs/performance-lab/glm-4.5-air/h100.md) prints under
    # "Other Benchmark Cases" the A100 page's eight blocks (random 32K input: 498.76 s, 6435.97 tok/s, mean TPOT
    # 305.47 ms in both), which its own Conclusion table contradicts (20732.85 tok/s, 176.99 ms): left out there.
    # aiconfigurator's silicon_sample.csv holds SGLang 0.5.9's DeepSeek-R1 run on 8 x H200 twice, as config_id 81
    # (a 2026-04-27 db dump) and as the 2026-03-25 rows: TTFT 259.9114292766899 ms, TPOT 10.29225441516629 ms at
    # concurrency 4 in both; the config-81 rows are left out.
    seen = defaultdict(list)
    for source, p in speed_corpus_points():
        metrics = p.get("metrics") or {}
        if _one_run(_figures(metrics)):
            seen[json.dumps(metrics, sort_keys=True)].append((source, p["id"]))
    assert [ids for ids in seen.values() if len(ids) > 1] == []
    ids = {(s, p["id"]) for s, p in speed_corpus_points()}
    assert ("gpustack-perflab-glm-45-air-a100.yaml", "L332-vllm") in ids
    assert ("gpustack-perflab-glm-45-air-h100.yaml", "L336-vllm") not in ids
    assert ("aiconfigurator-silicon-sample.yaml", "dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81") not in ids
    assert ("aiconfigurator-silicon-sample.yaml",
            "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_289") in ids
    assert _one_run([259.9114292766899, 10.29225441516629]) and not _one_run([259.91, 10.29])


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
    cases, _ = speed_cases()
    held = {}
    for c in cases:
        rate = c.load.rate
        if c.flags.get("enable_torch_compile") and c.gpu and in_training(c.source) and rate and rate != math.inf:
            held[(c.source, c.id)] = rate * c.targets["e2el"]
    assert held, "no torch.compile run at a request rate left to check"
    assert {k: round(v, 1) for k, v in held.items() if v <= TORCH_COMPILE_MAX_BS} == {}
    assert math.isclose(held[("datacrunch-h200-sglang-outputs", "l33-70b-tp4-online-random-1024x1024-r4")],
                        4 * 12.896330808075727, rel_tol=1e-9)
