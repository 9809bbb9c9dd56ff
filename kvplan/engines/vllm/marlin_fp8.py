"""vLLM's weight-only FP8 and NVFP4 Marlin: a checkpoint's dense linears as loaded on a GPU without such GEMMs.

Why: below compute capability 8.9 vLLM cannot run an FP8 GEMM, so Fp8LinearMethod repacks each quantized linear for
Marlin (W8A16): 0.10.0 `quantization/fp8.py` L197-198 use_marlin = not has_device_capability(89); from 0.24.0 the FP8
kernel list picks MarlinFP8ScaledMMLinearKernel there (0.24.0 fp8.py L396; 0.33.0 `kernels/linear/__init__.py`
L458-467 and L497-506, Marlin ahead of Humming, the torch and CUTLASS kernels needing FP8 support; scaled_mm/marlin.py
L35-45: capability 7.5). prepare_fp8_layer_for_marlin (`quantization/utils/marlin_utils_fp8.py` 0.24.0 L106-216,
the same scale rules in 0.10.0-0.33.0) replaces the checkpoint's tensors:
  * the fp8 weight, one byte an entry, repacked (the same bytes) and, from 0.24.0, zero-padded to
    marlin_padded_nk(N, K, g) (L124, L142; g = weight_block_size[1], -1 without blocks): kvplan.engines.vllm.
    marlin_dense_pad.padded_nk, the rule the GPTQ / AWQ padding reads;
  * the scales, cast to the model's dtype (2 B, L156) and made Marlin's: a per-tensor scale repeated over every
    output channel, (1, N) (L164-188); a 128 x 128 block scale repeated over the block's N columns, (K / 128, N)
    (L189-198), then padded to (1 or pK / 128, pN) (L200-202). The fp32 scales the checkpoint carried are freed.
    0.10.0's prepare_fp8_layer_for_marlin (L80-165) has the same scale rules, without the padding.
Before 0.24.0 nothing checks or pads a shard that fits neither Marlin tile (0.23.0 marlin_utils_fp8.py L106-120,
scaled_mm/marlin.py can_implement L59-60): what then runs was not read, so such a shard is priced unpadded and said.
Releases before 0.10.0 were not read: not counted.

NVFP4 (ModelOpt's and compressed-tensors' nvfp4): below compute capability 10.0 (cutlass_fp4_supported) the NVFP4 kernel
list both read through init_nvfp4_linear_kernel falls to MarlinNvFp4LinearKernel (0.24.0 `kernels/linear/__init__.py`
L407-419 and L842; 0.33.0 L592-606, where prioritize_humming puts Humming first on 9.0 from 0.32.0, as
marlin_dense_pad says), from 7.5 (`marlin_utils_fp4.py` 0.24.0 L34-35). prepare_fp4_layer_for_marlin (0.24.0
L221-306) pads the packed weight by marlin_padded_nk(N, K, 16) (L235, from 0.24.0; 0.23.0 has none) and turns the
fp8 scales to 16 bits and back to one fp8 byte per 16 (nvfp4_marlin_process_scales L61-122: `[:, 1::2]`), so only
the padding adds: 9 / 16 B a padded entry. The routed experts (prepare_nvfp4_moe_layer_for_marlin) are not counted,
said. MXFP4 linears kvplan does not plan (its MXFP4 checkpoints quantize experts only: kvplan.engines.vllm.mxfp4).
Counted, a rank of the largest pipeline stage: the new weight and scale bytes less the checkpoint's (fp32 block scales
ceil(N / 128) x ceil(K / 128) a rank's tensor, as Fp8LinearMethod allocates them; per-tensor scales, which kvplan
does not count, nothing) for the qkv, o, gate_up and down linears of plain-attention layers, dense MLPs and shared
experts, the shapes marlin_dense_pad reads (a role whose shapes the counts do not give is said, not counted).
The routed experts: below 8.9 vLLM's FP8 MoE runs Marlin too (0.10.0 fp8.py L496-497, 0.14.0 `fused_moe/oracle/
fp8.py` L106-109 `not has_device_capability(89)`; 0.19.0-0.33.0 the oracle's list, where Triton's FP8 schemes need
capability 8.9, 0.19.0 `fused_moe.py` L1932-1939, 0.33.0 `experts/triton_moe.py` L159-166, and Marlin comes before
Humming). prepare_fp8_moe_layer_for_marlin (`marlin_utils_fp8.py` 0.24.0 L219-337) casts the scales the same way, per
expert: per-tensor -> w13 (1, 2N) and w2 (1, H); blocks -> w13 (H / 128, 2N) and w2 (N / 128, H), 2 B each, for the
checkpoint's fp32 (2N / 128, H / 128) and (H / 128, N / 128); N a rank's expert width (the whole width and
cdiv(E, ep) experts under expert parallelism). Counted where N is whole tiles (N % 64, and N % 128 with blocks: then
0.25.0's marlin_moe_padded_intermediate pads nothing); a shard that is not, or a width the counts do not give, is
said, not counted. Not counted, said: other quantization methods' FP8 (fbgemm_fp8, ModelOpt: another scheme class
each); a bias's padding (2 B a column) is not counted.

compressed-tensors FP8 (`quant_method: compressed-tensors`, 8-bit float weights) takes the same rule below 8.9: its
W8A8 FP8 scheme needs capability 8.9 (CompressedTensorsW8A8Fp8.get_min_capability 89), and below it
_get_scheme_from_parts returns CompressedTensorsW8A16Fp8 (0.10.0 compressed_tensors.py L411-424, 0.19.0 L629-646,
0.33.0 L878-912), which calls prepare_fp8_layer_for_marlin itself through 0.19.0 (0.10.0 `schemes/
compressed_tensors_w8a16_fp8.py` L59, 0.19.0 L133) and from 0.20.0 through init_wfp8_a16_linear_kernel, whose CUDA
list is MarlinFP8ScaledMMLinearKernel alone through 0.24.0 (`kernels/linear/__init__.py` 0.21.0 L208-211, 0.24.0
L343-346). A `tensor` scale is made channel-wise first (convert_to_channelwise) and ends as Marlin's (1, N) 16-bit
row as fp8's does; a `channel` strategy's fp32 scale per output (counted by kvplan.readers.channel_scales) becomes
the same (1, N) row, 2 B an output for the checkpoint's 4; a `block` one is fp8's block rule, taken from 0.19.0
(0.10.0-0.14.0's scheme takes tensor and channel only and raises "Unsupported weight strategy" on a block one,
0.10.0 and 0.11.0 L85-99: refused, `check`; 0.15-0.18 not read: not counted, said). From
0.25.0 HummingFP8ScaledMMLinearKernel comes first in that list (0.25.0 L376-380, 0.33.0 L522-526) and the wheels
require humming-kernels, so Humming takes the linears (its layout not read: the checkpoint's bytes, said). The
routed experts (CompressedTensorsW8A8Fp8MoEMethod's Marlin prep) were not read: said, not counted.

compressed-tensors FP8 without activation quantization (a scheme with `input_activations: null`, W8A16;
Quantization.weight_only) takes CompressedTensorsW8A16Fp8 on every GPU, Hopper included: _is_fp8_w8a8 needs
input_activations (0.10.0 `compressed_tensors.py` L302-306, 0.33.0 L582-587) and `_is_fp8_w8a16` checks no capability
(0.10.0 L427-432, 0.19.1 L649-653, 0.33.0 L915-920). What that scheme then runs, by release:
  * 0.10.0-0.19.x: prepare_fp8_layer_for_marlin called by the scheme itself, whatever the GPU (0.10.0
    `schemes/compressed_tensors_w8a16_fp8.py` L59, 0.17.0 and 0.19.1 L133): Marlin's bytes above on 8.9+ too;
    a block strategy as above (refused through 0.14.x: 0.10.x's `_is_fp8_w8a16` takes tensor and channel only and
    no scheme matches, 0.11.0's W8A16 raises "Unsupported weight strategy"; 0.15-0.18 said);
  * 0.20.0-0.24.x: init_wfp8_a16_linear_kernel, whose CUDA list is MarlinFP8ScaledMMLinearKernel alone, and its
    is_supported declines compute capability 8.9 and above unless VLLM_TEST_FORCE_FP8_MARLIN=1 (0.20.0, 0.21.0,
    0.23.0 and 0.24.0 `kernels/linear/scaled_mm/marlin.py` L46-55): choose_scaled_mm_linear_kernel raises "Failed
    to find a kernel that can implement the ScaledMM linear layer" (0.20.0 `kernels/linear/__init__.py` L306-362),
    so the load stops: refused (`check`), naming the releases that load it;
  * 0.25.0 on: Humming first (above; its is_supported asks 7.5, 0.33.0 `scaled_mm/humming.py` L31-43): said.
Routed experts under such a scheme do not load in any release read: CompressedTensorsMoEMethod.get_moe_method sends
a channel strategy to the WNA16 MoE method (`_is_wNa16_group_channel` reads no type), which from 0.17.0 asks the
pack-quantized format and raises on FP8's float-quantized one (`compressed_tensors_moe.py` 0.17.0 L155-170, 0.20.0
`compressed_tensors_moe/compressed_tensors_moe.py` L78-92, 0.33.0 L90-101), and in 0.10.1 builds packed integer
tensors (`weight_packed`, L76-93) that an FP8 checkpoint's `weight` tensors do not fill (that load not traced
further: refused as not understood); a tensor or block strategy matches no MoE method ("Unsupported FusedMoe scheme":
0.10.1 L105-106, 0.17.0 L230, 0.33.0 L200). Refused (`check`).
On an AMD GPU such a scheme does not load either from 0.20.0: init_wfp8_a16_linear_kernel's ROCm list is empty ("To
be added": `kernels/linear/__init__.py` 0.20.0 L204-210, 0.24.0 L343-349, 0.33.0 L522-529), so
choose_scaled_mm_linear_kernel raises "Failed to find a kernel". 0.10.0-0.19.x call prepare_fp8_layer_for_marlin
on ROCm as on CUDA (the scheme asks no platform), a path kvplan has not read there. Both refused (`check`).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.engines.fp8_blocks import exact_expert_width
from kvplan.engines.marlin_shapes import rank_layer_shards
from kvplan.engines.versions import parse_version
from kvplan.engines.vllm import marlin_dense_pad as dense
from kvplan.engines.vllm.mxfp4 import nvidia_capability
from kvplan.hardware.facts import vendor_of
from kvplan.planning.deploy import largest_stage
from kvplan.planning.plan_warnings import PlanWarning

READ_FROM = (0, 10, 0)  # the first release whose FP8 Marlin was read
NATIVE_FP8_CC = (8, 9)  # has_device_capability(89): FP8 GEMMs; below it, Marlin
NATIVE_FP4_CC = (10, 0)  # cutlass_fp4_supported: FP4 GEMMs; below it, Marlin
NVFP4_METHODS = ("modelopt", "compressed-tensors")
BLOCKS = (0, 128)  # per-tensor, or the 128 x 128 blocks of every block-FP8 checkpoint kvplan reads
CT_BLOCK_FROM = (0, 19, 0)  # compressed-tensors' W8A16Fp8 takes the block strategy (0.10.0-0.14.0: not)
CT_BLOCK_UNREAD = (0, 15, 0)  # the first release after those that raise on it (0.15-0.18 not read)
CT_HUMMING_FROM = (0, 25, 0)  # Humming ahead of Marlin in the W8A16 FP8 kernel list
CT_KERNEL_LIST = (0, 20, 0)  # the W8A16 kernel list, FP8 Marlin alone declining 8.9+ until Humming (0.25.0)
ON_NATIVE = ("0.19.x", ">= 0.25.0")  # the releases that load a W8A16 FP8 checkpoint on 8.9+ (check)


def _w8a16(q, cap) -> bool:
    """Whether vLLM runs compressed-tensors FP8 through CompressedTensorsW8A16Fp8 on a GPU of capability `cap`: below
    8.9, or on any GPU where the scheme quantizes no activations (module docstring)."""
    return (q.quant_method == "compressed-tensors" and q.method == "fp8" and cap is not None
            and (cap < NATIVE_FP8_CC or q.weight_only))


def applies(model, gpu, v: tuple) -> bool:
    """Whether vLLM `v` runs this checkpoint's dense linears through FP8 Marlin on `gpu` (capability 7.5 to 8.9)."""
    q, cap = model.quantization, nvidia_capability(gpu)
    if cap is None or cap < dense.MARLIN_CC or q.experts_only:
        return False
    if q.method == "nvfp4":
        return (q.quant_method in NVFP4_METHODS and cap < NATIVE_FP4_CC and v >= dense.PADS_FROM
                and not (v >= dense.HUMMING_FROM and cap == dense.HUMMING_CC))
    if q.method == "fp8" and q.quant_method == "compressed-tensors":  # W8A16Fp8 (module docstring)
        return (_w8a16(q, cap) and READ_FROM <= v < CT_HUMMING_FROM and (not q.group_size or v >= CT_BLOCK_FROM)
                and not (cap >= NATIVE_FP8_CC and v >= CT_KERNEL_LIST))
    return v >= READ_FROM and q.method == "fp8" and q.quant_method == "fp8" and cap < NATIVE_FP8_CC


