"""Host pools against what engines printed at start-up: the records of tests/fixtures/logs/corpus/index.yaml
(each cited there: source, date, settings, the figures as printed) that size a host tier.

* vLLM V0 `# CPU blocks` (the swap space, 4 GiB per worker unless the record says otherwise): kvplan's rule
  (kvplan.engines.vllm.offload.swap_pool) on the record's model and tensor-parallel size must print the
  same count, to the block.
* SGLang HiCache: the per-rank allocation line of sglang#31600 and the refusal quoted by sglang PR #8102.
"""

from __future__ import annotations

import pytest

from conftest import corpus_log, corpus_record, training_log
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.logparse import parse_log
from kvplan.engines.offload import offload_pools
from kvplan.engines.vllm.offload import swap_blocks
from kvplan.hardware.gpus import find_gpu
from kvplan.hardware.hosts import Host
from kvplan.planning.deploy import Deployment
from kvplan.planning.offload import parse_offload
from kvplan.planning.plan import Request
from kvplan.readers.configs import spec_from_config
from kvplan.sources.catalog import find_in_catalog

# records of the memory corpus's held-out split read below for their log's format alone (the parser's reading of a
# line against the index), never against a kvplan figure: a prediction is checked on training records and by hand
HELD_OUT = {"vllm-13882-qwen25-7b-rtx4060-v0"}
GIB = 2**30

# deepseek-ai/deepseek-coder-6.7b-instruct's config.json, the keys that size its cache: a Llama layout with 32
# layers of 32 KV heads x 128 (hidden 4096 / 32 heads), not in kvplan's catalog.
DEEPSEEK_CODER_67B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                      "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
                      "num_key_value_heads": 32, "vocab_size": 32256, "max_position_embeddings": 16384,
                      "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}

# (record, the model whose cache geometry it ran, tp): the record's model or one with the same KV layout.
V0_SWAP = [
    ("mlcommons-2267-llama31-8b-tp8-v0", "llama-3.1-8b-instruct", 8),  # 2 x 32 x 1 x 128 x 2 B = 16,384 B/token
    ("vllm-15039-llama33-70b-lora-tp4-v0", "llama-3.3-70b-instruct", 4),  # 2 x 80 x 2 x 128 x 2 = 81,920
    ("vllm-7593-gemma2-9b-8xl4-v0", "gemma-2-9b", 8),  # 2 x 42 x 1 x 256 x 2 = 43,008: V0 sizes sliding layers full
    ("vllm-12330-llama3-8b-a100-40gb-v0", "llama-3.1-8b", 1),  # Llama-3-8B: the same 32 x 8 x 128 cache
    ("vllm-5248-deepseek-coder-2xt4", DEEPSEEK_CODER_67B, 2),  # 2 x 32 x 16 x 128 x 2 = 262,144
]


def _spec(model):
    return spec_from_config(model, "deepseek-coder-6.7b")[0] if isinstance(model, dict) else find_in_catalog(model)


@pytest.mark.parametrize("record,model,tp", V0_SWAP, ids=[r for r, _, _ in V0_SWAP])
def test_vllm_v0_cpu_blocks_equal_the_logs(record, model, tp):
    rec = corpus_record(record)  # training records only: a held-out one is never a prediction's yardstick here
    printed = int(str(rec["figures"]["cpu_blocks"]).replace(",", ""))
    assert rec["tp"] == tp
    spec = _spec(model)
    engine = resolve_engine("vllm", "0.6.6")
    plan = engine.plan(spec, find_gpu("h100"), Deployment(tp), Request(4096))  # the GPU does not enter the swap
    (tier,) = offload_pools(engine, plan, spec, parse_offload(f"cpu:{4 * tp}GiB")).tiers
    assert tier.flag == "--swap-space 4.0" and tier.blocks == printed
    # the log parser reads the same figure back from the excerpt
    assert parse_log(corpus_log(record)).reported["cpu_blocks"].value == printed


def test_vllm_v0_cpu_blocks_by_hand():
    # vLLM 0.6.6 CacheEngine: swap_space_bytes // (block_size x the KV bytes of a token on a rank) blocks.
    # Qwen2.5-7B at tp 1 (config.json: 28 layers, 4 KV heads x 128, bf16): 2 x 28 x 4 x 128 x 2 = 57,344 B a token,
    # 16 x 57,344 = 917,504 B a block; 4 GiB = 4,294,967,296 B // 917,504 = 4,681 (4,681 x 917,504 = 4,294,836,224).
    spec = find_in_catalog("qwen2.5-7b-instruct")
    engine = resolve_engine("vllm", "0.6.6")
    plan = engine.plan(spec, find_gpu("h100"), Deployment(1), Request(4096))
    (tier,) = offload_pools(engine, plan, spec, parse_offload("cpu:4GiB")).tiers
    assert tier.blocks == 4_681
    # Llama-3.2-11B-Vision at tp 1, outside the catalog: 40 decoder layers (32 self- and 8 cross-attention) of 8 KV
    # heads x 128, bf16: 2 x 40 x 8 x 128 x 2 = 163,840 B a token; 4,294,967,296 // (16 x 163,840) = 1,638 blocks.
    assert swap_blocks(4 * GIB, 16, 2 * 40 * 8 * 128 * 2) == 1_638


@pytest.mark.parametrize("record", sorted(HELD_OUT))
def test_a_held_out_v0_logs_cpu_blocks_line_is_read(record):
    # the parser alone: the "# CPU blocks" line read as the index transcribes it (no kvplan figure beside it)
    rec = corpus_record(record, held_out=True)
    printed = int(str(rec["figures"]["cpu_blocks"]).replace(",", ""))
    assert parse_log(corpus_log(record, held_out=True)).reported["cpu_blocks"].value == printed


