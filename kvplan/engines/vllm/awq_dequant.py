"""AWQ's own kernel (vLLM's AWQConfig, `--quantization awq`): the fp16 copy of a weight its first CUDA graph holds.

Why: vLLM runs an AWQ checkpoint with Marlin where it can, but `--quantization awq` forces AWQConfig ("Detected that
the model can run with awq_marlin, however you specified quantization=awq explicitly, so forcing awq", 0.19.0 wheel
`model_executor/layers/quantization/awq_marlin.py` L248-256). AWQConfig's linear method, for a step of 256 tokens or
more, dequantizes the whole weight to the activation dtype and multiplies with torch.matmul (`awq.py` 0.19.0
L268-273: `FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256`, `ops.awq_dequantize(...)`). vLLM profiles
its CUDA-graph memory by capturing the largest size first into an empty pool (kvplan.engines.vllm.cudagraphs), so
that capture holds a rank's largest dequantized linear beside its activations (the smaller ones reuse its block,
freed after each matmul); the second capture of a mode reuses it too, so only the first capture grows.

Priced for dense attention models (qkv, o, gate_up and down, each split over tp as vLLM splits them) and, from
0.10.0, MoE models with such attention. AWQConfig sends a MoE layer's routed experts to AWQ Marlin's MoE method, or
to MoeWNA16 where Marlin does not take the layer (`get_quant_method`'s FusedMoE / RoutedExperts branch: 0.10.0
awq.py L88-115, 0.11.0 L88-116, 0.12.0 L107-135, 0.19.0 L107-140, 0.23.0 L109-142); both multiply the int4 weights
in place (fused_marlin_moe; MoeWNA16's fused_experts on w13_qweight / w2_qweight, 0.19.0 moe_wna16.py L365-390), so
the experts add no fp16 copy and weigh as under Marlin. AWQLinearMethod's copy is then the largest of the other
linears: attention, dense-MLP layers and shared experts (widths from the parameter counts, exactly or refused). The
router is not among them: kvplan holds it in 16 bits (ParamCounts.router), as vLLM builds it with quant_config=None
(0.19.0 mixtral.py L120-125, qwen2_moe.py L135-139) or the checkpoint's modules_to_not_convert keeps it (Qwen3-MoE
passes its quant_config, qwen3_moe.py L176-182); at hidden x experts it is far below any attention projection. A
role the exclusion list keeps whole is left out (UnquantizedLinearMethod). Refused: a MoE model whose dense-MLP or
shared-expert width the parameter counts do not give exactly (a check-log run notes it rather than stopping), a MoE
model before 0.10.0 (its FusedMoE branch not read), MLA and recurrent models (MLA's absorbed kv_b_proj and GDN's
projections run in ops whose forced path was not read), and from 0.24.0, where `awq` loads as AutoAWQConfig
(kvplan.engines.vllm.gdn_ba), whose forced path was not read. The engine option is `awq_kernel` (`marlin`, vLLM's
default; `awq`, the forced kernel); a check-log run takes it from the log's `quantization: awq`.
"""

from __future__ import annotations

from kvplan.engines.options import _bad_opt, opt_choice
from kvplan.model.layers import Kind
from kvplan.readers.mlp_layout import dense_mlp_layers, exact_mlp_width, gated_mlp, mlp_width

THRESHOLD = 256  # tokens a step from which AWQConfig dequantizes (awq.py 0.19.0 L269)
READ_BEFORE = (0, 24, 0)  # AutoAWQConfig from here (not read)
MOE_READ_FROM = (0, 10, 0)  # the first release whose AWQConfig FusedMoE branch is read (awq.py L88-115)
KERNELS = ("marlin", "awq")
_DENSE_KINDS = (Kind.FULL, Kind.SLIDING, Kind.CHUNKED)


def unpriced(model, weight_dtype: str | None, v: tuple) -> str | None:
    """Why the forced kernel's copy is not priced for this model and release (None where it is): weights that are not
    4-bit AWQ (or int4 planned on a 16-bit model's shapes), a model whose AWQ path kvplan did not read, a release
    from 0.24.0."""
    q = model.quantization
    if (weight_dtype or q.method) != "int4" or q.quant_method not in ("", "awq"):
        return "needs 4-bit AWQ weights (an AWQ checkpoint, or int4 weights planned)"
    if v >= READ_BEFORE:
        return ("is read through vLLM 0.23 only (0.24.0 loads AWQ as AutoAWQConfig, whose forced path kvplan "
                "did not read)")
    if any(la.kind not in _DENSE_KINDS for la in model.layers):
        return ("is read for models with plain attention layers only (MLA's and recurrent layers' projections run "
                "in ops whose forced path kvplan did not read)")
    if model.params.num_experts and v < MOE_READ_FROM:
        return "is read for MoE models from vLLM 0.10.0 only (AWQConfig's expert method before it was not read)"
    loose = _loose_widths(model)
    if loose:
        return (f"needs the {' and '.join(loose)} width, which does not follow exactly from the model's parameter "
                "counts")
    return None


