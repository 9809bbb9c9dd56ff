"""vLLM's Marlin drops a symmetric 4-bit GPTQ linear's zero points and g_idx after its repack: checkpoint bytes that
"Model loading took" and the KV budget no longer see.

Read in the wheels (vllm/model_executor/layers/quantization/):
* 0.5.2-0.6.1 `gptq_marlin.py` GPTQMarlinLinearMethod.process_weights_after_loading (0.5.2 L266-280, 0.6.1 L304-305):
  without act-order `layer.g_idx = marlin_make_empty_g_idx(device)`, the checkpoint's g_idx (int32 [K]) replaced by
  an empty tensor; `layer.zp` is a new empty tensor, `qzeros` stays. 0.5.0 and 0.5.1 repack lazily at the first
  forward (`marlin_state`, 0.5.1 L372-390), after "Model loading took": nothing freed there.
* From 0.6.2 the linear goes through MarlinLinearKernel (`kernels/marlin.py` 0.6.2 L49-87; `kernels/mixed_precision/
  marlin.py` 0.11.0 L96-111; `model_executor/kernels/linear/mixed_precision/marlin.py` 0.25.0 L179-209, 0.33.0 L172),
  given `w_zp_param_name="qzeros"` and `zero_points=False` for GPTQ (gptq_marlin.py 0.11.0 L309-311, L410; from 0.22.0
  AutoGPTQ, auto_gptq.py 0.22.0 L346 and L447, 0.33.0 L346 and L435): `setattr(layer, self.w_zp_name, empty)` drops
  qzeros (int32 [K / g, N / 8]: K x N / (2 g) B, 1/g of the int4 weights, 0.78% at g 128) and, without act-order,
  g_idx the same way. From 0.30.0 g_idx is not loaded at all (kvplan.engines.vllm.gptq_order).
* "Model loading took" is read after the loader's process_weights_after_loading (0.11.0 `model_loader/base_loader.py`
  L51, `v1/worker/gpu_model_runner.py` L2631-2653) as torch's allocated bytes after `empty_cache` and a peak reset
  (`platforms/cuda.py` L206-211), and the KV budget subtracts that figure; so neither counts the dropped tensors.
  Each was one allocator block, rounded up to 512 B.
Counted: a rank's qkv, o, gate_up and down shards (kvplan.engines.marlin_shapes; a role whose shapes the counts do not
give is not counted) on NVIDIA from compute capability 8.0 (Marlin's minimum through 0.23: 80), where Marlin takes the
shard: before 0.24.0 only one that fits a thread tile (the strict shape check; another falls back to a kernel that
keeps qzeros), from 0.24.0 any unless a group straddles the tensor-parallel cut (kvplan.engines.vllm.marlin_dense_pad).
Not counted, said here: compute capability 9.0 from 0.6.2, where Machete (then Humming from 0.32.0) comes ahead of
Marlin and keeps qzeros (`kernels/machete.py` transforms zero points only where the layer has them); 7.5 (Marlin from
0.24.0 only); 8-bit GPTQ (AllSpark ahead of Marlin on 8.x); the MoE experts (GPTQMarlinMoEMethod keeps its qzeros and
empties only g_idx). In each kvplan counts the checkpoint's bytes, the larger side.
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.engines.marlin_shapes import marlin_group, marlin_groups, rank_layer_shards
from kvplan.engines.vllm import gptq_order
from kvplan.engines.vllm.marlin_dense_pad import PADS_FROM, padded_nk
from kvplan.engines.vllm.mxfp4 import nvidia_capability
from kvplan.planning.deploy import split_layers

G_IDX_FROM = (0, 5, 2)  # process_weights_after_loading empties g_idx (0.5.0-0.5.1: repacked at the first forward)
QZEROS_FROM = (0, 6, 2)  # MarlinLinearKernel empties qzeros
MARLIN_CC = (8, 0)
MACHETE_CC = (9, 0)  # Machete, then Humming, ahead of Marlin from QZEROS_FROM
BLOCK = 512  # the caching allocator's smallest block


def _applies(model, v: tuple, cap) -> bool:
    """A symmetric 4-bit GPTQ checkpoint without act-order whose dense linears Marlin repacks at `v` on `cap`."""
    q = model.quantization
    return (q.quant_method == "gptq" and q.method == "int4" and not q.asym and not q.act_order and marlin_groups(q)
            and v >= G_IDX_FROM and cap is not None and cap >= MARLIN_CC
            and not (cap == MACHETE_CC and v >= QZEROS_FROM))


def shard_bytes(n: int, k: int, full_k: int, group: int, v: tuple) -> int:
    """Bytes one rank's shard of N outputs and K inputs (of `full_k`) drops at `v`; 0 where Marlin does not take it."""
    if group > 0 and group < full_k and k % group:
        return 0  # a group cut by tp: not Marlin
    if v < PADS_FROM and padded_nk(n, k, group) != (n, k):
        return 0  # the strict shape check: not Marlin before the padding
    rows = k // group if group > 0 else 1
    qzeros = round_up(rows * n // 2, BLOCK) if v >= QZEROS_FROM else 0  # int32 [rows, N / 8]
    g_idx = round_up(4 * k, BLOCK) if v < gptq_order.FROM else 0  # int32 [K]
    return qzeros + g_idx


def freed_bytes(model, dep, v: tuple, gpu) -> int:
    """Bytes per GPU of the stage that drops the fewest (module docstring); 0 where the rule does not apply."""
    cap = nvidia_capability(gpu)
    if not _applies(model, v, cap):
        return 0
    shards = rank_layer_shards(model, dep.tp)
    if shards is None:
        return 0
    group = marlin_group(model.quantization)
    per_layer = [sum(shard_bytes(x.n, x.k, x.full_k, group, v) for x in layer) for layer in shards[0]]
    return min(sum(per_layer[a:b]) for a, b in split_layers(len(per_layer), dep.pp, dep.stage_layers))
