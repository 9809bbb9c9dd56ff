"""SGLang's NCCL memory on an NVSwitch domain: what its distributed set-up holds before the weights beyond the PCIe
figure.

What the figure is. `ModelRunner.init_torch_distributed` (0.4.9.post2 `model_executor/model_runner.py` L478-573, read
from the PyPI wheel 2026-12-03) reads `before_avail_memory` (cudaMemGetInfo, after `set_device`: the CUDA context is
already out of it), builds `init_distributed_environment` (torch's NCCL process group), `initialize_model_parallel`
(each GroupCoordinator's pynccl communicator, whose constructor runs a warm-up all-reduce, and the custom all-reduce:
kvplan.engines.sglang.allreduce) and `initialize_dp_attention`, then logs "Init torch distributed ends. mem usage=X GB"
= before_avail_memory - free memory now, in GiB (`utils.get_available_gpu_memory`: free / 2^30). It returns the
*minimum* free memory over the ranks (`distributed=True`, an all-reduce MIN), and that minimum is the
`free_before_weights` the pool's budget counts from: the busiest rank's figure is the one that costs the pool.
NCCL's NVLS and cuMem are off unless asked (0.4.9.post2 `entrypoints/engine.py` L623-624; 0.5.2 L652-654).

What the logs measured (NVIDIA, one node, no DP attention; "GB" = GiB as SGLang prints it):

  fabric     GPUs, tp   SGLang / NCCL            figure (per rank)        source (date)                        split
  PCIe       4x L4, 4   0.4.3.post4 / -          0.13 (all four)          didier-durand/llms-in-clouds          train
                                                                          docs/sglang.md (2025-03-08)
  PCIe       2x 4090, 2 dev 2026-04 / 2.27.5     0.19 (both; custom       a notes repo, Exp-001 Qwen3.5-9B      train
                                                 all-reduce failed: no P2P) (2026-04-14)
  PCIe       4x sm_120, 4  - / -                 0.39                     sgl-project/sglang#40558 (2026-09-21) held-out
  NVSwitch   8x H100 HGX, 8  0.5.2rc2 / 2.27.3   1.25 (TP0, the only      Shivank Chaudhary, "Grok2 OnPrem      train
                                                 rank printed)            Deployment via sglang" (2025-09-14)
  NVSwitch   8x H200-class, 8  - / -             1.77..2.01 (TP0 1.96,    sgl-project/sglang#11716 (2025-10-16) train
                                                 six ranks 2.01)

The NVSwitch figures are 10-15x the PCIe ones. SGLang allocates little of it itself (the custom all-reduce's 38 MiB);
the rest is NCCL's, whose buffers are per channel and per ring/tree neighbour (SIMPLE: NCCL_BUFFSIZE, default 4 MiB;
LL128: 120 elements x 640 threads x 8 steps x 8 B = 4.69 MiB; LL: 8 lines x 512 threads x 8 steps x 16 B = 0.5 MiB;
NVIDIA/nccl src/include/device.h: NCCL_LL128_ELEMS_PER_THREAD, NCCL_LL128_MAX_NTHREADS, NCCL_LL_LINES_PER_THREAD,
NCCL_LL_MAX_NTHREADS, NCCL_STEPS), about 9.2 MiB a connection, and whose channel count NCCL's topology search sets from
the links' bandwidth: a few channels over PCIe, up to 32 over NVSwitch (32 x 9.2 MiB = 0.29 GiB per neighbour). kvplan
does not replay that search; it books what the logs measured.

The term. kvplan's memory before the weights at tp > 1 is INIT_BYTES_MULTI (409 MiB on the L4s: the CUDA context and
the PCIe figure 0.13 GiB) plus the custom all-reduce where it runs. Where the tp group sits inside one NVSwitch domain
(the profile's `interconnect.kind` and `domain`), this module adds the NVSwitch figure less that PCIe figure and less
the custom all-reduce already booked: the mean over the two training sources of the busiest rank each printed,
(1.25 + 2.01) / 2 = 1.63 GiB = 1669 MiB, less 133 MiB (0.13 GiB) and 38 MiB = 1498 MiB. The choice (the mean of the
training sources, not the larger or smaller) was made on the training logs; the held-out log (#40558) is PCIe and
does not test it.

Limits, said plainly: both NVSwitch logs are tp 8 on Hopper at SGLang 0.5.x; kvplan applies the term at every tp > 1
inside an NVSwitch domain and every release (NVLS and cuMem are off in each release kvplan models, so the same
ring/tree buffers are what is left), untested at tp 2/4, on Blackwell or on 0.4.x. The two sources differ by
0.76 GiB (+-23% of the mean); one prints only rank 0, which in #11716 was a quieter rank (1.96 against 2.01). The
PCIe figure is one log's (0.13 GiB on L4s); the held-out PCIe log prints 0.39 GiB and a later 2-GPU one 0.19 GiB, so
the PCIe figure may be low on newer releases: not changed here (kvplan's L4 record is exact with it).
"""

from __future__ import annotations

from kvplan.engines.sglang.allreduce import in_nvswitch_domain, instance_bytes

MIB = 2**20
NVSWITCH_FIGURE_MIB = (1280, 2058)  # 1.25 and 2.01 GiB: the busiest printed rank of each training source
PCIE_FIGURE_MIB = 133  # 0.13 GiB: the L4 log's figure, inside INIT_BYTES_MULTI already
# less the custom all-reduce's buffers, booked by kvplan.engines.sglang.allreduce (38 MiB)
NVSWITCH_EXTRA = (sum(NVSWITCH_FIGURE_MIB) // len(NVSWITCH_FIGURE_MIB) - PCIE_FIGURE_MIB) * MIB - instance_bytes()


def nccl_extra_bytes(gpu, tp_size: int) -> int:
    """Bytes per rank NCCL holds before the weights beyond the PCIe figure kvplan books at every tp > 1."""
    return NVSWITCH_EXTRA if in_nvswitch_domain(gpu, tp_size) else 0
