"""The paths beside a plan that cut pipeline stages: each takes the engine release's own cut
(kvplan.engines.stage_split.CUTS), not vLLM 0.8's, or says why it is vLLM's: TensorRT-LLM's check-log (its log's pp
read), SGLang's "K size" row and its benchmark's setup, TensorRT-LLM's benchmark setup."""

from __future__ import annotations

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.engines import resolve_engine
from kvplan.engines.logparse import parse_log
from kvplan.engines.trtllm.reconcile import reconcile_trtllm
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import load_script

# A TensorRT-LLM (PyTorch backend) start-up excerpt in the corpus's line formats (TensorRT-LLM#6294's), its
# command line with trtllm-serve's --tp_size / --pp_size flags (commands/serve.py get_llm_args)
LOG = """trtllm-serve google/gemma-4-26B-A4B --backend pytorch --tp_size 1 --pp_size 7
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 10.00 GiB for max tokens in paged KV cache (262144).
[07/23/2025-09:16:03] [TRT-LLM] [I] max_seq_len=4096, max_num_requests=64, max_num_tokens=8192
"""


def test_trtllm_check_log_cuts_the_stages_as_tensorrt_llm_does():
    # Gemma-4-26B-A4B's config.json: 30 layers, five sliding (8 KV heads x 256) then one full (2 KV heads x 512), so
    # full layers are 5, 11, 17, 23, 29. TensorRT-LLM's cache holds K and V of each (bf16): sliding 2 x 8 x 256 x 2 =
    # 8,192 B, full 2 x 2 x 512 x 2 = 4,096 B a token. Mapping.pp_layers (torch.tensor_split) cuts 30 over 7 as
    # 5, 5, 4, 4, 4, 4, 4: stage 0 holds layers 0-4, five sliding, 5 x 8,192 = 40,960 B a token, the most. vLLM
    # 0.8's cut (4, 4, 4, 4, 5, 5, 4) would bind at 36,864 (layers 16-20: four sliding + full 17).
    rec = parse_log(LOG)
    assert (rec.tp, rec.pp, rec.read["pp"]) == (1, 7, "pp_size=7")
    out = reconcile_trtllm(rec, find_in_catalog("gemma-4-26b-a4b"), None, "1.2.0", "bf16", None)
    row = next(r for r in out.rows if r.quantity.startswith("KV bytes a token"))
    assert row.predicted == "40,960 B"
    assert any("pp 7 (from the log: pp_size=7)" in n for n in out.notes), out.notes


def test_sglang_k_size_reads_the_releases_cut():
    # DeepSeek-V3: 61 layers, MLA 512 + 64 = 576 elements x 2 B = 1,152 B a layer a token (the K buffer SGLang prints
    # as "KV size"). At pp 8 SGLang 0.5.5 cuts 7 x 7 + 12 (sgl-project/sglang#13282), so the bounding stage's K is
    # 12 x 1,152 = 13,824 B a token; (1,000 + page 1) x 13,824 B = 13,837,824 B. vLLM's cut would bind at 8 layers.
    v3 = find_in_catalog("deepseek-v3")
    engine = resolve_engine("sglang", "0.5.5")
    dep = engine.own_stages(v3, Deployment(8, 8))
    assert dep.stage_layers == (7,) * 7 + (12,)
    bf16 = canonical_kv_dtype("bf16", v3.dtype)
    st = engine.settings(v3, find_gpu("h200"), dep, Request(8192))
    assert st.page_size == 1
    assert engine.k_size_gib(v3, dep, st, 1_000, bf16) * 2**30 == 13_837_824


def test_the_benchmarks_set_up_each_engines_cut():
    budget_sglang = load_script("benchmarks/budget_sglang.py", "budget_sglang")
    budget_trtllm = load_script("benchmarks/budget_trtllm.py", "budget_trtllm")

    # SGLang 0.5.5, DeepSeek-V3 at pp 8: 7, 7, 7, 7, 7, 7, 7, 12 (the whole remainder, 61 - 49, on the last stage)
    rec = {"kvplan_model": "deepseek-v3", "version": "0.5.5", "tp": 8, "pp": 8}
    assert budget_sglang.setup(rec, find_gpu("h200"))[2].stage_layers == (7,) * 7 + (12,)
    # TensorRT-LLM: torch.tensor_split of 30 layers over 7, the first 30 % 7 = 2 sections one longer
    rec = {"kvplan_model": "gemma-4-26b-a4b", "version": "1.2.0", "tp": 1, "pp": 7}
    assert budget_trtllm._setup(rec)[2].stage_layers == (5, 5, 4, 4, 4, 4, 4)
