"""SGLang's token pool against its own start-up logs (benchmarks/budget_sglang.py, run by benchmarks/budget_corpus.py).

Golden figures come from the corpus's excerpts (tests/fixtures/logs/corpus/, cited in index.yaml); each test writes
SGLang's arithmetic out by hand (restated from the wheels named in kvplan/engines/sglang/defaults.py and engine.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.logparse import parse_log
from kvplan.hardware.gpu_profile import parse_profile
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import LOG_CORPUS, corpus_index, corpus_log, corpus_record, load_script

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def _bench():
    return load_script("benchmarks/budget_corpus.py", "budget_corpus")


def _tokens_from_k(printed: str, k_bytes: int, page: int = 1) -> tuple[int, int]:
    """The #tokens a K size printed to two decimals allows ("5.33": [5.325, 5.335) GiB) at `k_bytes` of K a row: the
    pool holds one page of rows more than the #tokens it reports."""
    x = float(printed)
    return math.ceil((x - 0.005) * GIB / k_bytes) - page, math.floor((x + 0.005) * GIB / k_bytes) - page



def _fp16_run(rec: dict, model_name: str, tp: int, gpu: str, context: int, opts: list[str]):
    """A run's reported figures, and the newest SGLang as it ran (its `opts`) with the model, layout, settings and
    --kv-cache-dtype float16 it is planned at."""
    rep = parse_log((LOG_CORPUS / rec["log"]).read_text()).reported
    model, dep = find_in_catalog(model_name), Deployment(tp, 1)
    engine = resolve_engine("sglang", None, opts)
    st = engine.settings(model, find_gpu(gpu), dep, Request(context=context))
    return rep, engine, model, dep, st, canonical_kv_dtype("float16", model.dtype)


def test_sglang_0_5_5_default_fraction_on_an_l40s_by_hand():
    # SGLang 0.5.5's default mem_fraction_static on an L40S reads nvidia-smi's 46,068 MiB (the l40s profile's
    # memory_smi_bytes): chunked prefill 4,096 and CUDA-graph max bs 32 (the < 60 GiB tier, tp < 4), reserve 512 +
    # 1.5 x 4,096 + 2 x 32 + 1 x 1 / 8 x 1,024 = 6,848 MiB -> round((46,068 - 6,848) / 46,068, 3) = round(0.85135, 3)
    # = 0.851 (torch's 45,486 MiB would give 0.849). Llama-3.1-8B's K + V a token: 2 x 32 layers x 8 KV heads x 128 x
    # 2 B = 131,072 B. (sglang#13023's L40S log, held out, is read for its format only: below.)
    model, dep = find_in_catalog("llama-3.1-8b-instruct"), Deployment(1, 1)
    engine = resolve_engine("sglang", "0.5.5")
    st = engine.settings(model, find_gpu("l40s"), dep, Request(context=8192))
    assert round((46_068 - 6_848) / 46_068, 3) == st.mem_fraction_static == 0.851 and st.chunked_prefill_size == 4096
    assert engine.token_bytes(model, dep, st, canonical_kv_dtype("auto", model.dtype)) == 2 * 65_536


def test_sglang_13023_pool_line_is_read():
    # sglang#13023 (keyboardAnt, 2025-11-11; held out): the parser alone reads its "#tokens" and "K size" as the index
    # transcribes them; no kvplan figure is set beside a held-out record's (benchmarks/budget_corpus.py scores it)
    rec = corpus_record("sglang-13023-llama-8b-l40s", held_out=True)
    rep = parse_log(corpus_log(rec["id"], held_out=True)).reported
    fig = rec["figures"]
    assert int(rep["kv_tokens"].value) == int(str(fig["kv_tokens"]).replace(",", ""))
    assert rep["k_size_gb"].text == f"{float(fig['k_size_gb']):.2f}"


