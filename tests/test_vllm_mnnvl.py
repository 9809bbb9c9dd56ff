"""FlashInfer's MNNVL all-reduce fusion workspace as vLLM builds it (kvplan/engines/vllm/mnnvl.py), booked by release.

The buffer (flashinfer 0.6.13 comm/trtllm_mnnvl_ar.py L101-122, L222-247): max(min(1,048,576 // (tp x 2 x H), T) x H
x tp x 2, 2 x ceil(T / tp) x tp x H x 2) for bf16, three of them in one block; T = min(the pass's max size / (H x 2),
max_num_batched_tokens) (vLLM allreduce_rms_fusion.py 0.25.0 L985-990). The block: torch's symmetric memory,
round_up(2 KiB + 3 x buffer, 2 MiB), where vLLM pins FlashInfer 0.6.11.post2-0.6.14 (0.22.x-0.26.x); FlashInfer's
McastGPUBuffer, rounded to the 512 MiB multicast granularity, where it pins 0.6.6 / 0.6.8.post1 (0.19.x-0.21.x) or
0.6.16.post3 on (0.27.0 on). trtllm's workspace beside it: 3 x 512 MiB in these cases (tests/test_vllm_non_torch.py).
"""

from __future__ import annotations

from kvplan.engines.vllm.mnnvl import buffer_bytes
from kvplan.engines.vllm.non_torch import fi_allreduce_workspace
from kvplan.hardware.gpus import find_gpu

MIB = 2**20
H100, GB200 = find_gpu("h100-sxm"), find_gpu("gb200")


def ws(version, tp, hidden, gpu=H100, node=8):
    return fi_allreduce_workspace(version, tp, hidden, 2, 8192, gpu=gpu, node=node)


def test_one_node_llama_8b_at_tp_2_by_release():
    # H 4096, H100 (SM90) tp 2: 64 MiB -> T = min(64 MiB / (4096 x 2), 8192) = 8192; one-shot min(1,048,576 //
    # (2 x 2 x 4096) = 64, 8192) x 4096 x 2 x 2 = 1 MiB; two-shot 2 x 4096 x 2 x 4096 x 2 = 128 MiB; 3 x 128 = 384 MiB
    assert buffer_bytes(2, 8192, 4096, 2) == 128 * MIB
    assert ws((0, 24, 0), 2, 4096) == 1536 * MIB  # trtllm's alone: 3 x 512
    assert ws((0, 25, 0), 2, 4096) == (386 + 1536) * MIB  # MNNVL (torch: 384 MiB + 2 KiB -> 386) + the quant trtllm
    assert ws((0, 26, 0), 2, 4096) == 386 * MIB  # the quant slot shares the MNNVL block
    assert ws((0, 27, 0), 2, 4096) == 512 * MIB  # FlashInfer 0.6.16.post3: one SymmDeviceMemory at 512 MiB
    assert ws((0, 33, 0), 2, 4096) == 512 * MIB


def test_one_node_llama_70b_at_tp_8():
    # H 8192, H100 tp 8: 0.5 MiB -> T = 32; one-shot min(1 MiB // (8 x 2 x 8192) = 8, 32) x 8192 x 8 x 2 = 1 MiB;
    # two-shot 2 x ceil(32 / 8) x 8 x 8192 x 2 = 1 MiB; 3 x 1 MiB = 3 MiB + 2 KiB -> 4 MiB (torch, 0.26.0)
    assert ws((0, 26, 0), 8, 8192) == 4 * MIB == 4_194_304
    assert ws((0, 25, 0), 8, 8192) == (4 + 1536) * MIB
    assert ws((0, 26, 0), 8, 8192, find_gpu("h100-pcie")) == 0  # no NVSwitch multicast: no workspace