def check(model, gpu, version: str) -> None:
    """A one-line refusal of compressed-tensors FP8 on CompressedTensorsW8A16Fp8 where vLLM cannot load it (module
    docstring): routed experts without input_activations, a block strategy in 0.10.0-0.14.x, a scheme without
    input_activations on 8.9+ in 0.20.0-0.24.x and on an AMD GPU; and a catalog entry that does not say which scheme
    it is (weight_only None: kvplan.sources.catalog.entry_quantization), which vLLM would load one way or the other."""
    q, cap, v = model.quantization, nvidia_capability(gpu), parse_version(version)
    if q.weight_only is None and v >= READ_FROM:  # an entry of before round 41 (kvplan.sources.catalog)
        raise KvplanError(f"the catalog entry {model.name} (written before kvplan's round 41) does not say whether its "
                          "compressed-tensors FP8 scheme quantizes activations (W8A8) or not (W8A16), which vLLM "
                          f"{version} loads apart; write it again from its config.json (kvplan models import)",
                          EXIT_USAGE)
    if q.weight_only and q.quant_method == "compressed-tensors" and model.params.num_experts \
            and q.kept_of("experts") < model.params.experts and v >= READ_FROM:
        raise KvplanError(f"vLLM {version} cannot load this compressed-tensors FP8 checkpoint's routed experts without "
                          "quantized activations (W8A16): no MoE method takes them (a channel strategy reaches the "
                          "WNA16 MoE method, which asks the pack-quantized format; tensor and block ones find none, "
                          "\"Unsupported FusedMoe scheme\"; compressed_tensors_moe.py)", EXIT_USAGE)
    if q.weight_only and q.quant_method == "compressed-tensors" and vendor_of(gpu) == "AMD" and v >= READ_FROM:
        w8a16 = "this compressed-tensors FP8 checkpoint without quantized activations (W8A16) on an AMD GPU"
        why = (f"cannot load {w8a16}: its W8A16 FP8 kernel list has no ROCm kernel (\"To be added\", "
               "kernels/linear/__init__.py: \"Failed to find a kernel\")" if v >= CT_KERNEL_LIST else
               f"with {w8a16} is not planned: its W8A16 scheme repacks the linears for FP8 Marlin whatever the "
               "platform (prepare_fp8_layer_for_marlin), which kvplan has not read on ROCm")
        raise KvplanError(f"vLLM {version} {why}", EXIT_USAGE)
    if not _w8a16(q, cap) or not READ_FROM <= v < CT_HUMMING_FROM:
        return
    native = cap >= NATIVE_FP8_CC
    if native and v >= CT_KERNEL_LIST:
        raise KvplanError(f"vLLM {version} cannot load this compressed-tensors FP8 checkpoint without quantized "
                          "activations (W8A16) on compute capability 8.9 or above: its W8A16 kernel list holds FP8 "
                          "Marlin alone, which declines such a GPU unless VLLM_TEST_FORCE_FP8_MARLIN=1 (\"Failed to "
                          f"find a kernel\", scaled_mm/marlin.py); {arg('engine_version')} 0.19.x or 0.25.0 and later "
                          "load it", EXIT_USAGE, param="engine_version", value=version, allowed=ON_NATIVE)
    if q.group_size and v < CT_BLOCK_UNREAD:
        where = "without quantized activations (W8A16)" if native else "below compute capability 8.9"
        raise KvplanError(f"vLLM {version} cannot load this block-FP8 compressed-tensors checkpoint {where}: its W8A16 "
                          "FP8 scheme takes tensor and channel scales only (\"Unsupported weight strategy\", "
                          "compressed_tensors_w8a16_fp8.py; 0.10.x without input_activations matches no scheme); "
                          f"{arg('engine_version')} {'0.19.x or 0.25.0' if native else '0.19.0'} or later loads it",
                          EXIT_USAGE, param="engine_version", value=version,
                          allowed=ON_NATIVE if native else (">= 0.19.0",))