def test_llama_8b_on_h100_at_0_4_4_end_to_end():
    # sglang#4760 (yubofredwang, 2025-03-25; training): Meta-Llama-3.1-8B-Instruct under the FA3 backend (Hopper
    # only), 63.48 + 15.11 = 78.59 GB free before loading (an H100 SXM's 79.18 GiB less its CUDA context; an H100
    # PCIe's or H800's torch total is 78.60), main of 2025-03-25 (release inferred 0.4.4).
    rec = corpus_record("sglang-4760-llama31-8b-h100-fa3")
    assert (rec["gpu_inferred"], rec["version_inferred"]) == ("h100-sxm", "0.4.4")
    rep = parse_log((LOG_CORPUS / rec["log"]).read_text()).reported
    assert rep["kv_tokens"].value == 442_750 and rep["k_size_gb"].text == "27.02"
    model, dep, gpu = find_in_catalog("llama-3.1-8b-instruct"), Deployment(1, 1), find_gpu("h100-sxm")
    engine = resolve_engine("sglang", "0.4.4")
    st = engine.settings(model, gpu, dep, Request(context=8192))
    bf16 = canonical_kv_dtype("auto", model.dtype)
    # K per token 32 layers x 8 KV heads x 128 x 2 B = 65,536 B; "27.02" is [27.015, 27.025) GiB: 27.015 x 2^30 /
    # 65,536 = 442,613.8 and 27.025 x 2^30 / 65,536 = 442,777.6 -> rows 442,614..442,777, #tokens (rows - 1 page)
    # 442,613..442,776, holding 442,750.
    lo, hi = _tokens_from_k("27.02", 65_536)
    assert (lo, hi) == (442_613, 442_776) and lo <= 442_750 <= hi
    # Before 0.4.7 the default fraction at tp 1 is 0.88 whatever the GPU (0.4.3.post4 `server_args.py`
    # __post_init__). rest = avail 63.48 - free before 78.59 x 0.12 = 54.0492 GiB; x 2^30 / 131,072 B a token (K + V) =
    # 442,771; the printed decimals ([63.475, 63.485), [78.585, 78.595)) give 442,725..442,816, holding 442,750.
    assert st.mem_fraction_static == 0.88
    assert int((63.48 - 78.59 * 0.12) * GIB / 131_072) == 442_771
    budgets = ((63.475 - 78.595 * 0.12) * GIB, (63.485 - 78.585 * 0.12) * GIB)
    tokens = [engine.capacity_at(model, dep, st, int(b), 8192, bf16).tokens for b in budgets]
    assert tokens[0] <= 442_750 <= tokens[1]
    # End to end from the GPU alone (79.18 GiB - 512 MiB before the weights = 78.68 GiB, 0.09 above the log's
    # 78.59): within 0.5% of the printed #tokens.
    alone = engine.result(model, gpu, dep, Request(context=8192)).capacity.tokens
    assert abs(alone - 442_750) / 442_750 < 0.005


def test_mimo_v2_flash_k_size_is_the_swa_pools_first_line():
    # sglang#18039 (ispobock, 2026-01-31): MiMo-V2-Flash at tp 4, --page-size 64, "KV Cache is allocated. #tokens:
    # 300288, K size: 8.38 GB, V size: 5.59 GB". SWAKVPool builds its SWA sub-pool first, so the first line is the
    # SWA layers': 39 layers x (8 KV heads / 4 ranks) x 192 (K head dim; V's is 128) x 2 B = 29,952 B of K a token,
    # x (300,288 + 64 page) rows = 8,996,143,104 B = 8.378 GiB -> "8.38" (kvplan said 7.79 when K was half of K+V).
    model, dep = find_in_catalog("mimo-v2-flash"), Deployment(4, 1)
    engine = resolve_engine("sglang", "0.5.8", ["mem_fraction_static=0.7", "page_size=64"])
    st = engine.settings(model, find_gpu("h200"), dep, Request(context=4096))
    bf16 = canonical_kv_dtype("auto", model.dtype)
    assert 39 * 2 * 192 * 2 * (300_288 + 64) == 8_996_143_104
    assert f"{engine.k_size_gib(model, dep, st, 300_288, bf16):.2f}" == "8.38"


