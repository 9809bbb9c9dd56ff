"""TensorRT-LLM's custom all-reduce workspace (kvplan.engines.trtllm.allreduce): three IpcMemory buffers a rank,
size x tp, 256 x tp and 3 x size x tp, each in 2 MiB pages, only for a tp group on one node; booked in the overhead
before the KV pool (it is allocated at model construction, before KvCacheCreator's free-memory read).

Sources (the module docstring): NVIDIA/TensorRT-LLM allreduce_helper.py @4fb601b9 L122-131 (the three buffers),
L83 (67,108,864 B); plugin.py @c20322ff max_workspace_size_auto (16,000,000 at tp <= 2, 8,000,000 above);
_ipc_utils.py @c8965302 (align_size(size, 1 << 21); nothing where tp_size > gpus_per_node).
Under attention DP: modeling_deepseekv3.py @a43cf9e3 (AllReduce and MoEAllReduce on the model's Mapping, tp_size
= every rank) before TensorRT-LLM#9542, and its guard `if not self.enable_attention_dp and self.mapping.tp_size > 1`
from it (1.2.0).
"""

from __future__ import annotations

from kvplan.engines import resolve_engine
from kvplan.engines.trtllm.allreduce import workspace_bytes, workspace_size
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20


def test_the_workspace_at_tp_8_by_hand():
    # 1.2.0, size 64 MiB: data 8 x 64 = 512 MiB; barriers 256 x 8 = 2,048 B -> one 2 MiB page; Lamport 3 x 512 =
    # 1,536 MiB: 2,050 MiB a rank
    assert workspace_bytes(8, 8, "1.2.0") == 2_050 * MIB == 2_149_580_800
    # 0.20.0, size 8,000,000 (tp > 2): 64,000,000 B -> 31 pages of 2,097,152 (65,011,712); 2 MiB; 192,000,000 B ->
    # 92 pages (192,937,984): 260,046,848 B
    assert workspace_bytes(8, 8, "0.20.0") == 65_011_712 + 2_097_152 + 192_937_984 == 260_046_848
    # 0.20.0 at tp 2, size 16,000,000: 32,000,000 -> 16 pages (33,554,432); 2 MiB; 96,000,000 -> 46 pages (96,468,992)
    assert workspace_bytes(2, 8, "0.20.0") == 33_554_432 + 2_097_152 + 96_468_992


def test_none_across_nodes_or_on_one_gpu():
    assert workspace_bytes(8, 4, "1.2.0") == 0  # tp 8 over trays of 4: IpcMemory opens nothing, NCCL runs it
    assert workspace_bytes(1, 8, "1.2.0") == 0


def test_the_plan_books_it_before_the_pool():
    model, h100 = find_in_catalog("llama-3.1-70b"), find_gpu("h100-sxm")
    engine = resolve_engine("trtllm", "1.2.0", [])
    req = Request(context=32768)
    one = engine.plan(model, h100, Deployment(tp=8), req)
    spread = engine.plan(model, h100, Deployment(tp=8, node_gpus=4), req)  # the same tp 8 over two nodes of 4
    assert one.overhead_bytes_per_gpu - spread.overhead_bytes_per_gpu == 2_149_580_800
    # kv = (total - weights - overhead) x 0.9, so the pool is 0.9 x the workspace smaller on one node
    assert abs((spread.kv_memory_bytes_per_gpu - one.kv_memory_bytes_per_gpu) - 0.9 * 2_149_580_800) < 2


def _dp_bytes(name, version, node=8):
    """The workspace a rank of `name` books at tp 1 x dp 8 (attention DP, ep 8) on nodes of `node` H200s."""
    model, h200 = find_in_catalog(name), find_gpu("h200")
    engine = resolve_engine("trtllm", version, [])
    dep = Deployment(tp=1, dp=8, ep=8, node_gpus=node)
    return engine.settings(model, h200, dep, Request(context=8192)).allreduce_bytes


def test_attention_dp_before_9542_opens_the_whole_groups_workspace():
    # DeepSeek-V3 at tp 1 x dp 8 (tensor_parallel_size 8, enable_attention_dp) on one 8-GPU node: every decoder layer
    # builds AllReduce(mapping=model_config.mapping) with the model's Mapping, tp_size 8 (modeling_deepseekv3.py
    # @a43cf9e3), so get_allreduce_workspace opens one workspace over all 8 ranks. 0.20.0 (size 8,000,000 at tp > 2):
    # 64,000,000 B -> 31 pages (65,011,712) + one 2 MiB page + 192,000,000 B -> 92 pages (192,937,984) = 260,046,848 B
    assert _dp_bytes("deepseek-v3", "0.20.0") == 65_011_712 + 2_097_152 + 192_937_984 == 260_046_848
    # 1.1.0 (the 64 MiB form booked from 1.1.0): 8 x 64 MiB = 512 MiB + 2 MiB + 1,536 MiB = 2,050 MiB
    assert _dp_bytes("deepseek-v3", "1.1.0") == 2_050 * MIB
    # the same group over nodes of 4 GPUs: tp_size 8 > gpus_per_node 4, IpcMemory opens nothing
    assert _dp_bytes("deepseek-v3", "0.20.0", node=4) == 0


