"""`kvplan check-log` on TensorRT-LLM (PyTorch backend) start-up logs: the corpus's TensorRT-LLM#6294 and
triton-inference-server/tutorials#150 excerpts (tests/fixtures/logs/corpus/index.yaml cites each).

The pool is exact given the log's own budget (max_tokens = budget // bytes a token, blocks = ceil(max_tokens / 32):
KVCacheManager.calculate_max_num_blocks), a sequence's blocks are ceil(max_seq_len / 32) (kvCacheManager.cpp's
maxBlocksPerSeq), and the printed "Allocated X GiB for max tokens in paged KV cache (N)" pair brackets the bytes a
token (X is rounded to 0.01 GiB).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app
from kvplan.engines.logparse import parse_log
from kvplan.engines.trtllm.reconcile import reconcile_trtllm
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"
LOG_6294 = CORPUS / "trtllm-6294-llama31-8b-fp8-h100.log"
LOG_150 = CORPUS / "trtllm-tutorials150-specdec.log"
runner = CliRunner()


def _run(*args):
    r = runner.invoke(app, ["check-log", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    return d, {row["quantity"].split(" (")[0]: row for row in d["rows"]}


def test_6294_pool_is_exact_from_the_logs_budget():
    # TensorRT-LLM#6294 (2025-07-23): "Both free_gpu_memory_fraction and max_tokens are set (to 0.800000011920929 and
    # 860308 ...)", "Max KV cache pages per sequence: 5 [window size=157]", "Allocated 52.51 GiB for max tokens in
    # paged KV cache (860320)", max_seq_len=157. Llama-3.1-8B with an FP8 cache: 32 layers x 8 KV heads x 128 x 2 (K, V)
    # x 1 B = 65,536 B a token. ceil(860,308 / 32) = 26,885 blocks; x 32 = 860,320 tokens; 860,320 x 65,536 B =
    # 56,381,685,760 B = 52.5098 GiB, printed 52.51 (52.505 .. 52.515 GiB / 860,320 = 65,530.1 .. 65,542.5 B).
    # A sequence of 157 tokens: ceil(157 / 32) = 5 blocks; 26,885 / 5 = 5,377 requests of 157 tokens.
    d, rows = _run(LOG_6294, "--model", "llama-3.1-8b-instruct", "--engine-version", "0.20.0")
    assert d["engine"] == "trtllm" and d["version"] == "0.20.0" and d["model"] == "llama-3.1-8b-instruct"
    assert rows["max tokens in paged KV cache"]["reported"] == "860,320"
    assert rows["max tokens in paged KV cache"]["predicted"] == "860,320" and rows["max tokens in paged KV cache"]["ok"]
    assert rows["KV bytes a token"]["predicted"].startswith("65,536 B") and rows["KV bytes a token"]["ok"]
    assert rows["KV bytes a token"]["reported"] == "65,530.1 .. 65,542.5 B"
    assert (rows["blocks a sequence"]["reported"], rows["blocks a sequence"]["predicted"]) == ("5", "5")
    assert rows["max concurrency at max_seq_len 157"]["predicted"] == "5,377.00x"
    # the cache dtype is not printed: fp8 is the one whose bytes put 860,320 tokens in 52.51 GiB (bf16's 131,072 B
    # would make it 105.02 GiB); tp, the GPU and (given here) the release are notes
    assert any("fp8, whose 65,536 B a token" in n for n in d["notes"]), d["notes"]
    assert any("tp 1 assumed" in n for n in d["notes"]) and any("--gpu" in n for n in d["notes"])
    assert not any("version" in n for n in d["notes"])
    assert d["whatif"][0] == ["requests of 157 tokens", "5,377 at once (26,885 blocks of 32)"]


def test_6294_without_a_release_infers_it_from_its_timestamp(tmp_path):
    # The log prints no version; its earliest timestamp is [07/23/2025-09:16:03] (TensorRT-LLM's Python logger,
    # month/day/year). tensorrt-llm on PyPI (https://pypi.org/simple/tensorrt-llm/, upload-time): 0.20.0
    # 2025-06-19T02:38, 0.21.0 2025-08-04T06:20. By 2025-07-23 09:16 + 12 h only 0.20.0 was out: modelled as 0.20.0,
    # the release the same reporter's next paste in TensorRT-LLM#6294 prints ("TensorRT-LLM version: 0.20.0").
    r = runner.invoke(app, ["check-log", str(LOG_6294), "--model", "llama-3.1-8b-instruct", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["version"] == "0.20.0"
    assert any("does not print its TensorRT-LLM version; modelled as 0.20.0, inferred: its earliest timestamp "
               "(2025-07-23 09:16)" in n and "0.20.0 (on PyPI 2025-06-19)" in n and "--engine-version" in n
               for n in d["notes"]), d["notes"]
    # --engine-version always wins, with no note on the release
    r = runner.invoke(app, ["check-log", str(LOG_6294), "--model", "llama-3.1-8b-instruct", "--json",
                            "--engine-version", "1.2.0"])
    d = json.loads(r.stdout)
    assert d["version"] == "1.2.0" and not any("TensorRT-LLM version" in n for n in d["notes"])
    # no dated timestamp: nothing pins it, the newest kvplan knows, and the note says so
    path = tmp_path / "undated.log"
    path.write_text(re.sub(r"\[\d\d/\d\d/\d{4}-[\d:]+\] ", "", LOG_6294.read_text()))
    r = runner.invoke(app, ["check-log", str(path), "--model", "llama-3.1-8b-instruct", "--json"])
    d = json.loads(r.stdout)
    assert d["version"] == "1.2.0"
    assert any("modelled as 1.2.0, the newest kvplan knows (no dated timestamp pins it" in n for n in d["notes"])


def test_a_log_older_than_the_first_modelled_release_says_so():
    # 0.19.0 reached PyPI 2025-05-09T13:18, 0.20.0 2025-06-19T02:38: a log stamped 2025-06-01 predates 0.20.0,
    # kvplan's first modelled release, so it is modelled as 0.20.0 with the reason.
    from kvplan.engines.trtllm.reconcile import _version

    v, note = _version(None, None, datetime(2025, 6, 1, 10, 0))
    assert v == "0.20.0" and "predates 0.20.0's upload, so an older release wrote it" in note
    # 2025-06-18 20:00 local may be 2025-06-19 08:00 UTC (UTC-12), after 0.20.0's upload: 0.20.0, as an upper bound
    v, note = _version(None, None, datetime(2025, 6, 18, 20, 0))
    assert v == "0.20.0" and "inferred" in note


def test_6294_end_to_end_from_the_gpu_alone_with_the_fp8_checkpoint():
    # The budget the log implies is its estimated 860,308 tokens x 65,536 B = 52.509 GiB (floor(available / B) = N).
    # kvplan from the H100 SXM alone (torch total 79.18 GiB, fraction 0.8, an estimation run of max_num_tokens 23,552,
    # the FP8 checkpoint's weights) is +3.4% (benchmarks/budget_trtllm.py; README "TensorRT-LLM's pool against its
    # logs"); issue 22's bound: never over by more than 5 %.
    rec = parse_log(LOG_6294.read_text())
    res = reconcile_trtllm(rec, find_in_catalog("llama-3.1-8b-instruct"), find_gpu("h100-sxm"), "0.20.0", None, None,
                           weight_dtype="fp8")
    rows = {r.quantity.split(" (")[0].split(",")[0]: r for r in res.rows}
    avail = rows["available KV"]
    assert (avail.reported == "52.51 GiB" and "its tokens x B" in avail.quantity
            and 0 <= avail.error <= 0.05 and avail.ok)
    assert rows["max tokens predicted from the GPU alone"].reported == "860,320"
    assert 0 <= rows["max tokens predicted from the GPU alone"].error <= 0.05


def test_6294_with_the_bf16_model_says_its_weights_are_counted_so():
    # Given only the catalog's BF16 Llama-3.1-8B (8,030,261,248 parameters x 2 B = 14.96 GiB) and the GPU, the
    # end-to-end rows are kvplan's for a BF16 checkpoint, and a note says so (the log prints no weights).
    d, rows = _run(LOG_6294, "--model", "llama-3.1-8b-instruct", "--gpu", "h100-sxm", "--engine-version", "0.20.0")
    assert any("prints no weights; kvplan's budget counts 14.96 GiB a GPU (bf16)" in n for n in d["notes"]), d["notes"]
    assert rows["available KV, kvplan's budget from the GPU alone"]["error"] < 0  # BF16 weights leave less


def test_6294_model_and_release_from_the_log(tmp_path):
    # The same reporter's next paste in TensorRT-LLM#6294 (2025-07-24) prints "[TensorRT-LLM] TensorRT-LLM version:
    # 0.20.0" and loads "models--nvidia--Llama-3.1-8B-Instruct-FP8/snapshots/...": put before the first run's pool
    # lines, the log names its release and its FP8 checkpoint, whose weights are counted as FP8 (with a note).
    text = ("[TensorRT-LLM] TensorRT-LLM version: 0.20.0\n[07/24/2025-08:13:02] [TRT-LLM] [I] Rank 0 prefetching /root/"
            ".cache/huggingface/hub/models--nvidia--Llama-3.1-8B-Instruct-FP8/snapshots/"
            "026c7c29fdd02d53f17c125d2dec8cb1a2251c23/model-00001-of-00002.safetensors to memory...\n"
            + LOG_6294.read_text())
    rec = parse_log(text)
    assert (rec.version, rec.model) == ("0.20.0", "nvidia/Llama-3.1-8B-Instruct-FP8")
    path = tmp_path / "trt.log"
    path.write_text(text)
    d, rows = _run(path, "--gpu", "h100-sxm")  # no --model, no --engine-version
    assert (d["version"], d["model"]) == ("0.20.0", "llama-3.1-8b-instruct")
    assert any("is fp8 by its name: weights counted as fp8" in n for n in d["notes"]), d["notes"]
    assert 0 <= rows["available KV, kvplan's budget from the GPU alone"]["error"] <= 0.05


def test_tutorials150_without_a_model_checks_the_engines_own_arithmetic():
    # tutorials#150: "Max KV cache blocks per sequence: 65 [window size=2051], tokens per block=32, primary
    # blocks=116617", "Allocated 78.30 GiB for max tokens in paged KV cache (3731744)". 116,617 x 32 = 3,731,744;
    # ceil(2,051 / 32) = 65; 116,617 / 65 = 1,794.11 requests of 2,051 tokens; 78.295 .. 78.305 GiB / 3,731,744 =
    # 22,528.0 .. 22,530.8 B a token (22 layers x 4 KV heads x 64 x 2 x 2 B = 22,528: TinyLlama-1.1B's shape).
    d, rows = _run(LOG_150)
    assert (rows["max tokens in paged KV cache"]["predicted"] == "3,731,744"
            and rows["max tokens in paged KV cache"]["ok"])
    assert rows["blocks a sequence"]["predicted"] == "65" and rows["blocks a sequence"]["ok"]
    assert rows["max concurrency at 2,051 tokens"]["predicted"] == "1,794.11x"
    assert rows["KV bytes a token"]["reported"] == "22,528.0 .. 22,530.8 B"
    assert any("no model given" in n for n in d["notes"])


def test_tutorials150_with_tinyllamas_config(tmp_path):
    # TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json (the Hub's): 22 layers, 32 heads, 4 KV heads, hidden 2048
    # (head 64), bf16. 22 x 4 x 64 x 2 x 2 B = 22,528 B a token; 3,731,744 x 22,528 B = 84,068,728,832 B = 78.2951 GiB,
    # printed 78.30: in range. The model is not in kvplan's catalog, so a folder with its config is how to name it.
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
           "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
           "max_position_embeddings": 2048,
           "vocab_size": 32000, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
           "tie_word_embeddings": False, "hidden_act": "silu"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    d, rows = _run(LOG_150, "--model", tmp_path)
    assert rows["KV bytes a token"]["predicted"].startswith("22,528 B") and rows["KV bytes a token"]["ok"]
    assert rows["blocks a sequence"]["ok"] and rows["max concurrency at max_seq_len 2,051"]["predicted"] == "1,794.11x"


def test_logs_kvplan_cannot_check_fail_in_one_line(tmp_path):
    # TensorRT-LLM#1400 (v0.8, the TensorRT-engine runtime): "Allocate 69524783104 bytes for k/v cache." and "Using
    # 132608 tokens in paged KV cache." only: kvplan models the PyTorch backend's pool.
    one_line_error(runner.invoke(app, ["check-log", str(CORPUS / "trtllm-1400-smoothquant-a100.log")]), 2,
                   "TensorRT-engine runtime")
    cases = {
        "tokens per block alone": ("[TensorRT-LLM][INFO] Number of tokens per block: 32.\n", "none of the pool's"),
        "a pool, no model, no blocks": ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.51 GiB for max tokens in "
                                        "paged KV cache (860320).\n", "--model"),
        "blocks of zero tokens": ("[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 0 [window size=0], tokens "
                                  "per block=0, primary blocks=0, secondary blocks=0\n", "must be positive"),
        "a fraction past 1": ("[TRT-LLM] [W] Both free_gpu_memory_fraction and max_tokens are set (to 7.5 and 860308, "
                              "respectively).\n[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.51 GiB for max "
                              "tokens in paged KV cache (860320).\n", "not a fraction"),
        "a corrupt count": ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.51 GiB for max tokens in paged KV "
                            "cache (99999999999999999999).\n", "beyond any real deployment"),
    }
    for name, (text, words) in cases.items():
        path = tmp_path / "trt.log"
        path.write_text(text)
        one_line_error(runner.invoke(app, ["check-log", str(path), "--model", "llama-3.1-8b-instruct"]
                                     if name == "a fraction past 1" else ["check-log", str(path)]), 2, words)


def test_the_estimation_runs_rounded_budget_is_a_range_of_tokens(tmp_path):
    # No fixture prints the estimation run's "available KV cache memory when calculating max tokens" line; this one
    # puts #6294's own budget there (52.51 GiB, the GiB its 860,308 estimated tokens x 65,536 B round to), in the
    # words of _torch/pyexecutor/_util.py (docs/engines.md section 3). 52.505 .. 52.515 GiB // 65,536 B =
    # 52.505 x 16,384 = 860,241.9 .. 52.515 x 16,384 = 860,405.8: tokens 860,241 .. 860,405, which hold 860,308.
    text = ("[TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): 20.00 GiB, available KV "
            "cache memory when calculating max tokens: 52.51 GiB, fraction is set 0.8\n" + LOG_6294.read_text())
    path = tmp_path / "trt.log"
    path.write_text(text)
    d, rows = _run(path, "--model", "llama-3.1-8b-instruct", "--engine-version", "0.20.0")
    row = rows["max tokens from the printed available KV"]
    assert (row["reported"], row["predicted"], row["ok"]) == ("860,308", "860,241 .. 860,405", True)
    # 860,450 estimated tokens would need 860,450 x 65,536 B = 52.518 GiB, past the printed 52.51: outside
    path.write_text(text.replace("and 860308,", "and 860450,"))
    _, rows = _run(path, "--model", "llama-3.1-8b-instruct", "--engine-version", "0.20.0")
    assert rows["max tokens from the printed available KV"]["ok"] is False
