"""vLLM 0.33.0's unquantized MoE on FlashInfer TRT-LLM (compute capability 10.x) rounds each rank's expert width up to
128 as it allocates the experts (0.33.0 wheel fused_moe/oracle/unquantized.py L385-397, unquantized_fused_moe_method.py
L131-146; the backend first on CUDA, L69-74, behind Triton on Hopper, L78-80; its kernels on 10.x only,
experts/trtllm_bf16_moe.py L95-102). Whether it is picked depends on the routing method, which kvplan does not read:
the bytes are said in a note, not counted (kvplan.engines.vllm.moe_padding)."""

from __future__ import annotations

from kvplan import api
from kvplan.engines.vllm import moe_padding
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import find_in_catalog


def _notes(tp: int, gpu: str = "b200", version: str = "0.33.0") -> list[str]:
    p = api.plan("qwen3-30b-a3b", gpu, context=8192, tp=tp, engine="vllm", engine_version=version)
    return [w.message for w in p.warnings if "FlashInfer TRT-LLM" in w.message]


def test_qwen3_30b_a3b_tp4_on_b200_pads_192_to_256():
    # Qwen/Qwen3-30B-A3B config.json: moe_intermediate_size 768, 128 experts, hidden 2048, 48 MoE layers, bf16.
    # tp 4: 768 / 4 = 192 -> 256, 64 zero columns a rank: w13 2 x 64 x 2048 + w2 2048 x 64 = 3 x 131,072 elements
    # x 128 experts x 2 B = 100,663,296 B a layer x 48 = 4,831,838,208 B (4,608 MiB) per GPU
    model = find_in_catalog("qwen3-30b-a3b")
    st = type("St", (), {"v": (0, 33, 0), "gpu": api.gpu("b200")})()
    assert moe_padding.padded_bytes(model, Deployment(tp=4), st) == (192, 256, 4_831_838_208)
    # tp 8: 96 -> 128, 32 columns: half of tp 4's per column count -> 2,415,919,104 B
    assert moe_padding.padded_bytes(model, Deployment(tp=8), st)[2] == 2_415_919_104
    assert len(_notes(4)) == 1 and "192 -> 256" in _notes(4)[0]


def test_no_note_where_nothing_pads_or_another_backend_runs():
    assert not _notes(2)  # 384 = 3 x 128
    assert not _notes(4, "h100")  # Hopper: Triton first
    assert not _notes(4, version="0.30.0")  # another release's selection is not read here
    model = find_in_catalog("qwen3-30b-a3b")
    st = type("St", (), {"v": (0, 33, 0), "gpu": api.gpu("b200")})()
    assert moe_padding.padded_bytes(model, Deployment(tp=4, ep=4), st) == (0, 0, 0)  # experts whole a rank


def test_pipeline_stages_count_their_own_moe_layers():
    # Qwen3-30B-A3B's 48 layers are all MoE: pp 2 stages of 24 each, 24 x 100,663,296 B at tp 4. DeepSeek-V2-Lite
    # (../shared/configs/deepseek-ai__DeepSeek-V2-Lite.json: 27 layers, first_k_dense_replace 1, 64 experts of 1,408,
    # hidden 2,048, bf16) at tp 2 pp 2: 704 -> 768, 64 columns; 64 x 3 x 2,048 x 64 x 2 B = 50,331,648 B a MoE layer.
    # get_pp_indices cuts 27 layers 14 + 13: the first stage 1 dense + 13 MoE, the second 13 MoE: 13 layers' worth.
    st = type("St", (), {"v": (0, 33, 0), "gpu": api.gpu("b200")})()
    assert moe_padding.padded_bytes(find_in_catalog("qwen3-30b-a3b"), Deployment(tp=4, pp=2), st)[2] == 24 * 100_663_296
    lite = find_in_catalog("deepseek-v2-lite")
    assert moe_padding.padded_bytes(lite, Deployment(tp=2, pp=2), st) == (704, 768, 13 * 50_331_648)
