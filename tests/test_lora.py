"""--lora MAX_LORAS:RANK[:MODULES]: the adapter memory each engine reserves before the KV cache, by hand.

Llama-3.1-8B (meta-llama/Llama-3.1-8B config.json): hidden 4096, 32 heads x 128 = 4096, 8 KV heads x 128 =
1024, MLP 14336, 32 layers, vocabulary 128,256, bf16. The shapes are the engines' own:
  * vLLM `vllm/lora/layers/base_linear.py` create_lora_weights: per slice lora_a (max_loras, 1, rank, in) and
    lora_b (max_loras, 1, out, rank); column-parallel in = hidden, out split by tp; row-parallel in split.
  * TensorRT-LLM `cpp/tensorrt_llm/batch_manager/peftCacheManager.cpp` getPageManagerConfig / getMaxNumSlots
    with num_device_module_layer = max_lora_rank x num_hidden_layers x modules x max_loras
    (`tensorrt_llm/_torch/pyexecutor/py_executor_creator.py`).
"""

import pytest
from typer.testing import CliRunner

from kvplan import api
from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.planning.lora import LoraRequest, parse_lora
from conftest import unwrapped

MODEL = "llama-3.1-8b-instruct"
runner = CliRunner()


def _lora_bytes(engine=None, lora="4:16:q,k,v,o", **kw):
    with_lora = api.plan(MODEL, "h100", context="8k", engine=engine, lora=lora, **kw)
    without = api.plan(MODEL, "h100", context="8k", engine=engine, **kw)
    # the reservation is its own term: the KV budget shrinks by exactly it (before TRT-LLM's fraction)
    return with_lora.request.lora_bytes, without.kv_memory_bytes_per_gpu - with_lora.kv_memory_bytes_per_gpu


def test_vllm_llama8b_four_rank16_adapters_on_attention():
    # per layer: q 16x4096 + 4096x16 = 131,072; k 16x4096 + 1024x16 = 81,920; v 81,920;
    # o 16x4096 + 4096x16 = 131,072 -> 425,984 elements; x 32 layers x 4 slots x 2 B = 109,051,904 B
    size, drop = _lora_bytes("vllm")
    assert size == 109_051_904 and drop == size


def test_vllm_under_tensor_parallel_splits_by_kind_of_projection():
    # tp 2: q 16x4096 + 2048x16 = 98,304; k 16x4096 + 512x16 = 73,728; v 73,728; o (row) 16x2048 + 4096x16
    # = 98,304 -> 344,064 x 32 x 4 x 2 B = 88,080,384 B per GPU
    p = api.plan(MODEL, "h100", context="8k", engine="vllm", tp=2, lora="4:16:q,k,v,o")
    assert p.request.lora_bytes == 88_080_384


def test_vllm_wraps_packed_projections_whole():
    # q alone wraps qkv_proj's three slices: (131,072 + 81,920 + 81,920) x 32 x 4 x 2 B = 75,497,472 B
    assert _lora_bytes("vllm", "4:16:q")[0] == 75_497_472


def test_vllm_before_target_modules_prices_every_linear_layer():
    # 0.11.0 has no --lora-target-modules: all seven projections + the vocabulary estimate, whatever was named
    # MLP per layer: gate/up 16x4096 + 14336x16 = 294,912 each, down 16x14336 + 4096x16 = 294,912
    # -> (425,984 + 884,736) x 32 = 41,943,040; vocab 16 x (128,256 + 4096 + 4096 + 128,256) = 4,235,264
    old = api.plan(MODEL, "h100", context="8k", engine="vllm", engine_version="0.11.0", lora="4:16:q,k,v,o")
    assert old.request.lora_bytes == 4 * (41_943_040 + 4_235_264) * 2


def test_sglang_pool_and_neutral_match_the_stacked_slots():
    assert _lora_bytes("sglang")[0] == 109_051_904
    assert _lora_bytes(None) == (109_051_904, 109_051_904)