def test_budget_corpus_sglang_rows_run_and_tokens_from_k_are_exact():
    b = _bench()
    rows = b.budget_sglang.sglang_pool(list(corpus_index()), b._split, b.parsed)
    from_k = [r for r in rows if "tokens_from_k" in r["terms"] and r["split"] == "train"]  # never a held-out figure
    assert len(from_k) >= 8
    assert all(r["terms"]["tokens_from_k"]["error"] == 0 for r in from_k), [r["id"] for r in from_k]
    assert all(r["terms"]["tokens_from_k"]["k_size"][0] == r["terms"]["tokens_from_k"]["k_size"][1] for r in from_k)
    held = next(r for r in rows if r["id"] == "sglang-13023-llama-8b-l40s")  # scored (no figure of it read here)
    assert held["split"] == "held-out" and {"weights", "avail_after_weights", "kv_pool", "tokens"} <= set(held["terms"])
    summ = b.budget_sglang.pool_summary(rows, "train")
    assert summ["tokens_from_k"]["within_tol"] == summ["tokens_from_k"]["n"] >= 8
    md = b.budget_sglang.pool_markdown(rows)
    assert "| SGLang record |" in md and "| tokens from k | train |" in md
    # a record whose budget the index marks unpredictable is checked from its K size only
    patched = next(r for r in rows if r["id"] == "sglang_qwen3_30b_a3b_pr18263")
    assert set(patched["terms"]) == {"tokens_from_k"} and patched["why_not"].startswith("unpredictable")


def test_memory_smi_bytes_is_checked_against_the_profiles_other_totals():
    text = (ROOT / "kvplan" / "hardware" / "profiles" / "l40s.yaml").read_text()
    assert parse_profile(text, "l40s.yaml").memory_smi_bytes == 46_068 * 2**20
    low = text.replace(f"memory_smi_bytes: {46_068 * 2**20}", "memory_smi_bytes: 1048576")
    with pytest.raises(KvplanError, match="memory_smi_bytes"):
        parse_profile(low, "l40s.yaml")


