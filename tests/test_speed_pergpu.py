"""The corpus reader's per-GPU total throughput read as the deployment's output tok/s (kvplan.speed.pergpu)."""

from pathlib import Path

import pytest
import yaml

from kvplan.speed.corpus import case_of, read_corpus

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def _cookbook_point(source: str, point_id: str) -> tuple[dict, str]:
    doc = yaml.safe_load((CORPUS / f"{source}.yaml").read_text())
    point = next(p for p in doc["points"] if p["id"] == point_id)
    return {**(doc.get("defaults") or {}), **point}, doc["source"]["id"]


def test_qwen35_h200_cell_reads_as_output_throughput():
    # SGLang cookbook, Qwen3.5-27B bf16 on 1 x H200, random 8,192 + 1,024 at concurrency 1,024:
    # tokens_per_sec_per_gpu 6,380, which the page defines as "output tok/s / (tp*nnodes) * (isl+osl)/osl"
    # (qwen3.5-benchmarks.jsx L2-5, one node, tp 1). Inverted: 6,380 x 1 x 1,024 / 9,216 = 708.9 output tok/s.
    p, src = _cookbook_point("sglang-docs-qwen3.5-benchmarks-v0.5.16", "h200-27b-bf16-tp1-c1024")
    case, why = case_of(p, src, "")
    assert case is not None, why
    assert case.targets["output_throughput"] == pytest.approx(708.89, abs=0.01)


def test_dp_attention_cell_counts_every_gpu():
    # DeepSeek-V4-Flash fp8 on 4 x H200 (--tp 4 --dp 4 --enable-dp-attention), concurrency 1,024:
    # 3,975 tok/s/GPU, "= output/GPU x (isl+osl)/osl" (deepseek-v4-benchmarks.jsx L4) with isl 8,192, osl 1,024.
    # Output over the 4 GPUs: 3,975 x 4 x 1,024 / 9,216 = 1,766.7 tok/s. The drawn lengths' means (4,096 and 512
    # for a uniform draw up to the stated lengths) keep the ratio 512 / 4,608 = 1 / 9.
    p, src = _cookbook_point("sglang-docs-deepseek-v4-benchmarks", "h200-fp8-ht-c1024")
    case, why = case_of(p, src, "")
    assert case is not None, why
    assert case.targets["output_throughput"] == pytest.approx(1766.67, abs=0.01)


def test_a_stated_output_rate_wins_and_an_undefined_total_stays_unread():
    base = {"engine": "sglang", "gpu": "h200-sxm", "kvplan_model": "qwen3.5-27b", "gpus": 2, "tp": 2,
            "isl": 8192, "osl": 1024, "concurrency": 16}
    spec = {"over": "gpus", "cite": "x"}
    # a run that states its own output rate (1,000 tok/s) is never given a second figure
    own = {**base, "per_gpu_total": spec, "metrics": {"output_throughput": 1000, "per_gpu_total_throughput": 9000}}
    case, _ = case_of(own, "t", "")
    assert case.targets["output_throughput"] == 1000
    # no per_gpu_total: what the figure divides by is not established, the point has no figure to price
    bare = {**base, "metrics": {"per_gpu_total_throughput": 9000}}
    assert case_of(bare, "t", "") == (None, "no metric kvplan predicts")
    # defined: 9,000 x 2 GPUs x 1,024 / 9,216 = 2,000 tok/s
    case, _ = case_of({**bare, "per_gpu_total": spec}, "t", "")
    assert case.targets["output_throughput"] == pytest.approx(2000.0)


@pytest.mark.parametrize("spec, figure, reason", [
    ({"over": "nodes", "cite": "x"}, 9000, "over 'nodes'"),
    ({"over": "gpus"}, 9000, "no cite"),
    ({"over": "gpus", "cite": "x"}, "fast", "'fast' is not a number"),
    ({"over": "gpus", "cite": "x"}, -5, "not a positive number"),
    ("gpus", 9000, "not a mapping"),
])
def test_a_malformed_per_gpu_total_is_refused(tmp_path, spec, figure, reason):
    doc = {"source": {"id": "t", "date": None},
           "points": [{"id": "a", "engine": "sglang", "gpu": "h200-sxm", "kvplan_model": "qwen3.5-27b", "gpus": 1,
                       "isl": 8192, "osl": 1024, "concurrency": 1, "per_gpu_total": spec,
                       "metrics": {"tpot_ms": {"median": 5.0}, "per_gpu_total_throughput": figure}}]}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=reason):
        read_corpus(tmp_path)
