"""llama.cpp's CUDA / HIP graph replay by build: which steps launch every kernel from the host (the `layer` term).

Without a graph, ggml's CUDA/HIP backend launches each node of a step's graph (norms, each matrix-vector product and
its activation quantization, RoPE, the cache copies, attention, the residual adds) from the host, a cost a layer that
does not shrink with the GPU; with one, the step's kernels are captured once and replayed with one launch
(`ggml_backend_cuda_graph_compute`). Which steps replay, by build (ggml-org/ggml syncs ggml-org/llama.cpp's
ggml/src/ggml-cuda; dates are the llama.cpp commits'):

* NVIDIA: CUDA graphs since llama.cpp#6766 (2024-05-08, ggml-org/ggml@e12eff0b src/ggml-cuda.cu:2480; under CUDA 12,
  where the build defines GGML_CUDA_USE_GRAPHS, common.cuh:531, which llama.cpp's does: an option llama.cpp turns on
  since llama.cpp#8140, whisper.cpp#2261), only on compute capability 8.0 and newer (`cc < CC_AMPERE`:
  `disable_due_to_gpu_arch`), Volta and Turing too since llama.cpp#25749
  (2026-07-16, ggml-org/ggml@c621d2c8); not for a node on a split (row-parallel) buffer (:2527), so not at tp > 1;
  not for a step of more than one token (`node->op == GGML_OP_ADD && node->src[1]->ne[1] > 1`: "disable CUDA graphs
  for batch size > 1 for now", :2542) until llama.cpp#19645 (2026-02-17, ggml-org/ggml@23c1635e, which drops that
  ADD check and the MUL_MAT_ID `ne[2] != 1` one below, and keeps the split-buffer one: tp > 1 still launches from
  the host); not for a model with experts (GGML_OP_MUL_MAT_ID, :2534) until llama.cpp#13014 (2025-04-22,
  ggml-org/ggml@658de8ce: `node->ne[2] != 1`, one token replays).
* AMD (HIP): no graph before llama.cpp#11362 (2025-01-29, hipGraph behind GGML_HIP_GRAPHS, off: "experimental,
  slow"), on by default since llama.cpp#22254 (2026-04-23, ggml-org/ggml@dc1b3775 CMakeLists.txt: "its performance
  impact was negative. Due to improvements in rocm ... this is no longer true").

So a llama-bench tg (one token a step) replays on an Ampere-or-newer NVIDIA part from mid-2024 and on AMD only from
2026-04; a pp of micro-batches above one token replays nowhere before 2026-02-17. `graph_tokens` gives a Shape the
most tokens a step replays at (0: none; EVERY: any), and kvplan.speed.terms.features charges the `layer` term only to
the steps above it. Not priced: a build's own flags (GGML_CUDA_DISABLE_GRAPHS, GGML_HIP_GRAPHS on before #22254), a
graph given up after too many updates, and the MoE fallback that still synchronizes the stream
(`ggml_cuda_mul_mat_id_needs_sync`, ggml-org/ggml@d99724f2 src/ggml-cuda/ggml-cuda.cu:1873).
"""

from __future__ import annotations

from kvplan.hardware.facts import vendor_of
from kvplan.speed.ggml import built_since  # a build of `date` (None: the current one) at or past a day

EVERY = 1 << 30  # a graph for a step of any size
CUDA_GRAPHS_SINCE = "2024-05-08"  # llama.cpp#6766: CUDA graphs, compute capability 8.0+
VOLTA_GRAPHS_SINCE = "2026-07-16"  # llama.cpp#25749: Volta and Turing too
MOE_GRAPHS_SINCE = "2025-04-22"  # llama.cpp#13014: a MUL_MAT_ID node of one token replays
BATCH_GRAPHS_SINCE = "2026-02-17"  # llama.cpp#19645: steps of more than one token replay
HIP_GRAPHS_SINCE = "2026-04-23"  # llama.cpp#22254: GGML_HIP_GRAPHS on by default


def graph_tokens(gpu, date: str | None, moe: bool = False, tp: int = 1) -> int:
    """The most tokens a step of a llama.cpp build of `date` (None: the current one) replays from a CUDA / HIP graph on
    `gpu` (module docstring): 0 where none does (another vendor, an NVIDIA part below the build's bound, AMD before
    HIP_GRAPHS_SINCE, tp > 1, a model with experts (`moe`) before MOE_GRAPHS_SINCE), 1 before BATCH_GRAPHS_SINCE,
    EVERY since."""
    vendor = vendor_of(gpu)
    if tp > 1 or (moe and not built_since(date, MOE_GRAPHS_SINCE)):
        return 0
    if vendor == "NVIDIA":
        cc = gpu.capability
        least = (7, 0) if built_since(date, VOLTA_GRAPHS_SINCE) else (8, 0)
        if not cc or cc < least or not built_since(date, CUDA_GRAPHS_SINCE):
            return 0
    elif vendor != "AMD" or not built_since(date, HIP_GRAPHS_SINCE):
        return 0
    return EVERY if built_since(date, BATCH_GRAPHS_SINCE) else 1