def test_qwen3_8b_on_b200_piecewise_graph_reserve_and_pool_from_the_budget():
    # SGLang's own reference start-up log (sgl-project/sglang@31a40974 .claude/skills/clean-startup-log/SKILL.md,
    # 2026-04-27; training): Qwen3-8B at tp 1, default flags, trtllm_mha so page 64, on a B200 (inferred: 177.57 GB
    # free before loading, its torch total 178.35 GiB). It compiles 74 piecewise CUDA graphs ("74/74").
    from kvplan.engines.sglang import piecewise

    rec = corpus_record("sglang-skill-cleanlog-qwen3-8b-sm100-178g")
    text = (LOG_CORPUS / rec["log"]).read_text()
    rep = parse_log(text).reported
    assert rep["kv_tokens"].value == 992_896 and rep["k_size_gb"].text == "68.18" and "| 74/74 " in text
    # Capture sizes up to the chunked prefill 16,384 (0.5.12 `_generate_piecewise_cuda_graph_tokens`): 4..32 by 4 (8),
    # 48..256 by 16 (14), 288..512 by 32 (8), 576..1024 by 64 (8), 1280..4096 by 256 (12), 4608..16384 by 512 (24) = 74.
    assert len(piecewise.capture_sizes(16_384)) == 8 + 14 + 8 + 8 + 12 + 24 == 74
    model, dep, gpu = find_in_catalog("qwen3-8b"), Deployment(1, 1), find_gpu("b200")
    bf16 = canonical_kv_dtype("auto", model.dtype)
    # K per token 36 layers x 8 KV heads x 128 x 2 B = 73,728 B, rows = #tokens + one page of 64: "68.18" is
    # [68.175, 68.185) GiB -> rows 992,871..993,016, #tokens 992,807..992,952, holding 992,896.
    lo, hi = _tokens_from_k("68.18", 73_728, page=64)
    assert (lo, hi) == (992_807, 992_952) and lo <= 992_896 <= hi
    # Default fraction (0.5.10 `server_args.py`): nvidia-smi's 183,359 MiB (b200 profile), reserve 512 + 1.5 x 16,384
    # + 1 x 1 / 8 x 1,024 + 2 x 512 (CUDA-graph max bs) + 74 x 8 = 26,832 MiB -> (183,359 - 26,832) / 183,359 = 0.854
    # (0.857 without the piecewise term, 0.5.9's rule: the graphs were off by default there).
    engine = resolve_engine("sglang", "0.5.10", ["page_size=64"])
    st = engine.settings(model, gpu, dep, Request(context=40_960))
    assert round((183_359 - 26_832) / 183_359, 3) == st.mem_fraction_static == 0.854
    assert resolve_engine("sglang", "0.5.9", ["page_size=64"]).settings(
        model, gpu, dep, Request(context=40_960)).mem_fraction_static == 0.857
    # Pool from the log's own budget: rest = 162.30 - 177.57 x 0.146 = 136.37 GiB; / 147,456 B (K + V) a token =
    # 993,050 -> within 0.02% of the printed 992,896 (at 0.857: 996,9xx, +0.4%).
    budgets = ((162.295 - 177.575 * 0.146) * GIB, (162.305 - 177.565 * 0.146) * GIB)
    tokens = [engine.capacity_at(model, dep, st, int(b), 40_960, bf16).tokens for b in budgets]
    assert all(abs(t - 992_896) / 992_896 < 0.0002 for t in tokens)
    # Off where SGLang turns the graphs off: pipeline parallelism, DP attention, before 0.5.10.
    assert piecewise.reserve_mib(model, gpu, Deployment(1, 2), "0.5.12", 16_384, False) == 0
    assert piecewise.reserve_mib(model, gpu, dep, "0.5.12", 16_384, True) == 0
    assert piecewise.reserve_mib(model, gpu, dep, "0.5.9", 16_384, False) == 0
    assert piecewise.reserve_mib(model, gpu, dep, "0.5.12", 16_384, False) == 592


def test_a_log_before_the_token_count_in_the_k_line_is_read_and_its_pool_is_max_total_num_tokens():
    # SGLang 0.4.2.post1 printed "Load weight end. type=..., dtype=..., avail mem=X GB" (no mem usage; model_runner.py
    # L345-349) and "KV Cache is allocated. K size: X GB, V size: Y GB." (no #tokens; mem_cache/memory_pool.py
    # L194-196); the pool is built with max_total_num_tokens rows + 1 (model_runner.py L651-652). jerryzsj's README
    # (2025-02-04): DeepSeek-R1-Distill-Qwen-7B (Qwen2.5-7B's shapes) on an RTX 3090 under WSL2.
    rec = corpus_record("sglang-jerryzsj-r1-qwen7b-3090-wsl")
    rep = parse_log((LOG_CORPUS / rec["log"]).read_text()).reported
    assert {k: rep[k].text for k in ("avail_after_weights_gb", "k_size_gb", "v_size_gb", "max_total_num_tokens")} == {
        "avail_after_weights_gb": "8.37", "k_size_gb": "2.82", "v_size_gb": "2.82", "max_total_num_tokens": "105531"}
    assert "kv_tokens" not in rep and "weights_mem_usage_gb" not in rep
    b = _bench()
    assert b.budget_sglang.pool_tokens(rep).text == "105531"
    # K per token = 28 layers x 4 KV heads x 128 x 2 B = 28,672 B. "2.82" is [2.815, 2.825) GiB: 2.815 x 2^30 / 28,672
    # = 105,419.34 and 2.825 x 2^30 / 28,672 = 105,793.83, so rows 105,420..105,793 and (page 1: rows = tokens + 1)
    # tokens 105,419..105,792, holding 105,531 (105,532 x 28,672 B = 3,025,813,504 B = 2.818 GiB).
    row = b.budget_sglang.sglang_pool([rec], b._split, b.parsed)[0]
    lo, hi = row["terms"]["tokens_from_k"]["kvplan"]
    assert (lo, hi) == _tokens_from_k("2.82", 28_672) == (105_419, 105_792)
    assert row["terms"]["tokens_from_k"]["error"] == 0 and row["why_not"].startswith("unpredictable")
    # a log with neither "#tokens" nor a K line gives no pool size (max_total_num_tokens alone is not the K line's)
    assert b.budget_sglang.pool_tokens({"max_total_num_tokens": rep["max_total_num_tokens"]}) is None


