"""TensorRT-LLM's (PyTorch backend) KV pool against a real start-up log: TensorRT-LLM#6294 (training split)."""

from __future__ import annotations

import sys
from pathlib import Path

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.engines.logparse import parse_log
from kvplan.engines.trtllm import engine as trt
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import find_in_catalog
from conftest import corpus_record, load_script

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "logs" / "corpus"
LOG = CORPUS / "trtllm-6294-llama31-8b-fp8-h100.log"


def _llama_fp8():
    model = find_in_catalog("llama-3.1-8b-instruct")
    return model, canonical_kv_dtype("fp8", model.dtype)


def test_the_pool_rounds_the_estimated_tokens_up_to_whole_blocks():
    # TensorRT-LLM#6294 (0.20.0, Llama-3.1-8B-Instruct-FP8 with its FP8 KV cache): "Both free_gpu_memory_fraction and
    # max_tokens are set (to 0.8 and 860308 ...)" then "Allocated 52.51 GiB for max tokens in paged KV cache (860320)".
    # Bytes a token: 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 B = 65,536. KVCacheManager.calculate_max_num_blocks
    # (resource_manager.py): blocks = ceil(860,308 / 32) = 26,885 (26,884.6 rounded up); 26,885 x 32 = 860,320 tokens;
    # 860,320 x 65,536 B = 56,381,685,760 B = 52.51 GiB. A floor would give 26,884 blocks, 860,288 tokens.
    model, kv = _llama_fp8()
    st = trt.Settings("0.20.0", 0.8, 32, 23552)
    dep = Deployment(1, 1)
    assert trt.bytes_per_token(model.layers, 1, kv) == 65_536
    cap = trt.capacity(model, dep, 860_308 * 65_536, 157, 4096, st, kv)
    assert (cap.blocks, cap.tokens) == (26_885, 860_320)
    assert round(cap.tokens * 65_536 / 2**30, 2) == 52.51
    # a budget one byte short of 860,308 tokens holds 860,307 of them: still 26,885 blocks; 32 x 26,884 = 860,288
    # tokens exactly (a whole number of blocks) gives 26,884 blocks and no extra one
    assert trt.capacity(model, dep, 860_308 * 65_536 - 1, 157, 4096, st, kv).blocks == 26_885
    assert trt.capacity(model, dep, 860_288 * 65_536, 157, 4096, st, kv).blocks == 26_884


def test_the_log_is_read_and_kvplan_is_exact_given_its_budget_and_within_5_percent_end_to_end():
    rec = parse_log(LOG.read_text())
    r = rec.reported
    assert rec.engine == "trtllm"
    assert int(r["max_tokens_set"].value) == 860_308 and r["fraction_set"].text == "0.800000011920929"
    assert int(r["max_tokens"].value) == 860_320 and r["kv_gib"].text == "52.51"
    # "Max KV cache pages per sequence: 5 [window size=157]": the attention window, max_seq_len here
    assert rec.settings == {"max_seq_len": 157, "max_batch_size": 4096, "max_num_tokens": 23552, "window_size": 157}
    assert rec.reported["blocks_per_seq"].value == 5

    sys.path.insert(0, str(ROOT / "benchmarks"))
    bt = load_script("benchmarks/budget_trtllm.py", "budget_trtllm")
    entry = corpus_record("trtllm-6294-llama31-8b-fp8-h100")
    given = bt._given_budget(entry, rec)
    assert given["kvplan_tokens"] == given["printed_tokens"] == 860_320 and given["tokens_bytes_in_printed_gib"]
    # End to end (H100 SXM's torch total 79.18 GiB, fraction 0.8, an estimation run of 23,552 tokens), the budget is
    # the log's 860,308 x 65,536 B = 52.51 GiB; issue 22's bound: never over by more than 5 %.
    e2e = bt._end_to_end(entry, rec)
    rel = (e2e["kvplan"]["available_kv"] - e2e["engine"]["available_kv"]) / e2e["engine"]["available_kv"]
    assert -0.05 <= rel <= 0.05
    assert e2e["kvplan"]["tokens"] % 32 == 0


def test_a_dgx_spark_log_is_exact_given_its_budget_and_unpredictable_end_to_end():
    """jeansblog/trt_llm@661401c2 README.md: trtllm-serve 1.1.0rc3 (PyTorch backend), gpt-oss-120b on a DGX Spark.
    Given the budget: the estimation run's 86,711 tokens -> ceil(86,711 / 32) = 2,710 blocks = 86,720 tokens; kv size
    73,728 B a token (36 layers x 8 KV heads x 64 x 2 B x 2, one window for every layer); 86,720 x 73,728 B =
    5.955 GiB, printed 5.95. End to end the budget is (119.70 - 113.65 + 0.56) x 0.9 = 5.95 GiB, and 49.28 GiB of the
    113.65 peak is "outside torch" on unified memory (the host's share), which no flag states: the index marks it
    unpredictable, so only the weights are compared."""
    log = CORPUS / "trtllm-jeansblog-gpt-oss-120b-gb10-v110rc3.log"
    rec = parse_log(log.read_text())
    r = rec.reported
    assert int(r["max_tokens_set"].value) == 86_711 and int(r["max_tokens"].value) == 86_720
    assert r["kv_gib"].text == "5.95" and r["non_torch_gib"].text == "49.28"
    assert round((119.70 - r["peak_gib"].value + 0.56) * 0.9, 2) == r["available_kv_gib"].value == 5.95
    bt = load_script("benchmarks/budget_trtllm.py", "budget_trtllm")
    entry = corpus_record(log.stem)
    given = bt._given_budget(entry, rec)
    assert given["kvplan_tokens"] == given["printed_tokens"] == 86_720 and given["bytes_per_token"] == 73_728
    assert given["tokens_bytes_in_printed_gib"]
    e2e = bt._end_to_end(entry, rec)
    assert entry["unpredictable"] and set(e2e["kvplan"]) == set(e2e["engine"]) == {"weights"}
