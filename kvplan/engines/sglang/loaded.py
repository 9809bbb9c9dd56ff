"""SGLang's weights as loaded: what its "Load weight end ... mem usage" holds beyond the checkpoint's tensors.

SGLang measures the free-memory drop over `ModelRunner.load_model` (`model_executor/model_runner.py`:
`before_avail_memory - get_available_gpu_memory()`, logged as "Load weight end. ... avail mem=X GB, mem
usage=Y GB"; 0.4.3.post4 through 0.5.x), so everything the model's constructor builds on the GPU is in it,
and the KV budget `rest = free_after_weights - free_before_weights x (1 - fraction)` leaves it out too.

RoPE: `layers/rotary_embedding.py` RotaryEmbedding.__init__ registers `cos_sin_cache` [max_position_embeddings,
rotary_dim] and keeps it in fp32 on CUDA ("NOTE(ByronHsu): cache needs to be in FP32 for numerical stability";
`if not _is_cuda: cache = cache.to(dtype)`), in the model dtype elsewhere (ROCm, unless SGLANG_ROPE_CACHE_FP32,
sgl-project/sglang#29729). One table per distinct rotary embedding, the rows kvplan.readers.rope counts.

MXFP4 MoE experts (gpt-oss; SGLang >= 0.5.0, the first release with gpt-oss, sgl-project/sglang#8833):
`layers/quantization/mxfp4.py` Mxfp4MoEMethod.create_weights allocates w13 uint8 [E, 2 I', H'/2], its scales
[E, 2 I', H'/32], bias bf16 [E, 2 I'], w2 [E, H', I'/2], scales [E, H', I'/32], bias bf16 [E, H'] (I = I/tp of one
expert), padded by the MoE runner backend:
  * compute capability 10.x (`_is_sm100_supported`), where SGLang picks `flashinfer_mxfp4` for gpt-oss by itself
    (sgl-project/sglang#8898, "Auto enable best flashinfer mxfp4 kernel in b200"): I' = round_up(I, 256),
    H' = round_up(H, 256); process_weights_after_loading shuffles each tensor for trtllm-gen and replaces the
    biases with fp32 copies (`w13_bias = ....to(torch.float32)`, `layer.w13_weight_bias = Parameter(...)`).
    gpt-oss's H = I = 2880 become 3072: (3072/2880)^2 = 1.138 x the expert bytes.
  * every other CUDA GPU, where `server_args.py` picks `triton_kernel` for gpt-oss when ep_size is 1 and
    triton_kernels is installed ("Detected GPT-OSS model, enabling triton_kernels MOE kernel"): I' = round_up(I,
    32); `_swizzle_mxfp4` converts the values and scales to triton_kernels' layouts and the biases become fp32.
    On Hopper the layouts pad as kvplan.engines.mxfp4_experts.triton_hopper_expert restates for the same library:
    values [round_up(K/2, 64), round_up(N, 256)], scales [round_up(N, 32 x 8 warps), round_up(K/32, 2)], one copy
    of the scales. vLLM's Mxfp4MoEMethod runs the same calls (`_swizzle_mxfp4`, then `del layer.w13_weight`, the
    scale parameters left registered, as SGLang's), and its "Model loading took" for gpt-oss-120b on one H100,
    64.38 GiB under 0.11.0 and 0.14.1 (the corpus's llmdbench-gpt-oss-120b and vllm#33155, both training), is
    that rule's 64.20 (-0.3%); counting the checkpoint's scales a second time, as kvplan did for SGLang before,
    adds 3.34 GiB (67.67 GiB, more than SGLang 0.5.3's default static fraction, 0.835 x 79.19 = 66.12 GiB, leaves
    an H100), where GPUStack's perf lab served gpt-oss-120b on one H100 under SGLang 0.5.3rc0 at its defaults
    (tests/fixtures/speed/gpustack-perflab-gpt-oss-120b-h100.yaml). On Ampere and Ada both stay strided (no padding),
    and there the conversion copies nothing: triton_kernels' `tensor_details/layout_details/strided.py`
    StridedLayoutTransformation.swizzle_data is `return data` (or `return data.permute(self.order)`,
    triton-lang/triton@022bb95d), a view of the transposed checkpoint tensor, so the values stay in the storage
    `del layer.w13_weight` no longer names and the scales are the registered ones: only the fp32 biases add
    (2 x (2I + H) B an expert; gpt-oss-20b: 13,271,040 B). SM120 (RTX 5090, RTX PRO 6000) keeps strided values
    and a Blackwell scale layout whose padding kvplan does not add (scales are 1/16 of the values): there the
    figure is a floor.
(mxfp4.py read at sgl-project/sglang@0043c43a (0.5.0, flashinfer by SGLANG_USE_FLASHINFER_MXFP4_MOE) and at the
current main, where `use_flashinfer = get_moe_runner_backend().is_flashinfer_mxfp4()`; the shapes are the same.
kvplan's 0.5 releases, 0.5.3 and 0.5.23, both pick the backend by GPU.) With ep > 1 off SM100 SGLang runs another
MoE backend that kvplan has not read, and on AMD aiter's: nothing is added there.

PyTorch's caching allocator: the free-memory drop counts the segments the allocator took for the weights, not
their bytes (kvplan.core.caching_allocator): each tensor of 10 MiB or more gets a segment rounded up to 2 MiB,
smaller ones share 20 MiB (over 1 MiB) or 2 MiB segments. SGLang builds the model on the GPU, tensor by tensor
(kvplan.planning.tensors), and `get_available_gpu_memory` empties the cache before reading free memory
(0.4.3.post4 `utils.py` L174-191), so what stays is the segments holding weights. Neither 0.4.3.post4 nor 0.5.3
sets `expandable_segments`. QwQ-32B at tp 4: qkv 17.5 MiB, o 12.5, gate_up 135, down 67.5 take 18, 14, 136 and
68 MiB, 3.5 MiB a layer x 64 + 0.75 MiB each for the embedding and LM head (371.25 MiB) = 225.5 MiB. Weights
rebuilt after loading (the MXFP4 layouts above) free and reuse blocks; that churn is not replayed.
"""

