"""SGLang's NCCL memory inside an NVSwitch domain (kvplan/engines/sglang/ncclmem.py), by hand from the cited logs.

What the figure is: sglang 0.4.9.post2 wheel (PyPI, read 2026-12-03) `srt/model_executor/model_runner.py` L500
(`before_avail_memory`, after `set_device`) and L557-573 ("Init torch distributed ends. mem usage=" = before minus
free now, `utils.py` L424: free / 2^30, so "GB" is GiB); L547-551: the minimum free memory over the ranks is what the
pool's budget counts from. Logs (training split by source hash, benchmarks/budget_corpus.py's rule):
  * https://github.com/sgl-project/sglang/pull/11716 (2025-10-16), tp 8, 8 ranks:
    "[2025-10-16 09:06:09 TP6] Init torch distributed ends. mem usage=2.01 GB" (six ranks 2.01, TP0 1.96, TP7 1.77);
    "[2025-10-16 09:06:10 TP5] Load weight begin. avail mem=137.29 GB".
  * Shivank Chaudhary, "Grok2 OnPrem Deployment via sglang" (published 2025-09-14; log of 2025-09-11), 8x
    NVIDIA_H100_80GB_HBM3 on an HGX node, lmsysorg/sglang:v0.5.2rc2-cu126, "sglang is using nccl==2.27.3", --tp 8:
    "[2025-09-11 10:24:23 TP0] Init torch distributed ends. mem usage=1.25 GB";
    "[2025-09-11 10:24:24 TP0] Load weight begin. avail mem=77.43 GB".
  * https://github.com/didier-durand/llms-in-clouds docs/sglang.md (2025-03-08), 4x L4 (PCIe), 0.4.3.post4, tp 4:
    "[2025-03-08 12:29:13 TP0] Init torch distributed ends. mem usage=0.13 GB" (all four ranks).
"""

from __future__ import annotations

import dataclasses

from kvplan.engines.sglang import ncclmem
from kvplan.hardware.gpus import find_gpu

MIB = 2**20
GIB = 2**30
H100 = find_gpu("h100-sxm")  # interconnect.kind nvswitch, domain 8


def test_the_term_by_hand():
    # busiest printed rank per training source: 1.25 GiB = 1280 MiB (Grok-2, TP0), 2.01 GiB = 2058.24 -> 2058 MiB
    # (#11716)
    assert ncclmem.NVSWITCH_FIGURE_MIB == (round(1.25 * 1024), round(2.01 * 1024)) == (1280, 2058)
    # mean (1280 + 2058) / 2 = 1669 MiB, less the PCIe figure already in INIT_BYTES_MULTI (0.13 GiB = 133.12 -> 133 MiB)
    # and the custom all-reduce booked by allreduce.py (38 MiB): 1669 - 133 - 38 = 1498 MiB = 1,570,766,848 B
    assert ncclmem.NVSWITCH_EXTRA == 1498 * MIB == 1_570_766_848


def test_where_it_applies():
    assert ncclmem.nccl_extra_bytes(H100, 8) == 1498 * MIB
    assert ncclmem.nccl_extra_bytes(H100, 4) == 1498 * MIB  # inside the 8-GPU domain (only tp 8 was measured)
    assert ncclmem.nccl_extra_bytes(H100, 1) == 0  # no communicator
    assert ncclmem.nccl_extra_bytes(H100, 16) == 0  # past the domain: not measured, not booked
    assert ncclmem.nccl_extra_bytes(find_gpu("l4"), 4) == 0  # PCIe: the figure INIT_BYTES_MULTI already holds
    assert ncclmem.nccl_extra_bytes(find_gpu("h100-nvl"), 2) == 0  # NVLink-bridged pairs: no log
    assert ncclmem.nccl_extra_bytes(dataclasses.replace(H100, interconnect_kind=None), 8) == 0
    assert ncclmem.nccl_extra_bytes(find_gpu("mi300x"), 8) == 0  # not NVIDIA


def test_the_grok_log_checks_out():
    # H100 torch total 79.18 GiB (the profile's memory_usable_bytes); free before the weights 77.43 GiB, so SGLang held
    # 79.18 - 77.43 = 1.75 GiB before them, of which 1.25 in the distributed set-up and 0.50 before it (the context).
    # kvplan books at tp 8 on this profile: 409 + 38 + 1498 = 1945 MiB = 1.90 GiB, 0.15 GiB above that one log (it
    # prints rank 0 only, the quieter rank in #11716), and 0.61 GiB below #11716's 2.51 if that card is an H200 SXM.
    booked = 409 * MIB + 38 * MIB + ncclmem.nccl_extra_bytes(H100, 8)
    held = H100.memory_usable_bytes - round(77.43 * GIB)
    assert abs(held / GIB - 1.75) < 0.01
    assert 0 < (booked - held) / GIB < 0.2