def linear_bytes(n: int, k: int, block: int, v: tuple, fp4: bool = False, channel: bool = False) -> int:
    """Bytes one rank's fp8 (or, `fp4`, NVFP4) linear of N outputs and K inputs gains as Marlin loads it; `channel`:
    the checkpoint held an fp32 scale per output (compressed-tensors' channel strategy), freed."""
    if fp4:
        pn, pk = dense.padded_nk(n, k, 16)
        return (pn * pk - n * k) * 9 // 16
    pn, pk = dense.padded_nk(n, k, block or -1) if v >= dense.PADS_FROM else (n, k)
    loaded = pn * pk + 2 * pn * (pk // block if block else 1)
    return loaded - n * k - (cdiv(n, block) * cdiv(k, block) * 4 if block else 4 * n if channel else 0)


def _expert_shard(model, dep) -> tuple[int, int] | None:
    """(a rank's expert width N, experts a rank holds) where the FP8 experts' Marlin scales are priced; None where the
    model has no FP8 routed experts, or their width is not read or not whole Marlin tiles (module docstring)."""
    q, p = model.quantization, model.params
    if q.quant_method != "fp8" or not p.num_experts or q.experts_method or q.kept_of("experts") >= p.experts:
        return None
    width, split = exact_expert_width(model), dep.tp * dep.dp
    if not width or model.hidden_size % 128 or (dep.ep == 1 and width % split):
        return None
    n, experts = (width, cdiv(p.num_experts, dep.ep)) if dep.ep > 1 else (width // split, p.num_experts)
    return None if n % (128 if q.group_size else 64) else (n, experts)


def expert_bytes(hidden: int, n: int, block: int) -> int:
    """Bytes one expert's scales gain as Marlin loads them: 16-bit channel or group scales for the fp32 blocks."""
    if not block:
        return 2 * (2 * n + hidden)
    loaded = 2 * (hidden // block) * 2 * n + 2 * (n // block) * hidden
    return loaded - 4 * (2 * n // block) * (hidden // block) - 4 * (hidden // block) * (n // block)


def _experts(model, dep) -> int | None:
    """The routed experts' bytes on a rank, one MoE layer; None where not priced (said)."""
    got = _expert_shard(model, dep)
    return None if got is None else got[1] * expert_bytes(model.hidden_size, got[0], model.quantization.group_size)


def priced(model, dep, v: tuple, gpu, padded: bool = False):
    """(bytes a rank of the largest stage gains, roles left out), or None where FP8 Marlin does not take the dense
    linears or their shapes are not read (a block kvplan does not know, heads that do not divide); `padded`: with
    0.24.0's tile padding whatever `v` (what an older release would gain with it, for the note)."""
    q = model.quantization
    if not applies(model, gpu, v) or (q.method == "fp8" and q.group_size not in BLOCKS):
        return None
    shards = rank_layer_shards(model, dep.tp)
    if shards is None:
        return None
    layers, kinds, skipped = shards
    experts = _experts(model, dep) if model.params.num_experts else 0
    if experts is None:
        skipped.append("routed experts'")
    fp4, block, channel = q.method == "nvfp4", 0 if q.method == "nvfp4" else q.group_size, bool(q.channel_scales)
    # a layer's bytes: its attention projections (where exact), its dense or shared MLP, and on the MoE layers by
    # ffn_kinds' layout (DeepSeek's dense first) its routed experts' scales
    rule = dense.PADS_FROM if padded else v
    per_layer = [sum(linear_bytes(x.n, x.k, block, rule, fp4, channel) for x in layer)
                 + (experts or 0) * (kind == "moe") for layer, kind in zip(layers, kinds)]
    return largest_stage(per_layer, dep), skipped


def loaded_bytes(model, dep, v: tuple, gpu) -> int:
    """Bytes per rank FP8 Marlin's repacking adds to the weights as counted (module docstring)."""
    got = priced(model, dep, v, gpu)
    return got[0] if got else 0


def _head(model, st) -> str:
    """What the note says runs: the format, the threshold, what Marlin does to the tensors in this release."""
    q = model.quantization
    if q.method == "nvfp4":
        return (f"vLLM {st.version} runs this NVFP4 checkpoint's linears weight-only through Marlin below compute "
                "capability 10.0 (prepare_fp4_layer_for_marlin: shards zero-padded by marlin_padded_nk, 9 / 16 B an "
                "entry)")
    where = ("on a GPU below compute capability 8.9" if nvidia_capability(st.gpu) < NATIVE_FP8_CC else
             "on every GPU, its compressed-tensors scheme quantizing no activations (CompressedTensorsW8A16Fp8)")
    head = (f"vLLM {st.version} runs this FP8 checkpoint weight-only through Marlin {where} "
            "(prepare_fp8_layer_for_marlin: 16-bit scales per output channel")
    head += ", block scales repeated over each block's columns" if q.group_size else ""
    head += ", its fp32 ones freed" if q.channel_scales else ""
    return head + (", shards zero-padded by marlin_padded_nk)" if st.v >= dense.PADS_FROM else ")")


def note(model, dep, st) -> tuple:
    """Weight-only Marlin said where it runs: the bytes counted, what is left out (experts, roles, unread blocks)."""
    if not applies(model, st.gpu, st.v):
        return _humming_note(model, st)
    got, head = priced(model, dep, st.v, st.gpu), _head(model, st)
    if got is None:
        return (PlanWarning.literal(head + ": the linears' shapes are not read here, not counted"),)
    b, skipped = got
    roles = [r for r in skipped if r != "routed experts'"]
    left = [f"the {', '.join(roles)} projections (shapes not exact from the counts)"] if roles else []
    if "routed experts'" in skipped:  # NVFP4's experts too: _expert_shard prices FP8's only
        left.append("the routed experts (their Marlin repacking: width not read or not whole tiles, or NVFP4's "
                    "or compressed-tensors' MoE prep, not read)")
    unpadded = st.v < dense.PADS_FROM and priced(model, dep, st.v, st.gpu, padded=True)[0] != b
    tail = f"; not counted: {' and '.join(left)}" if left else ""
    tail += ("; a shard fits neither Marlin tile, which this release neither checks nor pads (what then runs was not "
             "read): priced unpadded") if unpadded else ""
    if not b and not tail:
        return ()
    return (PlanWarning(head + ": {} per GPU " + ("more" if b >= 0 else "fewer") + " weights, counted" + tail,
                        (abs(b),), ("MiB",)),)


def _humming_note(model, st) -> tuple:
    """NVFP4 on 9.0 from 0.32.0, where Humming goes ahead of Marlin (its layout not read): the checkpoint's bytes;
    compressed-tensors FP8 below 8.9 where it is not priced (`_ct_note`)."""
    cap = nvidia_capability(st.gpu)
    if model.quantization.quant_method == "compressed-tensors" and model.quantization.method == "fp8":
        return _ct_note(model, st, cap)
    if (model.quantization.method != "nvfp4" or model.quantization.quant_method not in NVFP4_METHODS
            or cap != dense.HUMMING_CC or st.v < dense.HUMMING_FROM):
        return ()
    return (PlanWarning.literal(f"vLLM {st.version} tries Humming ahead of Marlin for NVFP4 linears on compute "
                                "capability 9.0 (its layout kvplan did not read): the checkpoint's bytes counted"),)


def _ct_note(model, st, cap) -> tuple:
    """compressed-tensors FP8 on W8A16 (below 8.9, or without input_activations) in a release whose W8A16 path kvplan
    does not price (module docstring)."""
    if not _w8a16(model.quantization, cap) or cap < dense.MARLIN_CC or st.v < READ_FROM:
        return ()
    if st.v >= CT_HUMMING_FROM:
        why = ("tries Humming ahead of Marlin for compressed-tensors' W8A16 FP8 linears (from 0.25.0; its layout "
               "kvplan did not read)")
    else:
        why = "runs block-FP8 compressed-tensors linears by a W8A16 path kvplan did not read (0.15.0-0.18.x)"
    where = "below compute capability 8.9" if cap < NATIVE_FP8_CC else "on this GPU too, its scheme quantizing no " \
        "activations"
    return (PlanWarning.literal(f"vLLM {st.version} {why} {where}: the checkpoint's bytes counted"),)