def test_trtllm_paged_device_cache():
    # 1-D sizes (in + out): q 8192, k 5120, v 5120, o 8192 -> page width 5120, widest 8192
    # module layers 16 x 32 x 4 x 4 = 8,192; slots 8,192 x ceil(8192/5120) = 16,384
    # slots per page max(8 x (2+1+1+2) x 32 = 1,536, ceil(16 x 8192 / 5120) = 26) = 1,536; pages ceil(16384/1536) = 11
    # 11 x 1,536 x 5,120 x 2 B = 173,015,040 B
    size = api.plan(MODEL, "h100", context="8k", engine="trtllm", lora="4:16:q,k,v,o").request.lora_bytes
    assert size == 173_015_040


def test_parse_reads_groups_and_refuses_bad_text():
    assert parse_lora("4:16") == LoraRequest(4, 16)
    assert parse_lora("8:64:attn").modules == ("q", "k", "v", "o")
    assert parse_lora("2:8:down_proj,q_proj").modules == ("q", "down")
    for bad in ("4", "0:16", "4:16:foo", "4:x", "4:16:"):
        with pytest.raises(KvplanError) as e:
            parse_lora(bad)
        assert e.value.param == "lora"


def test_refusals_where_the_shapes_are_not_read():
    with pytest.raises(KvplanError, match="mixture-of-experts"):
        api.plan("qwen3-30b-a3b", "h100", context="8k", engine="vllm", lora="4:16")
    ok = api.plan("qwen3-30b-a3b", "h100", context="8k", engine="vllm", lora="4:16:q,k,v,o")
    assert ok.request.lora_bytes > 0
    with pytest.raises(KvplanError, match="no LoRA pricing"):
        api.plan(MODEL, "h100", context="8k", engine="llama.cpp", lora="4:16")


def test_cli_prints_its_own_budget_row_and_json():
    r = runner.invoke(app, ["fit", MODEL, "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--lora", "4:16:q,k,v,o"])
    assert r.exit_code == 0 and "− LoRA 4:16:q,k,v,o" in unwrapped(r.stdout) and "0.10 GiB" in unwrapped(r.stdout)
    bad = runner.invoke(app, ["fit", MODEL, "--gpu", "h100", "--lora", "4"])
    assert bad.exit_code == 2 and "--lora takes MAX_LORAS:RANK" in bad.stderr


def test_sweep_and_cheapest_carry_the_adapters():
    plain = api.sweep(MODEL, gpu="h100", context="8k", gpu_counts=[1]).plans[0]
    adapted = api.sweep(MODEL, gpu="h100", context="8k", gpu_counts=[1], lora="4:16:q,k,v,o").plans[0]
    assert plain.kv_memory_bytes_per_gpu - adapted.kv_memory_bytes_per_gpu == 109_051_904
    best = api.cheapest(MODEL, concurrency=1, context="8k", gpu="h100", lora="4:16:q,k,v,o")[0]
    assert best.plan.request.lora_bytes == 109_051_904


def test_emit_carries_the_lora_flags():
    # vLLM's --lora-target-modules takes module suffixes (vllm-project/vllm#34984: `o_proj qkv_proj`), from 0.17.0
    r = runner.invoke(app, ["fit", MODEL, "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--lora", "4:16:q,v,o",
                            "--emit", "vllm"])
    assert r.exit_code == 0
    assert "--enable-lora --max-loras 4 --max-lora-rank 16 --lora-target-modules qkv_proj o_proj" in unwrapped(r.stdout)
    old = runner.invoke(app, ["fit", MODEL, "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--engine-version",
                              "0.11.0", "--lora", "4:16:q", "--emit", "vllm"])
    assert "--max-lora-rank 16" in unwrapped(old.stdout) and "--lora-target-modules" not in unwrapped(old.stdout)
    sg = runner.invoke(app, ["fit", MODEL, "--gpu", "h100", "--ctx", "8k", "--engine", "sglang", "--lora", "8:64",
                             "--emit", "sglang"])
    assert "--enable-lora --max-loras-per-batch 8 --max-lora-rank 64 --lora-target-modules all" in unwrapped(sg.stdout)


def test_simulate_runs_on_the_pool_left_beside_the_adapters():
    kw = dict(workload="chat", qps=1, duration=5, max_model_len="8k", engine="vllm")
    plain = api.simulate(MODEL, "h100", **kw).plan
    adapted = api.simulate(MODEL, "h100", lora="4:16:q,k,v,o", **kw).plan
    assert plain.kv_memory_bytes_per_gpu - adapted.kv_memory_bytes_per_gpu == 109_051_904