def _loose_widths(model) -> list[str]:
    """The MLPs largest_linear reads a width of (a MoE model's dense MLPs and shared experts, unless kept whole) whose
    width the parameter counts do not give exactly: said by `unpriced`, so a check-log run notes it instead of
    stopping at largest_linear's refusal."""
    p = model.params
    if not p.num_experts:
        return []
    n_dense, out = dense_mlp_layers(model), []
    if n_dense and not _kept_whole(model, "mlp") and not mlp_width(model, p.mlp, n_dense):
        out.append("dense MLP")
    shared = p.shared_experts and p.num_moe_layers and not _kept_whole(model, "shared_experts")
    if shared and not mlp_width(model, p.shared_experts, p.num_moe_layers, shared=True):
        out.append("shared experts'")
    return out


def forced(opts: dict, model, weight_dtype: str | None, v: tuple) -> bool:
    """Whether the plan runs AWQConfig's own kernel (engine option awq_kernel=awq); a one-line refusal where it is
    asked and `unpriced` says why it cannot be priced."""
    if opt_choice(opts, "awq_kernel", "marlin", KERNELS) != "awq":
        return False
    why = unpriced(model, weight_dtype, v)
    if why:
        raise _bad_opt("awq_kernel", "awq", why)
    return True


def largest_linear(model, tp: int) -> int:
    """Elements of a rank's largest linear weight that AWQLinearMethod dequantizes: qkv, o, gate_up (merged; up alone
    where the MLP is not gated, kvplan.readers.mlp_layout.gated_mlp) or down, split over tp; a MoE model's dense-MLP
    layers and shared experts in place of the routed experts (module docstring); roles kept whole left out."""
    p, hidden = model.params, model.hidden_size
    per_width = hidden * (2 if gated_mlp(model) else 1)  # gate_up (or up) per unit of width; down is hidden x I
    sizes = [0]
    if not _kept_whole(model, "attention"):
        attn = next(la for la in model.layers if la.kind in _DENSE_KINDS)
        q_width = model.num_attention_heads * attn.head_dim
        sizes += [hidden * (q_width + 2 * attn.num_kv_heads * attn.head_dim), q_width * hidden]
    if not p.num_experts:
        sizes.append(0 if _kept_whole(model, "mlp") else per_width * model.intermediate_size)
        return max(sizes) // tp
    why = "price AWQ's dequantized weight (awq_kernel awq) at"
    n_dense = dense_mlp_layers(model)
    if n_dense and not _kept_whole(model, "mlp"):
        sizes.append(per_width * exact_mlp_width(model, p.mlp, n_dense, "dense MLP", tp, why))
    if p.shared_experts and p.num_moe_layers and not _kept_whole(model, "shared_experts"):
        width = exact_mlp_width(model, p.shared_experts, p.num_moe_layers, "shared experts'", tp, why, shared=True)
        sizes.append(per_width * width)
    return max(sizes) // tp


def _kept_whole(model, role: str) -> bool:
    """Whether the exclusion list keeps every parameter of `role` in 16 bits (built unquantized: no fp16 copy)."""
    total = getattr(model.params, role, 0)
    return bool(total) and model.quantization.kept_of(role) >= total


def dequant_bytes(model, tp: int, largest_tokens: int, forced_awq: bool) -> int:
    """Bytes of the fp16 weight AWQConfig dequantizes in a capture of `largest_tokens` (0 below 256 tokens, or where
    Marlin runs)."""
    if not forced_awq or largest_tokens < THRESHOLD:
        return 0
    return 2 * largest_linear(model, tp)


def note(model, tp: int, largest_tokens: int) -> str | None:
    """The plan's line on the term where the forced kernel runs, its bytes in MiB (None below 256 tokens)."""
    b = dequant_bytes(model, tp, largest_tokens, True)
    if not b:
        return None
    return (f"CUDA-graph estimate: AWQ's own kernel (awq_kernel awq, vLLM's quantization=awq) dequantizes each "
            f"weight to fp16 from 256 tokens a step, so the first capture ({largest_tokens} tokens) holds a rank's "
            f"largest linear, {b / 2**20:.0f} MiB, beside its activations (awq.py 0.19.0 L268-273)")