def test_check_log_reads_a_log_before_the_token_count_at_max_total_num_tokens():
    # kvplan check-log on the same README log (0.4.2.post1 inferred): K and V from max_total_num_tokens exact
    # ((105,531 + 1) x 28,672 B = 2.818 GiB, printed 2.82), and the fit from the GPU alone said beside it: the RTX 3090
    # profile's 23.58 GiB usable less 0.5 GiB at tp 1, where Windows left SGLang 22.76 GB (hence `unpredictable`).
    from kvplan.engines.reconcile import reconcile

    rec = parse_log(corpus_log("sglang-jerryzsj-r1-qwen7b-3090-wsl"))
    res = reconcile(rec, find_in_catalog("qwen2.5-7b"), find_gpu("rtx-3090"), "0.4.2.post1", None, None)
    rows = {r.quantity.split(" (")[0]: r for r in res.rows}
    assert rows["K size from #tokens"].predicted == "2.82 GB" and rows["K size from #tokens"].ok
    assert rows["V size from #tokens"].ok
    alone = rows["#tokens predicted from the GPU alone"]
    assert alone.reported == "105,531" and alone.error > 0  # over: the Windows-held memory kvplan cannot see


def test_qwen3_14b_on_four_rtx_4090s_at_tp_4_pool_and_end_to_end():
    # ugyhybnb/sglang-performance-test@2265f92f "项目A-v2-服务基线.md" (2026-06-14; training): Qwen3-14B, tp 4,
    # 4 x RTX 4090, --mem-fraction-static 0.80, SGLang built at ebaf86d4 (0.5.13 inferred): "avail mem=16.00 GB, mem
    # usage=7.08 GB", "#tokens: 298447, K size: 5.69 GB".
    rec = corpus_record("sglang-perftest-qwen3-14b-4x4090-tp4")
    assert (rec["gpu"], rec["version_inferred"], rec["tp"]) == ("rtx-4090", "0.5.13", 4)
    rep = parse_log((LOG_CORPUS / rec["log"]).read_text()).reported
    assert rep["kv_tokens"].value == 298_447 and rep["k_size_gb"].text == "5.69"
    model, dep, gpu = find_in_catalog("qwen3-14b"), Deployment(4, 1), find_gpu("rtx-4090")
    engine = resolve_engine("sglang", "0.5.13", ["mem_fraction_static=0.8"])
    st = engine.settings(model, gpu, dep, Request(context=40960))
    bf16 = canonical_kv_dtype("auto", model.dtype)
    # K per token and rank: 40 layers x (8 KV heads / 4 ranks) x 128 x 2 B = 20,480 B (K + V 40,960). "5.69" is
    # [5.685, 5.695) GiB: 5.685 x 2^30 / 20,480 = 298,057.3 and 5.695 x 2^30 / 20,480 = 298,582.2 -> rows
    # 298,058..298,582, #tokens (rows - 1 page) 298,057..298,581, holding 298,447.
    assert engine.token_bytes(model, dep, st, bf16) == 40_960
    lo, hi = _tokens_from_k("5.69", 20_480)
    assert (lo, hi) == (298_057, 298_581) and lo <= 298_447 <= hi
    assert f"{engine.k_size_gib(model, dep, st, 298_447, bf16):.2f}" == "5.69"
    # The pool from the budget, the fraction given: rest = avail after the weights - free before them x (1 - 0.8) =
    # 16.00 - (16.00 + 7.08) x 0.2 = 11.384 GiB -> 11.384 x 2^30 / 40,960 = 298,424; the printed decimals ([15.995,
    # 16.005), [7.075, 7.085)) give 0.8 x 15.995 - 0.2 x 7.085 = 11.379 .. 0.8 x 16.005 - 0.2 x 7.075 = 11.389 GiB,
    # 298,293..298,555 tokens, holding the printed 298,447.
    assert st.mem_fraction_static == 0.8 and st.chunked_prefill_size == 2048
    budgets = ((0.8 * 15.995 - 0.2 * 7.085) * GIB, (0.8 * 16.005 - 0.2 * 7.075) * GIB)
    tokens = [engine.capacity_at(model, dep, st, int(b), 40960, bf16).tokens for b in budgets]
    assert tokens == [298_293, 298_555] and tokens[0] <= 298_447 <= tokens[1]
    # End to end from the card alone (the profile's 23.52 GiB usable; SGLang saw 23.08 GB free before loading):
    # within 0.5% of the printed #tokens (kvplan says 299,365, +0.3%).
    alone = engine.result(model, gpu, dep, Request(context=40960)).capacity.tokens
    assert abs(alone - 298_447) / 298_447 < 0.005