from __future__ import annotations

from kvplan.core.caching_allocator import rounding_bytes
from kvplan.core.intmath import cdiv, round_up
from kvplan.engines.base import parse_version
from kvplan.engines.fp8_linear import sglang_partial_scale_bytes
from kvplan.engines.mxfp4_experts import stored_expert, triton_hopper_expert
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.planning.deploy import stages_or_one
from kvplan.planning.tensors import rank_tensors
from kvplan.readers.mlp_layout import most_moe_layers
from kvplan.readers.rope import rope_table_bytes


def loaded_extra(model, gpu, tp: int = 1, version: str = "0.5.23", ep: int = 1,
                 ranges: list[tuple[int, int]] | None = None, weight_dtype: str | None = None,
                 attn_tp: int | None = None) -> int:
    """Bytes per GPU SGLang's loading adds to the checkpoint's weights: the RoPE tables (fp32 on NVIDIA GPUs and
    on a GPU known only by its memory, as SGLang's CUDA build; the model dtype on others), the MXFP4 experts'
    padding and layouts (`tp`: the ranks the MoE is split over, SGLang's --tp-size; `ep` of them by experts), the
    block-FP8 scale rows of a merged projection built unchecked (MiMo-V2's qkv_proj, over `attn_tp` ranks: `tp`
    unless DP attention splits it) and the caching allocator's rounding of every tensor (`allocator_extra`), on the
    pipeline stages `ranges` (kvplan.planning.deploy.stage_ranges; None: one)."""
    return loaded_parts(model, gpu, tp, version, ep, ranges, weight_dtype, attn_tp)[0]


def loaded_parts(model, gpu, tp: int = 1, version: str = "0.5.23", ep: int = 1,
                 ranges: list[tuple[int, int]] | None = None, weight_dtype: str | None = None,
                 attn_tp: int | None = None) -> tuple[int, int]:
    """(`loaded_extra`, the part of it that is the caching allocator's rounding)."""
    vendor = str(getattr(gpu, "vendor", "") or "NVIDIA").upper()
    rope = rope_table_bytes(model, fp32=vendor in ("NVIDIA", "UNKNOWN", ""))
    rounding = allocator_extra(model, tp, ep, ranges, weight_dtype, rope)
    scales = sglang_partial_scale_bytes(model, tp if attn_tp is None else attn_tp, ranges)
    return rope + mxfp4_extra(model, gpu, tp, version, ep, ranges) + scales + rounding, rounding


def allocator_extra(model, tp: int = 1, ep: int = 1, ranges: list[tuple[int, int]] | None = None,
                    weight_dtype: str | None = None, rope: int = 0) -> int:
    """What PyTorch's caching allocator holds for one rank's weights beyond their bytes (module docstring)."""
    return rounding_bytes(rank_tensors(model, tp, ep, ranges, weight_dtype, rope))


def mxfp4_extra(model, gpu, tp: int = 1, version: str = "0.5.23", ep: int = 1,
                ranges: list[tuple[int, int]] | None = None) -> int:
    """Bytes per rank SGLang's MXFP4 MoE backend adds over the checkpoint's experts (module docstring)."""
    q, p = model.quantization, model.params
    cap = capability_of(gpu) if vendor_of(gpu) == "NVIDIA" else None
    if (q.method != "mxfp4" or cap is None or parse_version(version) < (0, 5, 0) or not p.num_experts
            or not p.experts_per_token or not p.num_moe_layers):
        return 0
    width = model.intermediate_size // p.experts_per_token  # one expert's intermediate size
    per_rank, hidden = width // max(1, tp // ep), model.hidden_size
    if cap[0] == 10:
        one = _flashinfer_expert(per_rank, hidden)
    elif ep > 1:
        return 0
    elif cap[0] == 9:
        one = _hopper_triton_expert(per_rank, hidden)
    else:
        one = _strided_triton_expert(per_rank, hidden)
    most = most_moe_layers(model, stages_or_one(model, ranges))  # the stage holding the most
    return (one - stored_expert(per_rank, hidden)) * cdiv(p.num_experts, ep) * most


def _flashinfer_expert(i: int, h: int) -> int:
    """One expert as flashinfer_mxfp4 holds it: I and H padded to 256, biases fp32."""
    return stored_expert(round_up(i, 256), round_up(h, 256), bias_bytes=4)


def _hopper_triton_expert(i: int, h: int) -> int:
    """One expert in triton_kernels' Hopper layouts at SGLang's I padded to 32 (one copy of the scales, fp32 biases:
    the layouts vLLM's logs confirm, module docstring)."""
    return triton_hopper_expert(round_up(i, 32), h)


def _strided_triton_expert(i: int, h: int) -> int:
    """One expert in triton_kernels' strided layouts (Ampere, Ada, SM120): values and scales at the checkpoint's
    size (I padded to 32) held once, biases fp32. StridedLayout's swizzle_data returns the tensor it is given or a
    permute of it, a view (module docstring): the "converted" scales share the registered checkpoint scales'
    storage, so they are not counted twice."""
    return stored_expert(round_up(i, 32), h, bias_bytes=4)
