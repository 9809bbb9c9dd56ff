"""SGLang's Marlin path for GPTQ and compressed-tensors WNA16: a rank's shard Marlin's repack cannot take is refused.

Why: unlike vLLM (from 0.24.0, kvplan.engines.vllm.marlin_dense_pad), SGLang neither pads such a shard nor falls back
to another kernel. A `gptq` checkpoint whose bits, sym and group Marlin supports on the device (compute capability
8.0+: `is_gptq_marlin_compatible`, 0.5.23 wheel `layers/quantization/gptq/gptq.py` L459-481; `override_quantization_
method` converts it to gptq_marlin) builds every dense linear with GPTQ Marlin (`get_quant_method`: FusedMoE ->
GPTQMarlinMoEMethod, else GPTQMarlinLinearMethod, 0.5.3 `gptq.py` L362-367, 0.5.23 L440-450), and a 4-bit
compressed-tensors WNA16 checkpoint uses the same Marlin kernel (`compressed_tensors_wNa16.py` 0.5.4 L220-249, 0.5.23
L221-250). At weight prep both call check_marlin_supports_shape and drop its answer (0.5.3 `gptq.py` L692, 0.5.10
L1021, 0.5.23 `hardware_backend/gpu/quantization/gptq_kernels.py` L89-94; wNa16 0.5.23 L221), then repack the shard,
and the repack requires K % 16 and N % 64 ("size_n = ... is not divisible by tile_n_size = 64", 0.5.23 `kernels/jit/
csrc/gemm/marlin/gptq_marlin_repack.cuh` L304-316; sgl-project/sglang#19406, 2026-02-26, Qwen3.5-27B's
compressed-tensors AWQ). So such a shard stops the server while loading: kvplan refuses the plan, naming the linear.

Read: the shapes of kvplan.engines.marlin_shapes (qkv, o, gate_up, down of plain-attention layers, dense MLPs and
shared experts, where the counts give them exactly) and, for GPTQ, the routed experts (GPTQ Marlin MoE repacks each
expert: w13 N = 2 x its width a rank, K = hidden; w2 N = hidden, K = its width). A shard that passes the repack but
not the stricter K % 128 of verify_marlin_supports_shape (Llama-2-7B's down_proj at tp 8, K 1,376) meets the GEMM's
thread configurations, not read here: planned. Only `sym: true` GPTQ runs on Marlin (TYPE_MAP {(4, True), (8, True)},
0.5.23 `gptq.py` L298-301, L473-474): a `sym: false` checkpoint (Quantization.asym) fails is_gptq_marlin_compatible,
so GPTQConfig loads it (L414-429), not GPTQ Marlin, and this refusal does not apply (that kernel's prep not read: the
checkpoint's bytes). From 0.5.3 for GPTQ (before it, vLLM's GPTQ Marlin, not read) and 0.5.4 for compressed-tensors
(the first release with its WNA16 scheme).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.fp8_blocks import exact_expert_width
from kvplan.engines.marlin_shapes import attention_exact, layer_shards, marlin_groups, mlp_widths
from kvplan.engines.versions import parse_version
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.readers.mlp_layout import ffn_kinds

FROM = {"gptq": (0, 5, 3), "compressed-tensors": (0, 5, 4)}  # SGLang's own Marlin path read from these
MARLIN_CC = (8, 0)  # query_marlin_supported_quant_types: none below 80
TILE_N, TILE_K = 64, 16  # gptq_marlin_repack's checks


def _applies(model, gpu, version: str) -> bool:
    """Whether SGLang `version` runs this checkpoint's linears on Marlin on `gpu` (module docstring)."""
    q = model.quantization
    since = FROM.get(q.quant_method)
    bits_ok = q.method == "int4" or (q.method == "int8" and q.quant_method == "gptq")
    cap = capability_of(gpu) if vendor_of(gpu) == "NVIDIA" else None
    return (since is not None and parse_version(version) >= since and bits_ok and marlin_groups(q)
            and cap is not None and cap >= MARLIN_CC and not q.asym)


def _expert_shards(model, dep, moe_tp: int) -> list[tuple[str, int, int]]:
    """GPTQ's routed experts as GPTQ Marlin MoE repacks them on a rank (split over `moe_tp`, SGLang's --tp-size, or
    whole under expert parallelism): (name, N, K) of w13 and w2."""
    p, q = model.params, model.quantization
    width = exact_expert_width(model)
    if q.quant_method != "gptq" or not p.num_experts or not width or q.kept_of("experts") >= p.experts:
        return []
    n = width if dep.ep > 1 else width // moe_tp
    return [("routed experts' w13", 2 * n, model.hidden_size), ("routed experts' w2", model.hidden_size, n)]


def check(model, dep, gpu, version: str, moe_tp: int, dense_tp: int) -> None:
    """A one-line refusal where a rank's GPTQ / WNA16 shard fails gptq_marlin_repack's K % 16 or N % 64 in SGLang
    `version` on `gpu` (module docstring); nothing where Marlin does not run the checkpoint or every shard fits.
    Attention splits over tp (DP attention's group), dense MLPs over `dense_tp`, shared and routed experts over
    `moe_tp` (SGLang's --tp-size), as kvplan.engines.fp8_linear.check_sglang reads them."""
    if not _applies(model, gpu, version) or model.num_attention_heads % dep.tp or dense_tp < 1:
        return
    mlps = {"dense": mlp_widths(model, dense_tp)[0].get("dense"), "moe": mlp_widths(model, moe_tp)[0].get("moe")}
    mlps = {kind: shape for kind, shape in mlps.items() if shape}
    attention, kinds = attention_exact(model), ffn_kinds(model, model.num_layers)
    shards = [(x.name, x.n, x.k) for i, la in enumerate(model.layers)
              for x in layer_shards(model, la, kinds[i], dep.tp, mlps, attention)]
    for name, n, k in [*dict.fromkeys(shards), *_expert_shards(model, dep, moe_tp)]:
        if n % TILE_N or k % TILE_K:
            dim, size, tile = ("size_n", n, TILE_N) if n % TILE_N else ("size_k", k, TILE_K)
            raise KvplanError(f"SGLang {version} runs this checkpoint on Marlin and cannot repack the {name} at "
                              f"{arg('tp')} {dep.tp}: a rank's shard is {n} outputs x {k} inputs, and "
                              f"gptq_marlin_repack stops the load (\"{dim} = {size} is not divisible by "
                              f"tile_{dim[-1]}_size = {tile}\"); SGLang pads no Marlin shard", EXIT_USAGE,
                              param="tp", value=dep.tp)