def test_vllm_v0_mla_swap_is_refused_not_guessed():
    # vllm#13109 (DeepSeek-Coder-V2-Lite AWQ, MLA) printed 7,767 CPU blocks: 4 GiB / 7,767 = 552,976 B per block,
    # 640 elements per layer per token, not the latent's 576: V0's MLA block is not modelled, so kvplan refuses.
    spec = find_in_catalog("deepseek-v2-lite")
    engine = resolve_engine("vllm", "0.6.6")
    plan = engine.plan(spec, find_gpu("h100"), Deployment(1), Request(4096))
    with pytest.raises(KvplanError, match="mla"):
        offload_pools(engine, plan, spec, parse_offload("cpu:4GiB"))


def test_vllm_v0_swap_against_the_hosts_memory_by_hand():
    # vllm/config.py CacheConfig.verify_with_parallel_config: swap x tp > 70% of the host's memory refuses to start,
    # > 40% warns. tp 2 x 4 GiB = 8 GiB on a 15.27 GiB host: 52% -> the warning, not the refusal.
    spec = find_in_catalog("llama-3.1-8b")
    engine = resolve_engine("vllm", "0.6.6")
    plan = engine.plan(spec, find_gpu("h100"), Deployment(2), Request(4096))
    host = _host(int(15.27 * GIB))
    words = [w.message for w in offload_pools(engine, plan, spec, parse_offload("cpu:8GiB"), host=host).warnings]
    assert any("Possibly too large swap space" in w for w in words) and not any("Too large swap" in w for w in words)
    words = [w.message for w in offload_pools(engine, plan, spec, parse_offload("cpu:24GiB"), host=host).warnings]
    assert any("refuses to start (Too large swap space)" in w for w in words)  # 24 GiB = 157% of 15.27 GiB


def _host(dram: int) -> Host:
    return Host("test-host", "a test host", (), dram, 1, "PCIe", 64 * 10**9, 10 * GIB, dram // 2, None, None, None,
                None, None, "test", "low", "", "")


def test_sglang_hicache_allocates_per_rank_in_decimal_gb():
    # --hicache-size is decimal GB per rank (its allocation line, "Allocating X GB host memory for hierarchical KV
    # cache.", prints size / 1e9 on each rank): 960 GB for 8 ranks is 120 GB each; llama-3.1-70b at tp 8 (40,960 B
    # per token, page 1): (int(120e9 // 40,960) + 1) x 40,960 = 120,000,020,480 B, which prints as 120.00 GB.
    spec = find_in_catalog("llama-3.1-70b")
    engine = resolve_engine("sglang", "0.5.16")
    plan = engine.plan(spec, find_gpu("h200"), Deployment(8), Request(8192))
    (tier,) = offload_pools(engine, plan, spec, parse_offload("cpu:960GB")).tiers
    assert tier.flag.endswith("--hicache-size 120") and tier.bytes_per_rank == 120_000_020_480
    assert f"{tier.bytes_per_rank / 1e9:.2f}" == "120.00"


def test_sglang_31600_hicache_line_is_read():
    # sgl-project/sglang#31600 (held out; its model, GLM-5.2 with DSA, is not modelled): the parser alone reads each
    # rank's "Allocating ... GB host memory for hierarchical KV cache." line and the tp, as the index transcribes them
    rec = corpus_record("sglang-31600-glm52-hicache-8ranks", held_out=True)
    log = parse_log(corpus_log(rec["id"], held_out=True))
    assert log.engine == "sglang" and log.tp == rec["tp"] == 8
    assert log.reported["hicache_host_gb"].text == f"{float(rec['figures']['hicache_host_gb']):.2f}"


def test_sglang_pr8102_refusal_is_the_reserve_rule():
    # sgl-project/sglang PR #8102 quotes "Requesting 40.00 GB but only have 44.87 GB free": the 0.4.9 code compared
    # the request with the available memory less 10 GiB (44.87 GB - 10.74 GB = 34.13 GB < 40.00) and printed the
    # available memory. kvplan's host check, on a host whose memory is those 44.87 GB: the same refusal; with
    # 51 GB (51 - 10.74 = 40.26 >= 40.00) none.
    log = parse_log(training_log("sglang-pr8102-hicache-refusal"))
    asked, free = log.reported["hicache_requested_gb"].value, log.reported["hicache_free_gb"].value
    assert asked * 1e9 > free * 1e9 - 10 * GIB
    spec = find_in_catalog("llama-3.1-8b")
    engine = resolve_engine("sglang", "0.4.9")
    # an A100 40GB: 0.4.9 also asserts the host pool (305,175 tokens) is larger than the device pool, checked first
    plan = engine.plan(spec, find_gpu("a100-40"), Deployment(1), Request(8192))
    assert plan.kv_cache_tokens < 305_175
    op = offload_pools(engine, plan, spec, parse_offload("cpu:40GB"), host=_host(int(free * 1e9)))
    (tier,) = op.tiers
    # int(40e9 // 131,072) x 131,072
    assert f"{tier.bytes_total / 1e9:.2f}" == log.reported["hicache_requested_gb"].text
    assert any("SGLang refuses to start" in w.message for w in op.warnings)
    op = offload_pools(engine, plan, spec, parse_offload("cpu:40GB"), host=_host(51 * 10**9))
    assert not any("refuses" in w.message for w in op.warnings)
