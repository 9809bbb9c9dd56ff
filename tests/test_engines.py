"""Engine rules against engines' own numbers: vLLM, SGLang, llama.cpp, TensorRT-LLM, transformers.

Every golden number comes from an engine log, an engine's source (docs/engines.md cites file and
version) or a public measurement, with the hand arithmetic beside it.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.sources.catalog import find_in_catalog
from kvplan.cli import app
from kvplan.core.dtypes import KV_DTYPES
from kvplan.engines import engine_class
from kvplan.engines.llamacpp import engine as llamacpp
from kvplan.engines.sglang import engine as sglang
from kvplan.engines.trtllm import engine as trtllm
from kvplan.engines.vllm import engine as vllm
from kvplan.engines.hf_transformers.engine import DynamicRules
from kvplan.hardware.gpus import find_gpu
from kvplan.model.layers import FullAttention, SlidingWindow
from kvplan.model.spec import ModelSpec, ParamCounts
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request

GIB, MIB = 2**30, 2**20
BF16, FP16 = KV_DTYPES["bf16"], KV_DTYPES["fp16"]
runner = CliRunner()


def spec(layers, name="t", max_context=131072, **kw):
    return ModelSpec(name, tuple(layers), ParamCounts(), kw.get("heads", 32), 4096, 14336, 32000, max_context)


def vllm_settings(version, model, ctx, block=None, gmu=None, gpu="h100", opts=None):
    return vllm.settings(model, find_gpu(gpu), Deployment(), Request(context=ctx), version, opts or {},
                         {"block_size": block, "gpu_memory_utilization": gmu})


# --- vLLM --------------------------------------------------------------------------------------

MISTRAL_24B = spec([FullAttention(8, 128)] * 40, "mistral-small-3.2-24b")  # 40 layers, 8 KV heads x 128


def test_vllm_mistral_small_exact_from_blocks():
    # vLLM 0.11.0 log (llm-d empirical results, shared/engine_logs.yaml): block 128, max_model_len 16000,
    # 1,444 blocks, "GPU KV cache size: 184,832 tokens", "Maximum concurrency for 16K: 11.55x".
    # page = 128 x 2 x 8 x 128 x 2 B = 524,288 B; one group of 40 layers -> 20,971,520 B per block id.
    # tokens = 1444 // 1 x 128 = 184,832; concurrency = 1444 / cdiv(16000, 128) = 1444 / 125 = 11.552.
    st = vllm_settings("0.11.0", MISTRAL_24B, 16000, block=128, gmu=0.95)
    cap = vllm.capacity(MISTRAL_24B, Deployment(), 1444 * 20_971_520, 16000, 1, st, BF16, BF16)
    assert cap.blocks == 1444 and cap.tokens == 184_832 and f"{cap.max_concurrency:.2f}" == "11.55"


def test_vllm_mistral_small_printed_budget_interval():
    # "Available KV cache memory: 28.20 GiB" allows [28.195, 28.205) GiB -> 1443.58 .. 1444.1 blocks of 20 MiB.
    st = vllm_settings("0.11.0", MISTRAL_24B, 16000, block=128, gmu=0.95)
    lo = vllm.capacity(MISTRAL_24B, Deployment(), int(28.195 * GIB) + 1, 16000, 1, st, BF16, BF16)
    hi = vllm.capacity(MISTRAL_24B, Deployment(), int(28.205 * GIB) - 1, 16000, 1, st, BF16, BF16)
    assert (lo.blocks, hi.blocks) == (1443, 1444)
    assert lo.tokens <= 184_832 <= hi.tokens
    assert round(lo.max_concurrency, 2) <= 11.55 <= round(hi.max_concurrency, 2)


def test_vllm_gpt_oss_hybrid_groups_and_async_window():
    # docs/engines.md 1.5 worked example: gpt-oss-20b, 12 SWA (W=128) + 12 full, H=8, d=64, bf16, block 16,
    # H100 server MNBT 8192: page = 16 x 8 x 128 x 2 = 32,768 B; 2 groups x 12 layers -> 393,216 B per block id.
    # Blocks per 131,072 request: 8192 (full) + cdiv(127 + 8192, 16) + 1 = 521 -> 8713 (v0.11);
    # v0.33 with async scheduling: cdiv(127 + 16384, 16) + 1 = 1033 -> 9225.
    m = find_in_catalog("gpt-oss-20b")
    a = 40 * GIB
    for version, per_req in (("0.11.0", 8713), ("0.33.0", 9225)):
        st = vllm_settings(version, m, 131072)
        pool = vllm.build_pool(m.layers, 1, BF16, BF16, st)
        assert (pool.num_groups, pool.group_size, pool.bytes_per_block) == (2, 12, 393_216)
        cap = vllm.capacity(m, Deployment(), a, 131072, 1, st, BF16, BF16)
        assert cap.blocks == a // 393_216
        assert pool.blocks_per_request(131072, st) == per_req
        assert cap.max_concurrency == pytest.approx(cap.blocks / per_req)


def test_vllm_token_line_changed_in_0_20_1():
    # <= 0.20.0: (num_blocks // groups) x block; >= 0.20.1: int(concurrency x max_model_len) (kv_cache_utils).
    m = find_in_catalog("gpt-oss-20b")
    a = 10 * GIB
    old = vllm.capacity(m, Deployment(), a, 131072, 1, vllm_settings("0.20.0", m, 131072), BF16, BF16)
    new = vllm.capacity(m, Deployment(), a, 131072, 1, vllm_settings("0.20.1", m, 131072), BF16, BF16)
    assert old.tokens == (a // 393_216) // 2 * 16
    assert new.tokens == int(new.max_concurrency * 131072)


def test_vllm_defaults_by_version():
    m = find_in_catalog("llama-3.1-8b-instruct")
    assert vllm_settings("0.19.1", m, 8192).gpu_memory_utilization == 0.90
    assert vllm_settings("0.20.0", m, 8192).gpu_memory_utilization == 0.92
    assert not vllm_settings("0.19.1", m, 8192).cudagraphs and vllm_settings("0.20.0", m, 8192).cudagraphs
    assert vllm_settings("0.11.0", m, 8192).max_num_batched_tokens == 8192  # H100: large tier
    assert vllm_settings("0.11.0", m, 8192, gpu="a100-80").max_num_batched_tokens == 2048  # A100 excluded


def test_vllm_mla_page_and_head_replication():
    # MLA: block 64 (FlashMLA), page = 64 x 576 x 2 B = 73,728 B per layer, the same on every tp rank.
    ds = find_in_catalog("deepseek-v3")
    st = vllm.settings(ds, find_gpu("h200"), Deployment(8), Request(context=8192), "0.11.0", {}, {})
    pool = vllm.build_pool(ds.layers, 8, BF16, BF16, st)
    assert st.block_size == 64 and pool.bytes_per_block == 61 * 73_728
    # Replication: 8 KV heads at tp 16 -> 1 head per rank (max(1, 8 // 16)), page 16 x 1 x 256 x 2 = 8,192 B.
    m = find_in_catalog("llama-3.1-70b")
    pool = vllm.build_pool(m.layers, 16, BF16, BF16, vllm_settings("0.11.0", m, 8192))
    assert pool.bytes_per_block == 80 * 8_192


def test_vllm_fit_with_kv_cache_memory_matches_capacity():
    # Given vLLM's --kv-cache-memory budget, fit's tokens/concurrency are the engine's exactly.
    r = runner.invoke(app, ["fit", "llama-3.1-8b-instruct", "--gpu", "h100", "--ctx", "20000", "--engine", "vllm",
                            "--engine-version", "0.6.6", "--gpus", "1", "--kv-cache-memory", str(1952 * 2 * MIB),
                            "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # V0: 1952 blocks of 16 x 32 layers x 2 x 8 x 128 x 2 B = 2 MiB -> 31,232 tokens, 1.56x at 20,000.
    assert d["engine"]["blocks"] == 1952 and d["kv_cache_tokens"] == 31_232
    assert f"{d['engine']['max_concurrency']:.2f}" == "1.56" and d["max_concurrency"] == 1


# --- SGLang ------------------------------------------------------------------------------------

def test_sglang_qwq32b_pool_from_log_budget():
    # SGLang 0.4.3.post4, QwQ-32B (Qwen2.5-32B geometry: 64 layers, 8 KV heads x 128), tp 4, L4:
    # cell = 2 heads x 256 x 64 x 2 B = 65,536 B; rest = 6.09 - 21.63 x 0.15 = 2.8455 GiB -> 46,620;
    # logged #tokens 46,611 lies within the rounding of the two 2-decimal inputs. K size =
    # (46,611 + 1) x 32,768 B = 1.4225 GiB -> "1.42".
    m = find_in_catalog("qwen2.5-32b")
    st = sglang.settings(m, find_gpu("l4"), Deployment(4), Request(context=131072), "0.4.3", {}, {})
    assert st.mem_fraction_static == 0.85  # the 0.4.3 default for tp 4 (server_args L204-214)
    cap = sglang.capacity(m, Deployment(4), int(2.8455 * GIB), 131072, 1, st, BF16)
    assert cap.tokens == 46_620
    assert f"{sglang.k_size_gib(46_611, m, Deployment(4), BF16, st):.2f}" == "1.42"


def test_sglang_qwen3_235b_k_size():
    # vllm-project/vllm#21348: "#tokens: 367404, K size: 8.23 GB" at tp 4: 94 layers x 1 head x 128 x 2 B
    # = 24,064 B per token -> (367,404 + 1) x 24,064 B = 8.234 GiB.
    m = find_in_catalog("qwen3-235b-a22b")
    st = sglang.settings(m, find_gpu("h100"), Deployment(4), Request(context=8192), "0.5.23", {}, {})
    assert f"{sglang.k_size_gib(367_404, m, Deployment(4), BF16, st):.2f}" == "8.23"


def test_sglang_default_fraction_rules():
    assert sglang.default_fraction("0.4.3", 23034, 1) == 0.88
    # 0.4.9 on an H100 (81,559 MiB = 79.6 GiB < 90) tp 1: reserve (9.5 + 1/2) GiB = 10,240 MiB -> 0.874;
    # an H200 (143,771 MiB < 160 GiB) tp 8: (12 + 8/2) GiB = 16,384 MiB -> round(127,387 / 143,771, 3) = 0.886.
    assert sglang.default_fraction("0.4.9", 81559, 1) == 0.874
    assert sglang.default_fraction("0.4.9", 143771, 8) == 0.886


def test_sglang_default_fraction_by_tp_size_dp_attention_and_release():
    # All from the wheels (kvplan/engines/sglang/defaults.py cites the lines); GPU totals as nvidia-smi prints them.
    from kvplan.engines.sglang.defaults import default_chunked, default_graph_bs

    # 0.5.23, H100 (81,559 MiB): the decode graph batch is 256 below --tp-size 4 and 512 from it. tp 1: 512 + 1.5 x
    # 8,192 + 1/8 x 1,024 + 2 x 256 = 13,440 MiB -> round(68,119 / 81,559, 3) = 0.835; tp 4: 512 + 12,288 + 512 +
    # 1,024 = 14,336 -> round(67,223 / 81,559, 3) = 0.824 (kvplan had taken 256 at every tp: 0.830)
    assert (default_graph_bs("0.5.23", 79.6, 1), default_graph_bs("0.5.23", 79.6, 4)) == (256, 512)
    assert sglang.default_fraction("0.5.23", 81559, 1, 1, 8192, 256) == 0.835
    assert sglang.default_fraction("0.5.23", 81559, 4, 1, 8192, 512) == 0.824
    # DP attention over 8 ranks (--tp-size 8, --dp-size 8) on an H200 (143,771 MiB): 3 MiB a graph slot a DP rank, 1.5
    # more above a max batch of 300: 512 x 8 x 4.5 = 18,432 on top of 512 + 12,288 + 1,024 + 1,024 = 14,848:
    # 33,280 MiB -> round(110,491 / 143,771, 3) = 0.769 (without the DP term 0.897)
    assert sglang.default_fraction("0.5.23", 143771, 8, 1, 8192, 512, attn_dp=8) == 0.769
    assert sglang.default_fraction("0.5.23", 143771, 8, 1, 8192, 512) == 0.897
    # a 24 GiB card (24,564 MiB) at tp 1: 0.5.5-0.5.19 take a 2,048-token chunk and a graph batch of 24 (512 + 3,072 +
    # 128 + 48 = 3,760 -> 0.847), 0.5.20 on 4,096 and 48 (512 + 6,144 + 128 + 96 = 6,880 -> 0.720); 0.5.3-0.5.4: 16
    gib = 24564 / 1024
    assert (default_chunked("0.5.15", gib), default_graph_bs("0.5.15", gib)) == (2048, 24)
    assert (default_chunked("0.5.20", gib), default_graph_bs("0.5.20", gib)) == (4096, 48)
    assert default_graph_bs("0.5.3", gib) == 16 and default_graph_bs("0.5.3", gib, 4) == 80
    assert sglang.default_fraction("0.5.15", 24564, 1, 1, 2048, 24) == 0.847
    assert sglang.default_fraction("0.5.20", 24564, 1, 1, 4096, 48) == 0.72
    # 0.5.0-0.5.2 still reserve by the 0.4.9 table (0.5.2 __post_init__), + 4 GiB under DP attention: H200 tp 8,
    # (12 + 8 / 2) GiB + 4 GiB = 20,480 MiB -> round(123,291 / 143,771, 3) = 0.858
    assert sglang.default_fraction("0.5.2", 143771, 8) == 0.886
    assert sglang.default_fraction("0.5.2", 143771, 8, attn_dp=8) == 0.858
    # its chunk: 2,048 below 35 GiB, 8,192 below 160 (an L40S at 44 GiB among them: 4,096 from 0.5.3)
    assert (default_chunked("0.5.2", 24.0), default_chunked("0.5.2", 44.0), default_chunked("0.5.3", 44.0)) \
        == (2048, 8192, 4096)


def test_sglang_hybrid_swa_split():
    # 0.5.x: cell = full + 0.8 x SWA; full pool = budget // cell; SWA pool = 0.8 x full.
    m = spec([SlidingWindow(8, 128, 4096)] * 5 + [FullAttention(8, 128)], max_context=32768)
    st = sglang.settings(m, find_gpu("h100"), Deployment(), Request(context=32768), "0.5.23", {}, {})
    cap = sglang.capacity(m, Deployment(), 10 * GIB, 32768, 1, st, BF16)
    per_layer = 2 * 8 * 128 * 2
    full = int(10 * GIB // (per_layer + 0.8 * 5 * per_layer))
    assert cap.tokens == full


# --- llama.cpp ---------------------------------------------------------------------------------

def lc(version, kv="fp16", **kw):
    return llamacpp.Settings(version, kw.get("n_ubatch", 512), kw.get("fa", True), kw.get("unified", False),
                             kw.get("swa_full", False), KV_DTYPES[kv], KV_DTYPES[kv])


@pytest.mark.parametrize("model,n_ctx,kv,version,k_mib", [
    # ggml-org/llama.cpp#11200: 64 layers x 32768 cells x 1024 q8_0 values (1088 B) = 2176 MiB.
    ("qwen2.5-32b", 32768, "q8_0", "2024-03", 2176.0),
    # ggml-org/llama.cpp PR 6122: 40 layers x 4096 x 8192 x 2 B = 2560 MiB (Command-R v01).
    ("c4ai-command-r-v01", 4096, "fp16", "2024-03", 2560.0),
    # ggml-org/llama.cpp#13661: GGML_PAD(30000, 32) = 30016 cells (no flash attention) x 48 x 512 x 2 B = 1407 MiB.
    ("qwen3-30b-a3b", 30000, "fp16", "2024-08", 1407.0),
])
def test_llamacpp_logged_cache_sizes(model, n_ctx, kv, version, k_mib):
    st = lc(version, kv, fa=False)
    lay = llamacpp.layout(find_in_catalog(model).layers, n_ctx, 1, st)
    assert lay.k_bytes == lay.v_bytes == int(k_mib * MIB)


def test_llamacpp_quantized_block_bytes():
    # q4_0: 18 bytes per 32 values (ggml-common.h): 1024 values -> 576 B per K row.
    st = lc("current", "q4_0")
    lay = llamacpp.layout([FullAttention(8, 128)], 256, 1, st)
    assert lay.k_bytes == 256 * 576


def test_llamacpp_iswa_and_streams_gemma3_270m():
    # unslothai/unsloth PR 7530 (measured on a live llama-server, Gemma-3-270m: 18 layers, 1 KV head x 256,
    # window 512, non-unified): -c 1024 with 3 slots -> 1536 cells / 27.0 MiB; 4 slots -> 1024 cells / 18.0 MiB.
    # 3 slots: n_ctx_seq = pad256(1024 // 3) = 512, SWA pad256(min(512, 512 + 512)) = 512: 18 x 1536 x 1024 B.
    layers = ([SlidingWindow(1, 256, 512)] * 5 + [FullAttention(1, 256)]) * 3
    for slots, cells, mib in ((3, 1536, 27.0), (4, 1024, 18.0)):
        lay = llamacpp.layout(layers, 1024, slots, lc("current"))
        assert lay.n_ctx == cells and lay.total == int(mib * MIB)


def test_llamacpp_padding_by_era():
    layers = [FullAttention(8, 128)]
    assert llamacpp.layout(layers, 30000, 1, lc("2024-03")).n_ctx == 30000
    assert llamacpp.layout(layers, 30000, 1, lc("2024-08", fa=False)).n_ctx == 30016
    assert llamacpp.layout(layers, 30000, 1, lc("current")).n_ctx == 30208


def test_llamacpp_fit_cli_quantized():
    r = runner.invoke(app, ["fit", "qwen2.5-32b", "--gpu", "4090", "--ctx", "8k", "--engine", "llama.cpp",
                            "--kv-dtype", "q8_0", "--weight-dtype", "int4", "--gpus", "1", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # 64 layers x 8192 cells x 2 x 1088 B (q8_0 rows of 1024) = 1088 MiB.
    assert d["engine"]["lines"]["KV cache size"] == "1088.00 MiB" and d["kv_cache_tokens"] == 8192



@pytest.mark.parametrize("budget, fits, conc", [("100MiB", False, 0), ("10GiB", True, 73)])
def test_llamacpp_honours_an_exact_kv_budget(budget, fits, conc):
    # gemma-3-1b: 26 layers of 1 KV head x 256, f16: 2 x 256 x 2 = 1,024 B per cell per layer; 4 global
    # layers hold pad256(30,000) = 30,208 cells, 22 sliding ones pad256(512 + n_ubatch 512) = 1,024 cells:
    # 4 x 30,208 x 1,024 + 22 x 1,024 x 1,024 = 146,800,640 B per sequence (one stream each).
    # 100 MiB = 104,857,600 B holds none; 10 GiB = 10,737,418,240 B holds 73 (73.1).
    r = runner.invoke(app, ["fit", "gemma-3-1b-it", "--gpu", "h100", "--gpus", "1", "--ctx", "30000",
                            "--engine", "llama.cpp", "--kv-cache-memory", budget, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["fits"], d["max_concurrency"]) == (fits, conc)


# --- TensorRT-LLM and transformers ------------------------------------------------------------

def test_trtllm_no_replication_and_blocks_of_32():
    # resource_manager.get_cache_size_per_token: L x 2 x (d x H // tp) x b: 8 KV heads at tp 16 -> 64 elements,
    # half a head (vLLM/SGLang would keep a whole replicated head).
    m = find_in_catalog("llama-3.1-70b")
    st = trtllm.settings(m, find_gpu("h100"), Deployment(16), Request(context=8192), None, {}, {})
    assert trtllm.bytes_per_token(m.layers, 16, BF16) == 80 * 2 * 64 * 2
    # max_tokens = 2^30 // 20,480 B = 52,428; blocks_in_primary_pool = ceil(52,428 / 32) = 1,639
    # (calculate_max_num_blocks rounds up: TensorRT-LLM#6294, tests/test_trtllm_pool.py), 1,639 x 32 = 52,448 tokens
    cap = trtllm.capacity(m, Deployment(16), 1 * GIB, 8192, 1, st, BF16)
    assert cap.tokens % 32 == 0 and cap.tokens == -(-(GIB // (80 * 2 * 64 * 2)) // 32) * 32 == 52_448


def test_transformers_sliding_layers_show_window_minus_one_and_hold_window():
    # transformers 5.24 cache_utils.py L244-247: the last W - 1 tokens, sliced from the W-token concatenation,
    # whose storage stays allocated (measured: tests/test_validate.py::test_transformers_sliding_layer_storage).
    assert DynamicRules(visible=True).tokens_allocated(SlidingWindow(8, 128, 4096), 10000, 1) == 4095
    assert DynamicRules().tokens_allocated(SlidingWindow(8, 128, 4096), 10000, 1) == 4096
    assert DynamicRules().tokens_allocated(SlidingWindow(8, 128, 4096), 100, 1) == 100
    assert DynamicRules().tokens_allocated(FullAttention(8, 128), 10000, 1) == 10000


# --- CLI ---------------------------------------------------------------------------------------

def test_fit_engine_errors_one_line():
    for args, code in ((["--engine", "nope"], 2), (["--engine", "vllm", "--engine-version", "9.9.9"], 2),
                       (["--engine", "vllm", "--engine-opt", "x"], 2),
                       (["--engine", "sglang", "--engine-opt", "bogus=1"], 2)):
        r = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--ctx", "8k", *args])
        assert r.exit_code == code, (args, r.output)
        assert r.output.strip().count("\n") == 0 and r.output.startswith("Error:")


def test_fit_without_engine_unchanged():
    plain = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--ctx", "8k", "--json"])
    explicit = runner.invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--ctx", "8k", "--json",
                                   "--gpu-memory-utilization", "0.9", "--block-size", "16"])
    assert plain.exit_code == 0 and json.loads(plain.stdout) == json.loads(explicit.stdout)
    assert "engine" not in json.loads(plain.stdout)["plans"][0]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llama.cpp", "transformers"])
def test_fit_every_engine_runs(engine):
    r = runner.invoke(app, ["fit", "gemma-2-9b", "--gpu", "h100", "--ctx", "8k", "--engine", engine, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["plans"][0]
    assert d["engine"]["name"] == engine and d["kv_cache_tokens"] > 0


def test_get_engine_names():
    assert engine_class("llamacpp").name == "llama.cpp" and engine_class("TRT-LLM").name == "trtllm"


def test_engine_figures_are_raw_numbers_rendered_at_the_edge():
    """Issue 10: presentation stays out of the core. An engine's printed lines are Figures with
    numeric values; only kvplan.report.text turns them into GiB/MiB text."""
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.planning.deploy import Deployment
    from kvplan.engines import resolve_engine
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.plan import Request
    from kvplan.report.text import FIGURE_FORMATS, format_figure

    model, gpu = find_in_catalog("qwen3-8b"), find_gpu("h100")
    for name in ("vllm", "sglang", "trtllm", "llama.cpp", "transformers"):
        cap = resolve_engine(name).result(model, gpu, Deployment(1, 1), Request(context=8192)).capacity
        assert cap.lines, name
        for fig in cap.lines:
            values = fig.value if isinstance(fig.value, tuple) else (fig.value,)
            assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values), (name, fig)
            assert fig.unit in FIGURE_FORMATS and format_figure(fig), (name, fig)
    # vLLM's budget line: 2^30 bytes read as "1.00 GiB (1,073,741,824 B)" at the edge, not in the engine.
    from kvplan.engines.base import Figure

    assert format_figure(Figure("KV budget per GPU", 2**30, "bytes")) == "1.00 GiB (1,073,741,824 B)"


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b-thinking", "nemotron-h-56b-base-8k"])
def test_trtllm_refuses_recurrent_states_it_does_not_size(name):
    """TRT-LLM keeps Mamba / linear-attention states in a separate Mamba cache manager that kvplan's
    trtllm engine does not model; it used to price them at 0 bytes without a word (a hybrid's
    concurrency silently too high). It refuses them now, and the default engine still plans them."""
    result = runner.invoke(app, ["fit", name, "--gpu", "h200", "--tp", "4", "--ctx", "8k", "--engine", "trtllm"])
    assert result.exit_code == 2
    assert "trtllm has no rule for state layers" in result.output
    assert "Traceback" not in result.output
    assert runner.invoke(app, ["fit", name, "--gpu", "h200", "--tp", "4", "--ctx", "8k"]).exit_code == 0