def test_attention_dp_from_9542_opens_none_for_deepseek_v3():
    # 1.2.0 (TensorRT-LLM#9542): `if not self.enable_attention_dp and self.mapping.tp_size > 1` guards every
    # AllReduce DeepSeek-V3 builds; the embedding and LM head take no model Mapping: nothing over tp 8 is left
    assert _dp_bytes("deepseek-v3", "1.2.0") == 0
    # without attention DP, tp 8 still opens 2,050 MiB a rank (the hand sum above)
    engine, model = resolve_engine("trtllm", "1.2.0", []), find_in_catalog("deepseek-v3")
    assert engine.settings(model, find_gpu("h200"), Deployment(tp=8), Request(context=8192)).allreduce_bytes \
        == 2_050 * MIB


def test_attention_dp_on_a_class_not_read_books_the_group_and_says_so():
    from kvplan import api
    # Qwen3-MoE at 1.2.0: whether #9542 skips its modules was not read; the form before it (Qwen3MoE's
    # AllReduce(mapping=model_config.mapping)) opens the whole group's 2,050 MiB, booked and said
    assert _dp_bytes("qwen3-30b-a3b", "1.2.0") == 2_050 * MIB
    said = [str(w) for w in api.plan("qwen3-30b-a3b", "h200", tp=1, dp=8, ep=8, engine="trtllm",
                                     engine_version="1.2.0", context=8192).warnings]
    assert any("Qwen3MoeForCausalLM it was not read" in w and "2,050 MiB a rank" in w for w in said)
    said = [str(w) for w in api.plan("deepseek-v3", "h200", tp=1, dp=8, ep=8, engine="trtllm",
                                     engine_version="1.2.0", context=8192).warnings]
    assert not any("all-reduce workspace" in w for w in said)


def test_the_size_by_release_and_11s_unread_size_said():
    from kvplan import api
    # 67,108,864 B from 1.2.0 (TensorRT-LLM#9145: main cut 1.2.0rc2 before it and 1.2.0rc8 after); 1.0.0 the plugin.py
    # form, 8,000,000 B above tp 2 and 16,000,000 B at tp <= 2; 1.1.x not read, booked as 1.2.0 (the safe side)
    assert workspace_size(8, "1.2.0") == workspace_size(8, "1.1.0") == workspace_size(8, "1.1.0rc3") == 67_108_864
    assert workspace_size(8, "1.0.0") == 8_000_000 and workspace_size(2, "1.0.0") == 16_000_000
    # tp 8 on one node at 1.1.0: 2,050 MiB booked (the hand sum above); the 8 MB form would be 260,046,848 B = 248 MiB
    said = [str(w) for w in api.plan("llama-3.1-70b", "h100-sxm", tp=8, engine="trtllm", engine_version="1.1.0",
                                     context=8192).warnings]
    assert any("2,050 MiB a rank booked, 248 MiB with the 8 MB form" in w for w in said)
    said = [str(w) for w in api.plan("llama-3.1-70b", "h100-sxm", tp=8, engine="trtllm", engine_version="1.2.0",
                                     context=8192).warnings]
    assert not any("all-reduce workspace" in w for w in said)


def _tp1_bytes(name, version, gpu="h200", pp=1):
    """The workspace a rank of `name` books at tp 1 (no attention DP) with `pp` stages."""
    engine = resolve_engine("trtllm", version, [])
    return engine.settings(find_in_catalog(name), find_gpu(gpu), Deployment(tp=1, pp=pp),
                           Request(context=8192)).allreduce_bytes


def test_moe_allreduce_opens_a_workspace_of_one_rank_at_tp_1():
    # MoEAllReduce.__init__ calls get_allreduce_workspace(mapping) with no tp test (ops.py, every code-index form),
    # and Qwen3MoEDecoderLayer builds it with none before TensorRT-LLM#9542: at tp 1 a group of one, size x 1, 256 and
    # 3 x size B, each in 2 MiB pages. 1.0.0 (size 16,000,000 at tp <= 2): 16,000,000 -> 8 pages (16,777,216) +
    # 2,097,152 + 48,000,000 -> 23 pages (48,234,496) = 67,108,864 B (64 MiB)
    assert _tp1_bytes("qwen3-30b-a3b", "1.0.0") == 16_777_216 + 2_097_152 + 48_234_496 == 67_108_864
    # 1.2.0 (67,108,864 B): 64 MiB + 2 MiB + 192 MiB = 258 MiB; the later guarded form is not dated, so booked
    assert _tp1_bytes("qwen3-30b-a3b", "1.2.0") == 258 * MIB == 270_532_608
    # AllReduce alone asks only `if self.mapping.tp_size > 1`: a dense model and gpt-oss (no MoEAllReduce) open none
    assert _tp1_bytes("llama-3.1-8b", "1.2.0") == 0
    assert _tp1_bytes("gpt-oss-120b", "1.0.0") == 0
    # DeepSeek-V3 from #9542 guards it (`if not self.enable_attention_dp and self.mapping.tp_size > 1`): none at tp 1
    # over 8 stages; before it every stage's rank opens the 64 MiB of 1.0.0's tp-1 size
    assert _tp1_bytes("deepseek-v3", "1.2.0", pp=8) == 0
    assert _tp1_bytes("deepseek-v3", "1.0.0", pp=8) == 67_108_864


def test_the_tp_1_workspace_is_said():
    from kvplan import api
    said = [str(w) for w in api.plan("qwen3-30b-a3b", "h200", engine="trtllm", engine_version="1.2.0",
                                     context=8192).warnings]
    assert any("build MoEAllReduce with no tp test" in w and "258 MiB a rank booked" in w for w in said)
    said = [str(w) for w in api.plan("llama-3.1-8b", "h200", engine="trtllm", engine_version="1.2.0",
                                     context=8192).warnings]
    assert not any("MoEAllReduce" in w for w in said)
