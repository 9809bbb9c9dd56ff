"""vLLM's two closing lines in the corpus's logs (issue 22): "GPU KV cache size: N tokens" against "Maximum
concurrency for L tokens per request: C x", the records added in round 40 (noonghunna/club-3090, guqiong96/Lvllm,
MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark) among them.

From 0.20.1 vLLM prints N = int(C x L) (kv_cache_utils.py v0.20.1 L1706, kvplan/engines/vllm/capacity.py's source);
through 0.20.0 N is num_blocks // groups x block, which a hybrid's padded groups set apart from C x L. Every figure
below is the log's; L is the record's stated max_model_len.
"""

import pytest

from conftest import LOG_CORPUS, corpus_index, corpus_record, load_script, training_log
from kvplan.engines.logparse import parse_log
from kvplan.engines.versions import parse_version

INDEX = {r["id"]: r for r in corpus_index()}  # the corpus as a whole: its records' own fields, any split
ROUND40 = ("club3090-74-qwen36-27b-nvlink-2x3090", "club3090-75-qwen36-27b-dflash-pcie-2x3090",
           "club3090-76-qwen36-27b-dflash-noviz-pcie-2x3090", "club3090-77-qwen36-27b-dual-pcie-2x3090",
           "club3090-594-qwen36-27b-fp8-2x3090-v0240", "club3090-602-qwen36-27b-fp8-int8kv-3090-3090ti",
           "club3090-612-qwen36-35b-a3b-nvfp4-5090", "club3090-642-qwen36-27b-int4-2x3090-x8",
           "club3090-1026-qwen38-27b-nvfp4-2x5090", "lvllm-35-a40-moe-offload", "miaai-dsv4-4-gb10-mbt8224",
           "miaai-dsv4-4-gb10-mbt2048")


def _lines(rid: str) -> tuple[int, float, int]:
    rec = corpus_record(rid)
    rep = parse_log(training_log(rid)).reported
    return int(rep["kv_cache_tokens"].value), rep["max_concurrency"].value, int(rec["flags"]["max_model_len"])


@pytest.mark.parametrize("rid, tokens, conc, length", [
    # 612,157 / 262,144 = 2.3352 -> "2.34x"; 188,838 / 185,000 = 1.0207 -> "1.02x"; 204,615 / 200,000 = 1.0231;
    # 619,479 / 262,144 = 2.3631 (the four at 0.20.2rc1.dev9, stated in their reports)
    ("club3090-74-qwen36-27b-nvlink-2x3090", 612_157, 2.34, 262_144),
    ("club3090-75-qwen36-27b-dflash-pcie-2x3090", 188_838, 1.02, 185_000),
    ("club3090-76-qwen36-27b-dflash-noviz-pcie-2x3090", 204_615, 1.02, 200_000),
    ("club3090-77-qwen36-27b-dual-pcie-2x3090", 619_479, 2.36, 262_144),
    # 300,220 / 262,144 = 1.1452 -> "1.15x" and 567,978 / 131,072 = 4.3333 -> "4.33x" (0.24.0, stated)
    ("club3090-594-qwen36-27b-fp8-2x3090-v0240", 300_220, 1.15, 262_144),
    ("club3090-612-qwen36-35b-a3b-nvfp4-5090", 567_978, 4.33, 131_072),
])
def test_from_0_20_1_the_tokens_line_is_the_concurrency_times_the_length(rid, tokens, conc, length):
    assert _lines(rid) == (tokens, conc, length)
    assert parse_version(corpus_record(rid)["version"]) > (0, 20, 0)  # the release capacity.py gives int(C x L)
    # N = int(C x L) with C printed to 2 decimals: N / L lies within 0.005 + 1 / L of the printed C
    assert abs(tokens / length - conc) <= 0.005 + 1 / length


def test_through_0_20_0_a_hybrids_tokens_line_is_not_the_concurrency_times_the_length():
    # vllm-foam-qwen35-27b-tp4-v019 (0.19.0, Qwen3.5-27B's attention and GDN groups): 853,776 tokens at 262,144
    # is 3.2569 requests' worth, against "12.90x" printed: N counts num_blocks // groups x block, not C x L
    tokens, conc, length = _lines("vllm-foam-qwen35-27b-tp4-v019")
    assert parse_version(corpus_record("vllm-foam-qwen35-27b-tp4-v019")["version"]) <= (0, 20, 0)
    assert round(tokens / length, 4) == 3.2569 and conc == 12.9


def test_this_rounds_records_are_cited_and_kept_out_of_the_fit():
    """None names a catalog model (Qwen3.6/3.8 hybrids, an unnamed Lvllm model, DeepSeek-V4-Flash without its
    release), so budget_corpus predicts none and its --train summaries are what they were; the Lvllm record says why
    its budget is not vLLM's."""
    bench = load_script("benchmarks/budget_corpus.py", "budget_corpus")
    for rid in ROUND40:
        rec = INDEX[rid]
        assert rec["engine"] == "vllm" and rec["source"].startswith(f"https://github.com/{rec['repo']}/"), rid
        assert bench.predict(rec, bench.parsed(rec)) is None, rid
    assert "LVLLM_GPU_RESIDENT_MOE_LAYERS" in INDEX["lvllm-35-a40-moe-offload"]["unpredictable"]


def test_a_transcribed_tables_prose_figures_are_its_rows_verbatim():
    # MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#4: the author's A/B rows, "| 8224 (stock) | **5.30 GiB** | 997 tok/s |
    # 290,632 tok |" and "| 2048 | **1.39 GiB** | ... | 1,262,567 tok |": 3.91 GiB less peak, 971,935 more tokens
    rows = [r for r in INDEX.values() if r.get("transcribed") == "table" and r.get("prose_figures")]
    assert len(rows) >= 3
    for r in rows:
        excerpt = (LOG_CORPUS / r["log"]).read_text()
        assert all(str(text) in excerpt for text in r["prose_figures"].values()), r["id"]
    a, b = (INDEX[f"miaai-dsv4-4-gb10-mbt{n}"]["prose_figures"] for n in (8224, 2048))
    assert round(float(a["activation_peak_gib"]) - float(b["activation_peak_gib"]), 2) == 3.91
    assert int(b["kv_cache_tokens"].replace(",", "")) - int(a["kv_cache_tokens"].replace(",", "")) == 971_935
