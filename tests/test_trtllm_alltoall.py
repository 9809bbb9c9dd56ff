"""TensorRT-LLM's MoE all-to-all under attention DP (kvplan.engines.trtllm.alltoall): where the default selection picks
the MNNVL method, 1.1.x books the comm workspace's fused form, 1.0.x and before the fixed form and 1.2.x the fused
form as floors, and the warning says which.

Source (the module docstring): `select_alltoall_method_type` returns NotEnabled unless attention DP, tp_size > 1 and
`mapping.moe_ep_size > top_k`; then MNNVL where `MnnvlMemory.supports_mnnvl()` (every NVLink link up).
"""

from __future__ import annotations

import dataclasses

from kvplan import api
from kvplan.engines.trtllm.alltoall import selects_alltoall
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import find_in_catalog


def test_ep_above_top_k_on_nvlink_selects_it():
    h200, oss, dsv3 = find_gpu("h200"), find_in_catalog("gpt-oss-120b"), find_in_catalog("deepseek-v3")
    # gpt-oss-120b: top-k 4, ep 8 > 4 under attention DP on an HGX board (NVSwitch): MNNVL
    assert selects_alltoall(oss, h200, Deployment(tp=1, dp=8, ep=8))
    # DeepSeek-V3: top-k 8, ep 8 > 8 fails: NotEnabled
    assert not selects_alltoall(dsv3, h200, Deployment(tp=1, dp=8, ep=8))
    # without attention DP, or ep 1 (the experts split by width: moe_ep_size 1), none
    assert not selects_alltoall(oss, h200, Deployment(tp=8, ep=8))
    assert not selects_alltoall(oss, h200, Deployment(tp=1, dp=8))


def _warnings(name, version="1.2.0"):
    """The warnings of `name` planned at tp 1 x dp 8, ep 8 on H200s with TensorRT-LLM `version`."""
    return [str(w) for w in api.plan(name, "h200", tp=1, dp=8, ep=8, engine="trtllm", engine_version=version,
                                     context=8192).warnings]


def test_the_plan_says_what_it_booked():
    assert any("MoE all-to-all" in w and "booked as a floor" in w for w in _warnings("gpt-oss-120b"))
    assert not any("MoE all-to-all" in w for w in _warnings("deepseek-v3"))


def test_a_pcie_nvl_pair_is_said_to_be_uncertain():
    # supports_mnnvl (_mnnvl_utils.py): every NVLink link up in every form, and a later form refuses PCIe NVL SKUs
    # (the module docstring): on an NVLink-bridged card the selection holds only in the earlier forms, and the note
    # says so; on an HGX board (NVSwitch) it says MNNVL plainly
    from kvplan.engines.trtllm.alltoall import note
    oss, dep = find_in_catalog("gpt-oss-120b"), Deployment(tp=1, dp=8, ep=8)
    bridged, board = note(oss, find_gpu("h100-nvl"), dep), note(oss, find_gpu("h200"), dep)
    assert "unless the release's supports_mnnvl refuses PCIe NVL cards" in bridged
    assert "the MNNVL method)" in board and "unless" not in board
    assert note(oss, find_gpu("l40s"), dep) is None  # PCIe only: no NVLink links to be up


