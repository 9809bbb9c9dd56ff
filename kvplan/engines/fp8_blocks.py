"""Block-FP8 MoE checkpoints whose tensor-parallel expert shard the engine refuses: not a whole number of blocks.

A block-FP8 checkpoint (`quant_method: fp8` with `weight_block_size`, DeepSeek's and Qwen's 128 x 128) stores one
scale per block of each expert's gate / up rows and down columns. Splitting the expert's intermediate width over
the MoE's tensor-parallel ranks must leave each rank whole blocks, or the scales cannot be sharded:

* vLLM before 0.29.0 raises ("The output_size of gate's and up's weight = 192 is not divisible by weight
  quantization block_n = 128.", 0.12.0 wheel `model_executor/layers/quantization/fp8.py` L715-735; 0.28.0
  L530-548; as `validate_fp8_block_shape_moe` in 0.33.0 `utils/fp8_utils.py` L1347-1372).
* vLLM from 0.29.0 refines the scales to a finer square block where gcd(block_n, block_k, shard, hidden) >= 32
  (a lossless upsampling that only Triton kernels take) and raises only where no such block exists (0.29.0
  `fp8.py` L484-512 and L555-585, `fused_moe/oracle/fp8.py` refine_fp8_moe_block_shape; 0.33.0
  `fused_moe/oracle/fp8.py` L292-320 and resolve_fp8_moe_weight_block_shape L355-396; 0.28.0 has no refinement).
  Qwen3-235B-A22B-FP8 at tp 8: 1536 / 8 = 192, 192 % 128 != 0, gcd(128, 128, 192, 4096) = 64: runs on 0.29.0+.
* SGLang raises the same way in every release read (0.5.23 wheel `layers/quantization/fp8.py` L1578-1600), except
  under ROCm's aiter MoE where the padding equals the block (not planned here: ROCm's default MoE runner is not
  read, so the CUDA rule is applied and said).
* TensorRT-LLM: no refusal; it has no such check (`DeepSeekFP8BlockScalesFusedMoEMethod.create_weights` sizes the
  scales ceil(shard / 128), NVIDIA/TensorRT-LLM@a98a9061 `_torch/modules/fused_moe/quantization.py`).
Dense linears (attention, dense MLPs, shared experts): kvplan.engines.fp8_linear.

The shard is moe_intermediate / (tp x dp) without expert parallelism (vLLM's FusedMoE flattens tp x dp; SGLang's
MoE runs over every tensor-parallel rank), the whole width under expert parallelism. kvplan keeps the block's first
size (`Quantization.group_size`, weight_block_size[0]) and checks it as both block_n and block_k: every block-FP8
checkpoint kvplan has read is square.
"""

from __future__ import annotations

from math import gcd

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.engines.versions import parse_version
from kvplan.planning.deploy import stage_ranges
from kvplan.readers.mlp_layout import expert_width, most_moe_layers

REFINES = (0, 29, 0)  # vLLM 0.29.0: scales refined to a finer block where one of >= 32 fits
MIN_REFINED = 32


def exact_expert_width(model) -> int | None:
    """One expert's intermediate width where the parameter counts give it exactly (readers.mlp_layout.expert_width),
    None otherwise."""
    width = expert_width(model, exact=True)
    # the spec's per-token MLP width is top_k x the expert's (most readers) or the expert's own (MiniMax's): a
    # cross-check that the division found the width, not a multiple of it
    ok = width and model.intermediate_size in (width, model.params.experts_per_token * width)
    return width if ok else None


def _shard(model, dep, refuse: bool = True) -> tuple[int, int, int] | None:
    """(block, expert width, ranks it is split over) of a block-FP8 MoE checkpoint split over more than one rank; None
    where the rule does not apply, or (not `refuse`) where the expert width is not read exactly."""
    q = model.quantization
    if q.quant_method != "fp8" or q.group_size <= 0 or not model.params.experts or q.experts_method not in ("", "fp8"):
        return None
    split = 1 if dep.ep > 1 else dep.tp * dep.dp
    if split == 1:
        return None
    width = exact_expert_width(model)
    if width is None:
        if not refuse:
            return None
        raise KvplanError(f"{model.name}: its expert width does not follow exactly from its parameter counts, so "
                          f"kvplan cannot check the engine's FP8 block rule for {arg('tp')} {dep.tp}",
                          EXIT_USAGE, param="tp", value=dep.tp)
    return q.group_size, width, split