def test_qwen3_14b_on_two_rtx_a4500s_with_cpu_offload_pool_from_k_and_the_budget():
    # TianyangChen357/LLM@fead5180 sglang.log (2026-03-27; training): Qwen3-14B at tp 2 on 2 x RTX A4500 (run_sglang.sh
    # L2), --dtype half --cpu-offload-gb 48 --mem-fraction-static 0.65: "avail mem=17.22 GB, mem usage=1.50 GB" after
    # 18.73 GB free before loading, "#tokens: 139814, K size: 5.33 GB". Most weights sit in host memory, which kvplan
    # does not plan for SGLang: the index marks it unpredictable and only the pool is checked.
    rec = corpus_record("sglang-tianyang-qwen3-14b-2xa4500-offload")
    assert rec["gpu"] == "rtx-a4500" and rec["unpredictable"].startswith("--cpu-offload-gb 48")
    rep, engine, model, dep, st, fp16 = _fp16_run(rec, "qwen3-14b", 2, "rtx-a4500", 40960,
                                                  ["mem_fraction_static=0.65", "chunked_prefill_size=2048"])
    assert rep["kv_tokens"].value == 139_814 and rep["weights_mem_usage_gb"].text == "1.50"
    # K per token and rank: 40 layers x (8 KV heads / 2 ranks) x 128 x 2 B = 40,960 B (K + V 81,920). "5.33" is
    # [5.325, 5.335) GiB: rows 139,592..139,853, #tokens (rows - 1 page) 139,591..139,852, holding 139,814;
    # (139,814 + 1) x 40,960 = 5,726,822,400 B = 5.3335 GiB -> "5.33".
    assert engine.token_bytes(model, dep, st, fp16) == 81_920
    lo, hi = _tokens_from_k("5.33", 40_960)
    assert (lo, hi) == (139_591, 139_852) and lo <= 139_814 <= hi
    assert f"{engine.k_size_gib(model, dep, st, 139_814, fp16):.2f}" == "5.33"
    # The pool from the printed budget, the fraction given: rest = 17.22 - 18.73 x (1 - 0.65) = 10.6645 GiB (K + V
    # printed 10.66) -> 10.6645 x 2^30 / 81,920 = 139,781 tokens; the printed decimals give 139,693..139,870.
    budgets = ((17.215 - 18.735 * 0.35) * GIB, (17.225 - 18.725 * 0.35) * GIB)
    tokens = [engine.capacity_at(model, dep, st, int(b), 40960, fp16).tokens for b in budgets]
    assert tokens == [139_693, 139_870] and tokens[0] <= 139_814 <= tokens[1]
    row = next(r for r in _bench().budget_sglang.sglang_pool([rec], _bench()._split, _bench().parsed))
    assert set(row["terms"]) == {"tokens_from_k"} and row["terms"]["tokens_from_k"]["error"] == 0


