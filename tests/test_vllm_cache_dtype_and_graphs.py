"""Two vLLM facts read from its source: MiMo-V2-Flash caches K/V in the model dtype whatever
--kv-cache-dtype says, and the release from which the CUDA-graph estimate is subtracted from the budget."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.sources.catalog import find_in_catalog
from kvplan.planning.deploy import Deployment
from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.engines import resolve_engine
from kvplan.engines.vllm.engine import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.plan import Request

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"


def test_mimo_v2_flash_kv_is_cached_in_bf16_under_vllm_whatever_the_kv_dtype():
    # vllm/model_executor/models/mimo_v2_flash.py (commits 01ed47b4 and 91cf2f13): MiMoV2FlashDecoderLayer builds
    # MiMoV2Attention without cache_config, so Attention(cache_config=None) caches in the model dtype (bf16).
    # MiMo-V2-Flash at tp 8: 48 layers (39 sliding, 9 full), KV heads 8 and 4 -> max(1, heads // 8) = 1 per rank,
    # K 192 + V 128 = 320 values a head: 48 x 320 x 2 B = 30,720 B per token per rank in bf16, 15,360 in fp8.
    model, gpu, dep = find_in_catalog("mimo-v2-flash"), find_gpu("h200"), Deployment(8, 1)
    fp8 = Request(context=32768, kv_dtype=canonical_kv_dtype("fp8"))
    res = resolve_engine("vllm").result(model, gpu, dep, fp8)
    assert res.capacity.bytes_per_token == 48 * 320 * 2
    assert res.plan.request.kv_dtype is None  # the model's own dtype
    assert any("whatever --kv-cache-dtype says" in n for n in res.capacity.notes)
    # kvplan's own rules size the dtype asked for
    neutral = resolve_engine(None).result(model, gpu, dep, fp8)
    assert neutral.plan.request.kv_dtype.name == "fp8"
    # a model vLLM builds with the cache config keeps the fp8 asked for: Llama 3.1 8B at tp 1,
    # 32 layers x 8 KV heads x (128 + 128) x 1 B = 65,536 B per token
    llama = resolve_engine("vllm").result(find_in_catalog("llama-3.1-8b-instruct"), gpu, Deployment(1, 1), fp8)
    assert llama.capacity.bytes_per_token == 32 * 8 * 256


def test_cuda_graph_estimate_is_subtracted_from_vllm_0_20_0():
    # vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" in the 0.20.0 wheel (L1724-1726),
    # 0.20.1 (L1737) and 0.21.0 (L1769); v0.19.1 L1655 defaults to "0". gpu_worker.py v0.20.0 L399-403 subtracts
    # the estimate when it is set (L420-425). The log line "CUDA graph memory profiling is enabled (default since
    # v0.21.0)" is already in the 0.20.0 wheel's gpu_worker.py (L455-462): its text names 0.21.0, the code
    # ships it on in 0.20.0, so logs carrying it say nothing about 0.20.x being off.
    model = find_in_catalog("llama-3.1-8b-instruct")
    gpu, req = find_gpu("h100"), Request(context=8192)
    on = {v: vllm_settings(model, gpu, Deployment(), req, v).cudagraphs
          for v in ("0.19.1", "0.20.0", "0.20.1", "0.22.0")}
    assert on == {"0.19.1": False, "0.20.0": True, "0.20.1": True, "0.22.0": True}
    assert not vllm_settings(model, gpu, Deployment(), req, "0.20.0", {"enforce_eager": "true"}).cudagraphs


def test_vllm_0_19_prediction_leaves_the_cuda_graph_estimate_in_the_kv_budget():
    # llm-d-planner's v0.19.0 Qwen2.5-7B-Instruct log (training split; H100 79.19 GiB, gmu 0.95, tp 1) prints each
    # term: 0.95 x 79.19 = 75.23 GiB - weights 14.25 - activation peak 2.21 - non-torch 0.24 = 58.53 GiB
    # (58.53 printed), and "Estimated CUDA graph memory: 0.61 GiB", which is therefore not subtracted (with it the
    # budget would be 57.92).
    # kvplan's 0.19.0 prediction must land on the log's side: within half the estimate (0.305 GiB) of 58.53,
    # while kvplan does estimate the graphs (subtracted, its own estimate would put it that far below).
    from typer.testing import CliRunner

    from kvplan.cli import app

    log = CORPUS / "llmd-qwen-qwen2-5-7b-instruct-h100-80gb-tp1pp1dp1-8192.log"
    r = CliRunner().invoke(app, ["check-log", str(log), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["version"] == "0.19.0"
    rows = {row["quantity"]: row for row in out["rows"]}
    available = rows["available KV memory (gmu 0.95)"]
    graphs = rows["CUDA graphs (vLLM's estimate)"]
    assert available["reported"] == "58.53 GiB" and graphs["reported"] == "0.61 GiB"
    predicted = float(available["predicted"].split()[0])
    estimate = float(graphs["predicted"].split()[0])
    assert abs(predicted - 58.53) < 0.61 / 2
    assert estimate > 0.61 / 2 and abs(predicted - estimate - 58.53) > 0.61 / 2


def test_cuda_graph_terms_follow_the_attention_features_not_the_family():
    # vLLM sizes FULL graphs' first capture from FA3's split-KV accumulator, fp32 [32 splits, tokens, heads/tp,
    # v_head_dim]: Llama 3.1 8B at tp 1, 512 tokens: 32 x 4 B x 512 x 32 heads x 128 = 268,435,456 B. A layer
    # with sinks or an image prefix that attends both ways (kvplan.model.layers ATTENTION_FEATURES) does not run that
    # path, and a chunked local layer makes the whole model PIECEWISE (no FULL graphs): the same Llama under any
    # family name, with one feature set on its layers, loses the accumulator.
    from dataclasses import replace

    from kvplan.engines.vllm import overhead as vo
    from kvplan.model.layers import ChunkedLocal, FullAttention

    llama = find_in_catalog("llama-3.1-8b-instruct")
    assert all(type(la) is FullAttention for la in llama.layers)
    assert vo.fa_split_accumulator(llama, 1, 512) == 32 * 4 * 512 * 32 * 128
    for feature in ("sinks", "mm_prefix"):
        other = replace(llama, family="a_new_family",
                        layers=tuple(replace(la, **{feature: True}) for la in llama.layers))
        assert vo.fa_split_accumulator(other, 1, 512) == 0, feature
        # max_num_seqs 1024: 51 PIECEWISE and 51 FULL graphs (capture sizes up to 512), 100 further graphs of
        # 32 layers x 0.126 MiB -> 6 MiB (the 2 MiB page), on the 209 MiB PIECEWISE first capture: no accumulator,
        # so the FULL first capture is one 6 MiB graph
        assert vo.cudagraph_estimate(32, other, 1, 1024) == (209 + 100 * 6) * 2**20
    # only the first layer without a feature sizes the accumulator (MiMo-V2: sinks on its local layers only)
    one = replace(llama, layers=(replace(llama.layers[0], sinks=True),) + llama.layers[1:])
    assert vo.fa_split_accumulator(one, 1, 512) == 32 * 4 * 512 * 32 * 128
    # one chunked local layer: PIECEWISE only, so FULL sizes are empty and the 51 PIECEWISE graphs remain
    chunked = replace(llama, family="a_new_family", layers=(ChunkedLocal(8, 128, 8192),) + llama.layers[1:])
    piecewise, full = vo.cudagraph_counts(chunked, 1024)
    assert (len(piecewise), full) == (51, [])


def test_readers_set_the_attention_features_and_the_catalog_keeps_them():
    import json as _json

    from kvplan.sources.catalog import spec_from_dict, spec_to_dict
    from kvplan.readers.configs import spec_from_config

    text = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64,
            "num_hidden_layers": 6, "intermediate_size": 512, "vocab_size": 1000, "sliding_window": 512,
            "max_position_embeddings": 8192}
    # Gemma 3 with its vision tower (top-level model_type gemma3) is in vLLM's is_mm_prefix_lm list; the text-only
    # gemma3_text is not; any config may say so itself with is_mm_prefix_lm
    wrapped, _ = spec_from_config({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", **text}}, "g")
    alone, _ = spec_from_config({"model_type": "gemma3_text", **text}, "g1")
    own, _ = spec_from_config({"model_type": "llama", "is_mm_prefix_lm": True, **text}, "l")
    assert all(la.mm_prefix for la in wrapped.layers) and not any(la.mm_prefix for la in alone.layers)
    assert all(la.mm_prefix for la in own.layers)
    # gpt-oss: sinks on every attention layer (no config key); the bundled entries carry them
    assert all(la.sinks for la in find_in_catalog("gpt-oss-20b").layers)
    assert all(la.mm_prefix for la in find_in_catalog("gemma-3-27b-it").layers)
    # the catalog writes a feature only where it is set, and reads it back
    raw = spec_to_dict(wrapped)
    assert all(run["mm_prefix"] is True and "sinks" not in run for run in raw["layers"])
    assert spec_from_dict(_json.loads(_json.dumps(raw)), "g").layers == wrapped.layers
    assert all("mm_prefix" not in run for run in spec_to_dict(alone)["layers"])


def test_fa3_accumulator_only_where_vllm_runs_fa3():
    # FULL graphs capture FA3's fp32 split-KV accumulator, 32 splits x 4 B x tokens x heads x v_dim, where vLLM picks
    # FA3 (capability 9.x; fa_utils.get_flash_attn_version); FA2 (8.x, 12.x) fixes no split count for graphs.
    # Llama 3.1 8B at 1,024 sequences: FULL up to 512 -> 32 x 4 x 512 x 32 x 128 = 268,435,456 B on an H100; on an
    # RTX PRO 6000 (12.0, 96 GB: the 1,024-sequence tier) the first capture is the PIECEWISE constant, 209 MiB.
    # Further graphs 50 + 50 = 100 of 32 layers x 0.126 MiB -> 6 MiB either way; on the H100 the FULL first capture
    # is the accumulator and one graph, 256 + 6 MiB.
    from kvplan.engines.vllm import overhead as vo

    further, llama = 100 * 6 * 2**20, find_in_catalog("llama-3.1-8b")
    assert vo.cudagraph_estimate(32, llama, 1, 1024, find_gpu("h100-sxm")) == 268_435_456 + 6 * 2**20 + further
    assert vo.cudagraph_estimate(32, llama, 1, 1024, find_gpu("rtx-pro-6000-server")) == 209 * 2**20 + further
    assert vo.fa_split_accumulator(find_in_catalog("llama-3.1-8b"), 1, 512, find_gpu("rtx-4090")) == 0
    # 10.x: kept, not checked
    assert vo.fa_split_accumulator(find_in_catalog("llama-3.1-8b"), 1, 512, find_gpu("b200")) == 268_435_456
    # no GPU: the H100 corpus's answer
    assert vo.fa_split_accumulator(find_in_catalog("llama-3.1-8b"), 1, 512) == 268_435_456