def test_the_comm_workspace_by_form_from_the_cpp_source():
    # moeCommKernels.h (NVIDIA@0cfd1aa9): RECV_FIFO_DEPTH 8 x RECV_FIFO_ENTRY_BYTES 256 KiB = 2,097,152 B a FIFO,
    # CHANNEL_COUNT 8, one ALIGN_256 MoeCommFifoConnInfo (256 B) beside each: at ep 8, 8 x 8 x (2,097,152 + 256)
    # = 64 x 2,097,408 = 134,234,112 B
    from kvplan.engines.trtllm.alltoall import channels, workspace_bytes
    assert workspace_bytes("fixed", 8, 132) == 134_234_112
    # computeMoeCommChannelCount on 132 SMs at ep 8: blocks a channel 2 x ceil(8 / 8) = 2; 132 / 2 / 2 = 33; at ep 16:
    # 2 x 2 = 4, 132 / 2 / 4 = 16 (int division); on 2 SMs, 2 / 2 / 2 = 0 -> at least 1
    assert channels(8, 132) == 33 and channels(16, 132) == 16 and channels(8, 2) == 1
    # the SM form (zongfeijing@5c3df8db): 8 x 33 x 2,097,408 = 553,715,712 B; the fused form (fusedMoeCommKernels.h,
    # NVIDIA@0272643a): FIFO_DEPTH 4 x 256 KiB = 1,048,576 B plus two 256 B infos: 8 x 33 x 1,049,088 = 276,959,232 B
    assert workspace_bytes("by SM", 8, 132) == 553_715_712
    assert workspace_bytes("fused", 8, 132) == 276_959_232
    # a B200's 148 SMs (profile): 148 / 2 / 2 = 37 channels; the fused form 8 x 37 x 1,049,088 = 310,530,048 B
    assert workspace_bytes("fused", 8, find_gpu("b200").sm_count) == 310_530_048


def test_the_note_gives_the_lines_own_forms():
    # 1.2.0: the fused form as a floor, 276,959,232 B on an H200 (132 SMs), the one-sided backend named, not priced;
    # 1.0.0: the fixed form, 134,234,112 B, the by-SM form (553,715,712 B = 528.06 MiB -> "528") a fork's, not booked
    newer = [w for w in _warnings("gpt-oss-120b") if "MoE all-to-all" in w]
    assert len(newer) == 1 and "276,959,232 B" in newer[0] and "one-sided MoeAlltoAll" in newer[0]
    older = [w for w in _warnings("gpt-oss-120b", "1.0.0") if "MoE all-to-all" in w]
    assert len(older) == 1 and "134,234,112 B" in older[0] and "528 MiB, is a contributor fork's commit" in older[0]


def test_1_1_books_the_fused_form():
    # #6973 on main 2025-08-24, before the 1.1.0rc2 bump (2025-08-31) and the 1.2.0rc0 bump (2025-09-29): 1.1.x
    # carries fusedMoeCommKernels.h; at ep 8 on an H200 (132 SMs, 33 channels) 8 x 33 x (1,048,576 + 2 x 256)
    # = 276,959,232 B a rank, added to the overhead the pool is cut by; 1.2.0 the same as its floor; 1.0.0 the fixed
    # form's floor (moeCommKernels.h): 8 x 8 x (8 x 262,144 + 256) = 64 x 2,097,408 = 134,234,112 B
    from kvplan.engines import resolve_engine
    from kvplan.planning.plan import Request
    oss, h200, dep = find_in_catalog("gpt-oss-120b"), find_gpu("h200"), Deployment(tp=1, dp=8, ep=8)
    for version, booked in (("1.0.0", 134_234_112), ("0.20.0", 134_234_112), ("1.1.0", 276_959_232),
                            ("1.2.0", 276_959_232)):
        engine = resolve_engine("trtllm", version, [])
        st = engine.settings(oss, h200, dep, Request(context=8192))
        assert st.alltoall_bytes == booked
        bare = engine.overhead_estimate(oss, dep, dataclasses.replace(st, alltoall_bytes=0))
        assert engine.overhead_estimate(oss, dep, st) - bare == booked
    assert any("276,959,232 B" in w and "prepare workspace" in w for w in _warnings("gpt-oss-120b", "1.1.0"))
    # DeepSeek-V3 (top-k 8) at ep 8 selects none: nothing booked on 1.1.0 either
    assert resolve_engine("trtllm", "1.1.0", []).settings(find_in_catalog("deepseek-v3"), h200, dep,
                                                   Request(context=8192)).alltoall_bytes == 0
