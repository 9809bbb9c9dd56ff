"""The simulator's KV pool where an engine keeps recurrent states in a pool of their own (SGLang's hybrids)."""

from __future__ import annotations

from kvplan import api
from kvplan.hardware.gpus import find_gpu
from kvplan.simulator.adapter import sim_model
from kvplan.sources.catalog import find_in_catalog

SPEC, H200 = find_in_catalog("qwen3.5-27b"), find_gpu("h200-sxm")


def test_sglang_hybrid_simulates_its_token_pool_and_its_slot_cap():
    # SGLang 0.5.23 on an H200, Qwen3.5-27B (tests/test_sglang_state_memory.py has the rule's arithmetic): the
    # default fraction from nvidia-smi's 143,771 MiB, 512 + 1.5 x 8,192 + 1/8 x 1,024 + 2 x 256 = 13,440 MiB plus
    # the breakable prefill graph Qwen3.5 keeps (on 0.5.23's allow-list: 58 sizes x 8 MiB = 464;
    # tests/test_sglang_prefill_graph_rules.py), round((143,771 - 13,904) / 143,771, 3) = 0.903, times the VLM factor
    # 0.924765625, gives "rest" 70,121,552,823 B for the checkpoint and its RoPE table, less the 2,873,344 B of
    # PyTorch's caching allocator's rounding of the weights (kvplan.core.caching_allocator; booked as weights, so out
    # of "rest" whole) = 70,118,679,479 B, less the 100 MiB (104,857,600 B) SGLang reserves for a multimodal model's
    # embedding cache from 0.5.18 (kvplan.engines.sglang.multimodal.reserved) = 70,013,821,879 B; slots
    # int((rest x 0.9 / 1.9 - 153,944,064) / 153,944,064) = 214, so the state pool takes 215 rows x 153,944,064 B =
    # 33,097,973,760 B, the token pool holds (70,013,821,879 - 33,097,973,760) // 64 KiB = 563,291 tokens (16
    # full-attention layers x 2 x 4 KV heads x 256 x 2 B = 65,536 B a token) = 36,915,838,976 B; 214 slots // 5 per
    # request = 42 run.
    sim = api.simulate("qwen3.5-27b", "h200-sxm", engine="sglang", workload="chat", qps=1, duration=5)
    model = sim_model(sim.plan, SPEC, H200, engine="sglang")
    assert model.kv_budget_bytes == 563_291 * 65_536 == 36_915_838_976 and model.state_bytes == 0
    assert sim.limits.max_num_seqs == 42


def test_vllm_keeps_states_in_its_one_pool():
    plan = api.plan("qwen3.5-27b", "h200-sxm", engine="vllm", context=32768)
    model = sim_model(plan, SPEC, H200, engine="vllm")
    assert plan.state_pool_bytes_per_gpu == 0 and model.state_bytes > 0
    assert model.kv_budget_bytes == plan.stages[0].kv_memory_bytes


def test_a_disaggregated_sglang_hybrid_pool_holds_what_its_slots_and_tokens_allow():
    # The decode replica of Qwen3.5-27B at 8,192 + 1,024 tokens on an H200 under SGLang 0.5.23: its token pool
    # (563,291 tokens, as above) holds 563,291 // 9,216 = 61 sequences, but 214 state slots // 5 a request = 42 run.
    # The whole budget over tokens and a state each (70,013,821,879 // (9,216 x 65,536 + 153,944,064) = 92)
    # is what the pool check said before.
    from kvplan.compare.disagg import holds_at

    res = api.plan("qwen3.5-27b", "h200-sxm", engine="sglang", context=9216)
    assert holds_at(res, 9216) == 563_291 // 9_216 == 61
    assert holds_at(res, 9216, 42) == 42