def test_over_gb200_trays_by_release():
    # GB200 (SM100) tp 8 over trays of 4, H 8192: 1 MiB -> T = 64; one-shot 8 x 8192 x 8 x 2 = 1 MiB; two-shot
    # 2 x 8 x 8 x 8192 x 2 = 2 MiB; 3 x 2 = 6 MiB. 0.19.0 (FlashInfer 0.6.6, McastGPUBuffer): 6 MiB + 2 KiB -> 8 MiB
    # -> 512 MiB; 0.22.0 (0.6.11.post2, torch): 8 MiB; on one tray-less node of 8, 0.19.0 keeps trtllm's 3 x 512
    assert ws((0, 19, 0), 8, 8192, GB200, node=4) == 512 * MIB
    assert ws((0, 22, 0), 8, 8192, GB200, node=4) == 8 * MIB
    assert ws((0, 19, 0), 8, 8192, GB200, node=8) == 1536 * MIB
    assert ws((0, 18, 0), 8, 8192, GB200, node=4) == 1536 * MIB  # before 0.19.0 `auto` was trtllm over nodes too


def test_tp_16_takes_the_tables_multi_node_entry_from_0_25_0():
    # FI_ALLREDUCE_FUSION_MAX_SIZE_MB[100][16] = 64 (0.25.0 allreduce_rms_fusion.py L96-101; no tp 16 before: none)
    # T = min(64 MiB / (8192 x 2), 8192) = 4096; one-shot min(1 MiB // (16 x 2 x 8192) = 4, 4096) x 8192 x 16 x 2 =
    # 1 MiB; two-shot 2 x 256 x 16 x 8192 x 2 = 128 MiB; 3 x 128 = 384 MiB + 2 KiB -> 386 MiB (torch, 0.25.0; over
    # nodes the quant slot is empty, 0.25.0 L200-205)
    assert ws((0, 24, 0), 16, 8192, GB200, node=4) == 0
    assert ws((0, 25, 0), 16, 8192, GB200, node=4) == 386 * MIB


def test_the_fusion_tables_sm103_tp_8_row_and_sm107_row_by_release():
    # vLLM's FI_ALLREDUCE_FUSION_MAX_SIZE_MB (PyPI sdists, compilation/passes/fusion/allreduce_rms_fusion.py L104-127):
    # 103: {8: 2} in 0.25.0-0.28.0, {8: 4} from 0.29.0 (0.33.0 L119 "8: 4,  # 4MB"); a 107 row {2: 64, 4: 64, 8: 2}
    # from 0.27.0 (none in 0.26.0)
    from kvplan.engines.vllm.non_torch import fusion_max_mib
    assert fusion_max_mib((0, 28, 0), 103, 8) == 2 and fusion_max_mib((0, 29, 0), 103, 8) == 4
    assert fusion_max_mib((0, 33, 0), 103, 4) == 64 and fusion_max_mib((0, 33, 0), 100, 8) == 1
    assert fusion_max_mib((0, 26, 0), 107, 8) is None and fusion_max_mib((0, 27, 0), 107, 8) == 2
    assert fusion_max_mib((0, 33, 0), 107, 16) is None  # no multi-node entry in the 107 row


def test_b300_tp_8_at_4_mib_still_one_512_mib_block():
    # B300 (SM103) tp 8, H 8192 bf16, 0.29.0: T = 4 MiB / (8192 x 2) = 256; one-shot min(1 MiB // (8 x 2 x 8192) = 8,
    # 256) x 8192 x 8 x 2 = 1 MiB; two-shot 2 x ceil(256 / 8) x 8 x 8192 x 2 = 8 MiB; 3 x 8 = 24 MiB (+ 2 KiB) -> one
    # 512 MiB multicast block, as 0.28.0's 2 MiB row gave (T 128: 3 x 4 = 12 MiB -> 512): the row moves T, not bytes
    assert buffer_bytes(8, 256, 8192, 2) == 8 * MIB and buffer_bytes(8, 128, 8192, 2) == 4 * MIB
    b300 = find_gpu("b300")
    assert ws((0, 29, 0), 8, 8192, b300) == ws((0, 28, 0), 8, 8192, b300) == 512 * MIB