def check(model, dep, engine: str, version: str) -> None:
    """A one-line refusal where `engine` (vllm or sglang) at `version` refuses this block-FP8 MoE split (module
    docstring)."""
    got = _shard(model, dep)
    if got is None:
        return
    block, width, split = got
    shard = width // split
    if width % split:
        raise KvplanError(f"{model.name} at {arg('tp')} {dep.tp}: its {width}-wide experts do not split evenly over "
                          f"{split} ranks", EXIT_USAGE, param="tp", value=dep.tp)
    if shard % block == 0:
        return
    if engine == "vllm" and parse_version(version) >= REFINES:
        finer = gcd(block, shard, model.hidden_size)
        if finer >= MIN_REFINED:
            return
        why = (f"no finer block of {MIN_REFINED} or more fits (gcd({block}, {shard}, {model.hidden_size}) = {finer}; "
               "vLLM refines the scales from 0.29.0 where one does)")
    else:
        why = "vLLM refines the scales from 0.29.0" if engine == "vllm" else "SGLang (CUDA) does not pad or refine it"
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    raise KvplanError(f"{name} {version} refuses {model.name} at {arg('tp')} {dep.tp}: each rank's share of the "
                      f"{width}-wide experts is {width} / {split} = {shard}, not a multiple of the checkpoint's "
                      f"{block} x {block} FP8 block (\"The output_size of gate's and up's weight = {shard} is not "
                      f"divisible by weight quantization block_n = {block}.\"); {why}; expert parallelism ({arg('ep')} "
                      f"{dep.tp * dep.dp}) keeps every expert whole", EXIT_USAGE, param="tp",
                      value=dep.tp)


def _scales(experts: int, width: int, hidden: int, block: int) -> int:
    """fp32 bytes of `experts` experts' block scales at `block`: w13 [E, 2 x cdiv(I, b), cdiv(H, b)] and w2
    [E, cdiv(H, b), cdiv(I, b)] (vLLM 0.33.0 wheel `quantization/fp8.py` Fp8MoEMethod.create_weights L619-632)."""
    return 4 * experts * 3 * cdiv(width, block) * cdiv(hidden, block)


def refined_scale_bytes(model, dep, version: tuple[int, ...]) -> int:
    """Bytes per rank vLLM 0.29.0+ holds in refined MoE block scales beyond the rank's 1/split share of the
    checkpoint's: where the expert shard is not whole blocks and gcd(block, shard, hidden) >= 32, the scale parameters
    are allocated on that finer grid and the checkpoint's upsampled into them (0.29.0 wheel `quantization/fp8.py`
    L567-578 alike; 0.33.0 wheel `fused_moe/oracle/fp8.py`
    refine_fp8_moe_block_shape L292-320, `quantization/fp8.py` L554-564 and L619-632 for the shapes; the default
    moe_backend 'auto' refines: resolve_fp8_moe_weight_block_shape L355-396; an explicit non-Triton backend pads the
    shard to whole blocks instead, not modelled). Qwen3-235B-A22B-FP8 at tp 8: shard 1536 / 8 = 192, block 64;
    a layer's 128 experts 128 x 3 x 3 x 64 x 4 B = 294,912 B a rank where the 1/8 share is 589,824 / 8 = 73,728:
    +221,184 B x 94 layers = 20,791,296 B. The layers are the MoE layers of the pipeline stage holding the most
    (readers.mlp_layout.most_moe_layers: DeepSeek's dense layers first)."""
    got = refined_scale_note(model, dep, version)
    return got[1] if got else 0


def _refinable(model, dep) -> tuple[int, int, int, int] | None:
    """(block, expert width, ranks, refined block) where vLLM refines the scales of this split, else None."""
    got = _shard(model, dep, refuse=False)
    if got is None:
        return None
    block, width, split = got
    if width % split or (width // split) % block == 0:
        return None
    finer = gcd(block, width // split, model.hidden_size)
    return (block, width, split, finer) if finer >= MIN_REFINED else None


def refined_scale_note(model, dep, version: tuple[int, ...]) -> tuple[int, int] | None:
    """(the refined block, its bytes per rank) where refined_scale_bytes counts any, else None (the split's
    refinement read once for both)."""
    got = None if version < REFINES else _refinable(model, dep)
    if got is None:
        return None
    block, width, split, finer = got
    experts, hidden = model.params.num_experts, model.hidden_size
    per_layer = _scales(experts, width // split, hidden, finer) - _scales(experts, width, hidden, block) // split
    extra = max(0, per_layer) * most_moe_layers(model, stage_ranges(model, dep))
    return (finer, extra) if extra else None
