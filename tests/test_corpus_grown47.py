"""The forty-seventh round's rows grown into two InferenceX runs read as their PRs' baseline tables print them."""

from pathlib import Path

import pytest
import yaml

from kvplan.speed.corpus import read_corpus

CORPUS = Path(__file__).parent / "fixtures" / "speed"
GROWN = {
    # SemiAnalysisAI/InferenceX#3317's baseline table (dsr1-fp8-b200-trt, 2026-05-18, TensorRT-LLM 1.3.0rc14)
    "inferencex-run-26016874169": ("tp4-1k1k-c8", "tp8-1k1k-c8", "tp8-1k1k-c64", "tp8-1k1k-c128"),
    # SemiAnalysisAI/InferenceX#3173's and #3288's (dsr1-fp8-h200-sglang, 2026-05-17, SGLang 0.5.12)
    "inferencex-run-25980019087": ("tp8-1k1k-c32", "tp8-8k1k-c32"),
}


def _cases():
    cases, _ = read_corpus(CORPUS)
    return {(c.source, c.id): c for c in cases if c.source in GROWN}


def test_the_grown_rows_are_read_beside_the_fixture_rows():
    got = _cases()
    assert sum(1 for s, _ in got if s == "inferencex-run-26016874169") == 5 + 4
    assert sum(1 for s, _ in got if s == "inferencex-run-25980019087") == 8 + 2
    assert all((s, i) in got for s, ids in GROWN.items() for i in ids)


def test_trtllm_serve_c128_reads_as_the_table_row():
    # "| 1k/1k c128 TP8 EP1 b974b1 | 1,228.86 | 613.76 | 591.66 | 24.54 |": TTFT 591.66 ms = 0.59166 s, TPOT 24.54 ms,
    # the deployment's output rate 613.76 tok/s/GPU x 8 GPUs = 4,910.08 tok/s; 128 x 10 = 1,280 prompts drawn on
    # [819, 1024] tokens each way (mean 921.5)
    c = _cases()[("inferencex-run-26016874169", "tp8-1k1k-c128")]
    assert (c.engine, c.version, c.gpu, c.model, c.tp, c.ep, c.gpus) == ("trtllm", "1.3.0rc14", "b200", "deepseek-r1",
                                                                       8, 1, 8)
    assert c.targets["ttft"] == pytest.approx(0.59166) and c.targets["tpot"] == pytest.approx(0.02454)
    assert c.targets["output_throughput"] == pytest.approx(4910.08)
    assert (c.load.concurrency, c.load.num_prompts, c.load.isl, c.load.osl) == (128, 1280, 921.5, 921.5)
    assert c.load.drawn and c.load.served and c.load.endpoint == "completions"
    # the script's rules at 1k/1k from concurrency 64: piecewise CUDA graphs and batch waiting (40 iterations, 0.8)
    assert c.flags["batch_wait_timeout_iters"] == 40 and c.flags["batch_wait_max_tokens_ratio"] == 0.8
    assert c.flags["enable_piecewise_cuda_graph"] is True and c.flags["cuda_graph_max_batch_size"] == 128


def test_trtllm_serve_tp4_c8_reads_its_four_gpus():
    # "| 1k/1k c8 TP4 EP1 f3f420 | 294.45 | 147.77 | 194.49 | 13.06 |": 147.77 x 4 = 591.08 tok/s, no batch waiting
    c = _cases()[("inferencex-run-26016874169", "tp4-1k1k-c8")]
    assert (c.tp, c.gpus) == (4, 4) and c.targets["output_throughput"] == pytest.approx(591.08)
    assert c.targets["ttft"] == pytest.approx(0.19449) and "batch_wait_timeout_iters" not in c.flags


def test_sglang_h200_c32_rows_read_as_the_table_rows():
    # "| 8k/1k c32 TP8 EP1 b44470 | 1,082.12 | 121.01 | 979.34 | 31.37 |": 121.01 x 8 = 968.08 tok/s; inputs drawn on
    # [6553, 8192] (mean 7,372.5), the script's 8k/1k limits (--max-running-requests 256)
    got = _cases()
    c = got[("inferencex-run-25980019087", "tp8-8k1k-c32")]
    assert (c.engine, c.version, c.gpu, c.tp) == ("sglang", "0.5.12", "h200-sxm", 8)
    assert c.targets["output_throughput"] == pytest.approx(968.08)
    assert c.targets["ttft"] == pytest.approx(0.97934) and c.targets["tpot"] == pytest.approx(0.03137)
    assert c.load.isl == 7372.5 and c.load.num_prompts == 320 and c.max_seqs == 256
    # "| 1k/1k c32 TP8 EP1 d4aede | 353.72 | 177.14 | 307.02 | 21.8 |": 177.14 x 8 = 1,417.12 tok/s
    c = got[("inferencex-run-25980019087", "tp8-1k1k-c32")]
    assert c.targets["output_throughput"] == pytest.approx(1417.12) and c.max_seqs == 512


@pytest.mark.parametrize("source", sorted(GROWN))
def test_each_grown_point_holds_its_rows_figures(source):
    # every grown point's metrics are its verbatim table row's columns: total and output tok/s/GPU, TTFT and TPOT
    doc = yaml.safe_load((CORPUS / f"{source}.yaml").read_text())
    points = {p["id"]: p for p in doc["points"]}
    for pid in GROWN[source]:
        p = points[pid]
        cells = [x.strip().replace(",", "") for x in p["row"].strip("|").split("|")]
        total, out, ttft, tpot = (float(x) for x in cells[1:])
        m = p["metrics"]
        assert (m["per_gpu_total_throughput"], m["per_gpu_output_throughput"]) == (total, out)
        assert (m["ttft_ms"], m["tpot_ms"]) == ({"mean": ttft}, {"mean": tpot})
        assert cells[0].split()[1] == f"c{p['concurrency']}" and p["num_prompts"] == 10 * p["concurrency"]
