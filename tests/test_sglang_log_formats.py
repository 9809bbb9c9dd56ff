"""SGLang's start-up lines as older and MLA releases print them (kvplan/engines/logparse_sglang.py), read on corpus
excerpts that print them (tests/fixtures/logs/corpus/, cited in index.yaml), with SGLang's arithmetic by hand.

The formats and the wheels that print them: the scheduler's line without chunked_prefill_size (0.3.3
srt/managers/scheduler.py L162-167, 0.4.0.post1 L219-224); max_total_num_tokens alone on its line (0.3.3
bench_latency.py L145, 0.4.0.post1 bench_one_batch.py L130); a latent pool's one "KV size" (0.5.8.post1
mem_cache/memory_pool.py L595-615, the DSA pool adding its indexer keys at L1832-1836).
"""

from __future__ import annotations


import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import corpus_index, corpus_log, load_script

GIB = 2**30


def _parsed(rid: str, held_out: bool = False):
    return parse_log(corpus_log(rid, held_out))


def _pool_rows() -> dict:
    b = load_script("benchmarks/budget_corpus.py", "budget_corpus")
    return {r["id"]: r for r in b.budget_sglang.sglang_pool(list(corpus_index()), b._split, b.parsed)}


def test_scheduler_line_before_chunked_prefill_size_is_read():
    # sglang#2468 (2024-12-12), Mistral-7B-Instruct-v0.1 with default flags: "max_total_num_tokens=56524,
    # max_prefill_tokens=16384, max_running_requests=2049, context_len=32768", 0.4.0.post1's line (no chunked
    # prefill). The pool it sizes: 56,525 rows x 32 layers x 8 KV heads x 128 x 2 B x 2 (K and V) = 7,408,844,800 B
    # = 6.90 GiB, inside the 9.69 - 2.44 = 7.25 GB the log's free memory fell by between weights and pool end.
    rec = _parsed("sglang-2468-mistral-7b-instruct-v01")
    r, s = rec.reported, rec.settings
    assert (r["max_total_num_tokens"].text, r["max_running_requests"].text) == ("56524", "2049")
    assert s["context_len"] == 32_768 and "chunked_prefill_size" not in s
    assert "kv_tokens" not in r and "k_size_gb" not in r
    pool = 56_525 * 32 * 8 * 128 * 2 * 2
    assert pool == 7_408_844_800 and pool / GIB < (9.69 - 2.44)
    # check-log sets it beside kvplan's max_total_num_tokens (no pool line to read), and prints no K row
    model, gpu = find_in_catalog("mistral-7b-v0.1"), find_gpu("rtx-4090")
    res = reconcile(rec, model, gpu, "0.4.0", None, 1)
    rows = {row.quantity.split(" (")[0]: row for row in res.rows}
    alone = rows["#tokens predicted from the GPU alone"]
    engine = resolve_engine("sglang", "0.4.0")
    tokens = engine.result(model, gpu, Deployment(1, 1), Request(context=32_768)).capacity.tokens
    assert alone.reported == "56,524" and alone.predicted == f"{tokens:,}"
    assert not any(q.startswith(("K size", "V size")) for q in rows)


def test_max_total_num_tokens_alone_on_its_line_is_read():
    # lhl's MI300X notes (llm-tracker, 2024-10-10): sglang.bench_latency prints "max_total_num_tokens=1256440" alone
    # (0.3.3 bench_latency.py L145). 1,256,440 x 32 layers x 8 KV heads x 128 x 2 B x 2 = 164,684,103,680 B
    # = 153.37 GiB.
    r = _parsed("sglang-llmtracker-mi300x-llama3-8b-bench-latency").reported
    assert r["max_total_num_tokens"].text == "1256440"
    assert f"{1_256_440 * 32 * 8 * 128 * 2 * 2 / GIB:.2f}" == "153.37"
    # sglang#18040's bench_one_batch prints the same line after its pool's "#tokens: 399740": both read, equal
    g = _parsed("sglang-18040-granite-4.0-h-micro").reported
    assert g["max_total_num_tokens"].text == g["kv_tokens"].text == "399740"
    # its release (0.3.3, inferred from the wheels' dates) is before kvplan's range: refused, said in the row
    row = _pool_rows()["sglang-llmtracker-mi300x-llama3-8b-bench-latency"]
    assert not row["terms"] and "outside the modelled range" in row["why_not"]


def test_mla_kv_size_line_is_read_and_a_dsa_pool_is_refused():
    # GLM-5-FP8 at tp 8 on MI355X (ajith-sirra-amd/Issues, 2026-02-26): "KV Cache is allocated. #tokens: 3262823,
    # KV size: 186.77 GB". The DSA pool (0.5.8.post1 memory_pool.py L1676-1760, fp8, page 1 on ROCm): per layer a
    # kv_buffer of size + page rows x (512 + 512 // 128 x 4 + 64 x 2 B) = 656 B and an index_k buffer of
    # (size + page + 1) rows x (128 + 4) B; 78 layers: (3,262,824 x 656 + 3,262,825 x 132) x 78 = 200,546,224,632 B
    # = 186.77 GiB. kvplan refuses SGLang's DSA pool on ROCm (kvplan.engines.sglang.dsa: 0.5.8's fp8 row there
    # follows the gfx target's fp8 format, a later page SGLANG_USE_AITER and Triton's version), so this check too.
    r = _parsed("sglang-amd-glm5-fp8-mi355x-tp8", held_out=True).reported
    assert (r["kv_tokens"].text, r["kv_size_gb"].text) == ("3262823", "186.77") and "k_size_gb" not in r
    per_layer = 3_262_824 * (512 + 512 // 128 * 4 + 64 * 2) + 3_262_825 * (128 + 4)
    assert f"{per_layer * 78 / GIB:.2f}" == "186.77"
    row = _pool_rows()["sglang-amd-glm5-fp8-mi355x-tp8"]
    assert not row["terms"] and "Sparse Attention" in row["why_not"]
    model, engine = find_in_catalog("glm-5"), resolve_engine("sglang", "0.5.8")
    st = engine.settings(model, find_gpu("mi355x"), Deployment(8, 1), Request(context=4096))
    with pytest.raises(KvplanError, match="Sparse Attention pool on ROCm is not planned"):
        engine.k_size_gib(model, Deployment(8, 1), st, 3_262_823, None)


def test_an_mla_pool_prints_its_latent_as_kvplan_counts_k():
    # MLATokenToKVPool (0.5.8.post1 memory_pool.py L1326-1402): one kv_buffer a layer of (size + page) rows x
    # (kv_lora_rank + qk_rope_head_dim) = 512 + 64 = 576 values, replicated over tp. DeepSeek-V3: 61 layers x 576 x 2 B
    # = 70,272 B a token, so 1,000,000 tokens at page 1 print (1,000,001 x 70,272 B) = 65.45 GiB as "KV size".
    model, engine = find_in_catalog("deepseek-v3"), resolve_engine("sglang", "0.5.8")
    st = engine.settings(model, find_gpu("h200"), Deployment(8, 1), Request(context=4096))
    from kvplan.core.dtypes import canonical_kv_dtype

    bf16 = canonical_kv_dtype("auto", model.dtype)
    expect = (1_000_000 + st.page_size) * 61 * 576 * 2 / GIB
    assert f"{engine.k_size_gib(model, Deployment(8, 1), st, 1_000_000, bf16):.2f}" == f"{expect:.2f}"
    rec = parse_log("[TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000000, KV size: 65.45 GB\n")
    assert rec.reported["kv_size_gb"].text == "65.45" and rec.settings["kv_cache_dtype"] == "bfloat16"