def test_qwen25_7b_awq_on_a_16gb_card_pool_from_k_and_the_budget():
    # AgentiviumAI/workflow-aware-prompt-cache@628a8f54 sglang.log (2026-09-24; training): Qwen2.5-7B-Instruct-AWQ
    # (awq_marlin) at tp 1, --mem-fraction-static 0.82, fp16 KV: 15.08 GB free before loading, "avail mem=9.83 GB, mem
    # usage=5.25 GB", "#tokens: 133052, K size: 3.55 GB". Card and release unnamed: only the pool is checked.
    rec = corpus_record("sglang-agentivium-qwen25-7b-awq-16gb")
    assert rec["gpu"] is None and rec["version"] is None and rec["weights"] == "awq"
    rep, engine, model, dep, st, fp16 = _fp16_run(rec, "qwen2.5-7b", 1, "rtx-5080", 32768,
                                                  ["mem_fraction_static=0.82", "chunked_prefill_size=8192"])
    assert rep["kv_tokens"].value == 133_052 and rep["k_size_gb"].text == "3.55"
    # K per token: 28 layers x 4 KV heads x 128 x 2 B = 28,672 B (K + V 57,344). "3.55" is [3.545, 3.555) GiB: rows
    # 132,758..133,131, #tokens (rows - 1 page) 132,757..133,130, holding 133,052; (133,052 + 1) x 28,672 =
    # 3,814,895,616 B = 3.5529 GiB -> "3.55".
    assert engine.token_bytes(model, dep, st, fp16) == 57_344
    lo, hi = _tokens_from_k("3.55", 28_672)
    assert (lo, hi) == (132_757, 133_130) and lo <= 133_052 <= hi
    assert f"{engine.k_size_gib(model, dep, st, 133_052, fp16):.2f}" == "3.55"
    # The budget: rest = 9.83 - 15.08 x (1 - 0.82) = 7.1156 GiB (K + V printed 7.10) -> 7.1156 x 2^30 / 57,344 =
    # 133,236 tokens; the printed decimals (9.825..9.835, 15.075..15.085) give 133,126..133,347, and the pool's
    # 133,052 sits 74 tokens (4.0 MiB) under that range: this build took a little more than the two printed figures
    # leave (not modelled; the card and the release, newer than 0.5.23, are unnamed, so nothing is predicted).
    rest = [(a - b * 0.18) * GIB for a, b in ((9.83, 15.08), (9.825, 15.085), (9.835, 15.075))]
    assert [int(r // 57_344) for r in rest] == [133_236, 133_126, 133_347]
    row = next(r for r in _bench().budget_sglang.sglang_pool([rec], _bench()._split, _bench().parsed))
    assert row["split"] == "train" and set(row["terms"]) == {"tokens_from_k"}
    assert row["terms"]["tokens_from_k"]["error"] == 0


def test_a_record_naming_a_model_not_in_the_catalog_is_the_one_line_unknown_model_error():
    # find_in_catalog answers None for an unknown name; budget_sglang.setup then failed on None.dtype
    # (AttributeError). Every benchmark caller that needs the model now asks catalog.require_in_catalog.
    b = _bench()
    rec = {"engine": "sglang", "kvplan_model": "no-such-model-xyz", "tp": 1}
    with pytest.raises(KvplanError, match="unknown model 'no-such-model-xyz'"):
        b.budget_sglang.setup(rec, find_gpu("h100-sxm"))
