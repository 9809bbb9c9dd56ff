"""vLLM's CUDA-graph memory estimate for one rank: the capture lists, the first captures and the per-graph cost.

vLLM measures this term rather than computing it, so kvplan follows its measurement step by step and fits only what
the driver decides. `v1/worker/gpu_model_runner.py` profile_cudagraph_memory (identical in the 0.18.0 L5593,
0.19.0 L5862-5960 and 0.20.0 L5949 wheels): after `empty_cache`, for each mode in the order the dispatcher gives,
PIECEWISE first, then FULL (`v1/cudagraph_dispatcher.py` get_capture_descs, 0.19.0 L325-349), it captures the
largest size and the next one into one shared profiling pool, and reads the drop of `torch.cuda.mem_get_info()`
around each; `per_graph = max(second drop, 1 MiB)` and

    total = max(first drops) + sum over modes of per_graph x (graphs of the mode - 1)

("FULL and PIECEWISE graphs share the global pool ... take the max"). Subtracted from the KV budget from 0.20.0
(kvplan/engines/vllm/settings.py Settings.cudagraphs). What each drop holds, and so how kvplan prices it:

* The graphs of each mode are the capture sizes, vLLM's default list by release (kvplan.engines.vllm.capture_list:
  [1, 2, 4] + range(8, 256, 8) + range(256, max+1, 16) up to max_cudagraph_capture_size = min(2 x max_num_seqs x
  (1 + num_speculative_tokens), 512, max_num_batched_tokens), 1024 for gpt-oss (`models/config.py`
  GptOssForCausalLMConfig L113-133, MODELS_CONFIG_MAP L726); FULL decode graphs only up to max_num_seqs decode
  batches (`cudagraph_dispatcher.py` initialize_cudagraph_keys L204-230); none when a layer's attention
  supports no full graph (chunked local attention: AttentionCGSupport.NEVER, `chunked_local_attention.py` L39-48,
  and vLLM makes the model PIECEWISE, `gpu_model_runner.py` L6310-6330).
* The first PIECEWISE capture, at the largest size, grows the pool by the forward pass's activations (the first
  allocations in an empty pool) and the driver's memory for its piece graphs: a fitted constant
  (`CUDAGRAPH_FIRST_PIECEWISE`); kvplan has no rule for the pool's growth there.
* Where AWQ's own kernel runs (vLLM's --quantization awq, engine option awq_kernel=awq), the first PIECEWISE capture
  also holds a rank's largest linear dequantized to fp16, which AWQConfig builds from 256 tokens a step
  (kvplan.engines.vllm.awq_dequant; `awq.py` 0.19.0 L268-273): the constant plus those bytes.
* The first FULL capture runs second, in the same pool: the activations find the blocks the PIECEWISE capture
  freed, so it adds what they cannot hold, FA3's fp32 split-KV accumulator (`fa_split_accumulator`, allocated only
  in FULL graphs: `v1/attention/backends/flash_attn.py` max_num_splits L326-346, L391-404), and one more graph:
  accumulator + per_graph. (Before this module kvplan took max(PIECEWISE constant, accumulator), which left the
  graph out and let the constant outweigh a small model's accumulator: Gemma-2-2B printed 0.52 GiB, 128 MiB of
  accumulator + 4 MiB + 50 x 8 MiB, where that form gave 0.63.)
* The second capture of a mode needs no new pool memory (a smaller batch fits the freed blocks), so its drop is the
  driver's memory for the new graph: whole 2 MiB pages, as every drop the training logs imply is an even number
  of MiB (docs/budget.md round 31). kvplan rounds a cost per decoder layer up to 2 MiB, per mode. The cost per
  layer grows with the kernels a layer launches: linears that quantize their activations on the fly (FP8 and INT8
  W8A8: a quantization kernel before each GEMM, `compressed_tensors_w8a8_*.py` apply_weights) and MoE layers
  (routing, alignment, two grouped GEMMs and the reduction, `fused_moe.py`) carry a fitted surcharge. What the
  driver allocates per kernel is not in any source kvplan reads; the three costs are fitted on the training
  split (`benchmarks/budget_corpus.py --calibrate`), and the plan's note says so (`graph_notes`).
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.hardware.facts import vendor_of
from kvplan.engines.vllm import awq_dequant
from kvplan.engines.vllm.capture_list import capture_list, decode_sizes, grid, list_note
from kvplan.engines.vllm.runner import graph_note
from kvplan.model.layers import Kind, has_mla
from kvplan.model.recurrent import recurrent_states
from kvplan.planning.deploy import stage_ranges

MIB = 2**20

# --- fitted on the training split's Hopper (FA3) records (benchmarks/budget_calibrate.py _fit_cudagraphs) ----
CUDAGRAPH_BASE = 21 * MIB  # the older two-constant form (no model at hand): first capture, pools
CUDAGRAPH_PER_LAYER = 23 * MIB  # ... and a cost per decoder layer on the rank
CUDAGRAPH_FIRST_PIECEWISE = 209 * MIB  # the first PIECEWISE capture (activations + its piece graphs)
CUDAGRAPH_PER_GRAPH_LAYER = 0.126 * MIB  # one further graph of one mode, per decoder layer, before the 2 MiB page
CUDAGRAPH_ACT_QUANT = 0.4  # surcharge per layer whose linears quantize activations (FP8 / INT8 W8A8)
CUDAGRAPH_MOE = 0.35  # surcharge per layer of a MoE model
# --- from the source ----------------------------------------------------------------------------------
DRIVER_PAGE = 2 * MIB  # mem_get_info moves in whole 2 MiB pages
MIN_PER_GRAPH = MIB  # "Use at least 1 MiB per graph for driver overhead" (gpu_model_runner.py 0.19.0 L5922-5923)
FA_MAX_SPLITS = 32  # flash_attn.py _DEFAULT_MAX_NUM_SPLITS_FOR_CUDA_GRAPH
_FA_SPLIT_KINDS = (Kind.FULL, Kind.SLIDING, Kind.MLA)
_ACT_QUANT = ("fp8", "int8")  # weight formats whose vLLM linears quantize activations per token before the GEMM


capture_sizes = grid  # vLLM's default cudagraph_capture_sizes grid up to a largest size, under its older name


def full_graphs(model) -> bool:
    """Whether vLLM captures FULL decode graphs for this model: not when a layer's attention supports
    none (chunked local attention), which makes the whole model PIECEWISE."""
    return not any(la.kind == Kind.CHUNKED for la in model.layers)


def cudagraph_counts(model, max_num_seqs: int, tokens: int | None = None, v: tuple = (0, 21, 0),
                     gpu=None, asked: int | None = None) -> tuple[list[int], list[int]]:
    """(PIECEWISE sizes, FULL sizes) vLLM release v captures for this model under FULL_AND_PIECEWISE: its default
    capture list (kvplan.engines.vllm.capture_list: the drafter's factor, the max_num_batched_tokens clamp and
    append; `asked`, a user's max_cudagraph_capture_size), and the FULL decode graphs among it."""
    piecewise = capture_list(model, max_num_seqs, tokens, v, gpu, full_graphs(model), asked)
    return piecewise, full_sizes(model, piecewise, max_num_seqs)


def full_sizes(model, sizes: list[int], max_num_seqs: int) -> list[int]:
    """The capture sizes that get a FULL decode graph: those from decode_query_len (1 + num_speculative_tokens) to
    decode_query_len x max_num_seqs (cudagraph_dispatcher.py 0.21.0 L204-230), where the model takes FULL graphs."""
    return decode_sizes(model, sizes, max_num_seqs) if full_graphs(model) else []


def _fa_split_kv(layer) -> bool:
    """Whether the layer's decode runs FA3's split-KV path, whose accumulator FULL graphs capture."""
    return layer.kind in _FA_SPLIT_KINDS and not (getattr(layer, "sinks", False) or getattr(layer, "mm_prefix", False))


def fa3_graphs(gpu) -> bool:
    """Whether FULL graphs capture FA3's split-KV accumulator on this GPU: FA3 is vLLM's choice on capability 9.x
    only (`v1/attention/backends/fa_utils.py` get_flash_attn_version 0.19.0 L74-83: FA3 on Hopper, FA4 on 10.x, FA2
    otherwise), and only FA3's metadata builder fixes `max_num_splits` for CUDA graphs (`flash_attn.py` L305,
    L326-346: `aot_schedule = fa_version == 3`); FA2 picks its own splits, one for a batch of 256+ decode rows
    (flash-attention's num_splits_heuristic: one split once batch x heads reaches 0.8 x the SMs). Before 8.0 there is
    no FLASH_ATTN at all. Capability 10.x (FlashInfer first, FA4) and a GPU without a compute capability keep the
    accumulator, as before these facts were read (the H100 corpus's answer)."""
    cap = getattr(gpu, "capability", None)
    if cap is None or vendor_of(gpu) != "NVIDIA":
        return True
    return cap[0] in (9, 10)


def fa_split_accumulator(model, tp: int, tokens: int, gpu=None) -> int:
    """Bytes of FA3's fp32 split-KV output accumulator for `tokens` decode queries on one rank (0 off FA3:
    fa3_graphs)."""
    if not tokens or not fa3_graphs(gpu):
        return 0
    heads = [getattr(la, "attention", la) for la in model.layers]  # Falcon-H1's ParallelHybrid: its attention
    attn = next((la for la in heads if _fa_split_kv(la)), None)
    if attn is None:
        return 0
    v_dim = getattr(attn, "kv_lora_rank", 0) or getattr(attn, "v_head_dim", 0) or getattr(attn, "head_dim", 0)
    return FA_MAX_SPLITS * 4 * tokens * max(1, model.num_attention_heads // tp) * v_dim


def activation_quantized(model, weight_dtype: str | None = None) -> bool:
    """Whether the model's linears quantize their activations before each GEMM (FP8 or INT8 weights, W8A8);
    MXFP4 / NVFP4 / INT4 weight-only kernels and experts-only formats do not count."""
    q = model.quantization
    method = weight_dtype or q.method
    return method in _ACT_QUANT and not (weight_dtype is None and q.experts_only)


def per_graph_cost(model, layers_on_rank: int, weight_dtype: str | None = None) -> int:
    """The drop one further graph of one mode costs (bytes): a cost per decoder layer, with the surcharges for
    activation-quantized linears and MoE layers, rounded up to the driver's 2 MiB page; at least 1 MiB."""
    weight = 1 + CUDAGRAPH_ACT_QUANT * activation_quantized(model, weight_dtype)
    weight += CUDAGRAPH_MOE * bool(model.params.num_experts and model.params.experts_per_token)
    return max(round_up(int(CUDAGRAPH_PER_GRAPH_LAYER * layers_on_rank * weight), DRIVER_PAGE), MIN_PER_GRAPH)


def cudagraph_estimate(layers_on_rank: int, model=None, tp: int = 1, max_num_seqs: int = 1024, gpu=None,
                       weight_dtype: str | None = None, shape: tuple = (), tokens: int | None = None,
                       v: tuple = (0, 21, 0), asked: int | None = None, awq_forced: bool = False) -> int:
    """vLLM's "Estimated CUDA graph memory" for one rank (bytes), whether or not it is subtracted.

    With the model: the larger first capture (the PIECEWISE constant, or FA3's accumulator plus one FULL graph)
    and a per-graph cost for each further graph of each mode; without it, the older two-constant form (a base
    plus a cost per decoder layer). `shape`, ((mode, graphs, largest), ...) as a log's "Profiling CUDA graph
    memory:" line states it or its graph mode implies (kvplan.engines.vllm.log_graphs), replaces the counts kvplan
    derives from max_num_seqs, max_num_batched_tokens (`tokens`), release v and a user's max_cudagraph_capture_size
    (`asked`) (`logged_counts`); a shape with no PIECEWISE or FULL graph is priced at 0. `awq_forced`: AWQ's own
    kernel runs (kvplan.engines.vllm.awq_dequant), whose fp16 weight copy the first PIECEWISE capture holds."""
    if model is None:
        return CUDAGRAPH_BASE + CUDAGRAPH_PER_LAYER * layers_on_rank
    n_piecewise, n_full, full_top, pw_top = _graph_counts(model, shape, max_num_seqs, tokens, v, gpu, asked)
    if shape and not (n_piecewise or n_full):  # no decoder graphs (cudagraph_mode NONE): vLLM's estimate is 0
        return 0
    per_graph = per_graph_cost(model, layers_on_rank, weight_dtype)
    first_full = fa_split_accumulator(model, tp, full_top, gpu) + per_graph if n_full else 0
    first_piecewise = CUDAGRAPH_FIRST_PIECEWISE + awq_dequant.dequant_bytes(model, tp, pw_top, awq_forced)
    further = max(0, n_piecewise - 1) + max(0, n_full - 1)
    return int(max(first_piecewise, first_full) + per_graph * further)


def _graph_counts(model, shape: tuple, max_num_seqs: int, tokens, v: tuple, gpu, asked) -> tuple[int, int, int, int]:
    """(PIECEWISE graphs, FULL graphs, largest FULL capture, largest PIECEWISE capture) in tokens: the logged
    shape's (`logged_counts`), else kvplan's lists (`cudagraph_counts`)."""
    if shape:
        return (*logged_counts(shape), next((top for mode, _, top in shape if mode == "PIECEWISE"), 0))
    piecewise, full = cudagraph_counts(model, max_num_seqs, tokens, v, gpu, asked)
    return len(piecewise), len(full), max(full, default=0), max(piecewise, default=0)


def first_capture_tokens(model, st) -> int:
    """The largest PIECEWISE capture the plan prices (the logged shape's, else kvplan's list; 0: none)."""
    return _graph_counts(model, st.graph_shape, st.max_num_seqs, st.max_num_batched_tokens, st.v, st.gpu,
                         st.max_capture)[3]


def awq_note(model, tp: int, st) -> tuple[str, ...]:
    """The line on AWQ's dequantized weight in the first capture, where the plan forces AWQ's own kernel."""
    if not getattr(st, "awq_forced", False):
        return ()
    line = awq_dequant.note(model, tp, first_capture_tokens(model, st))
    return (line,) if line else ()


def logged_counts(shape: tuple) -> tuple[int, int, int]:
    """(PIECEWISE graphs, FULL graphs, largest FULL capture in tokens) from a logged shape; a mode the log does not
    list captures none (vLLM prints only modes with graphs: `if descs`). The ENCODER group (0.23.0+) is no decoder
    graph: kvplan does not price it (the check-log row says so)."""
    by_mode = {mode: (n, top) for mode, n, top in shape}
    n_full, full_top = by_mode.get("FULL", (0, 0))
    return by_mode.get("PIECEWISE", (0, 0))[0], n_full, full_top


def capture_note(model, st) -> tuple[str, ...]:
    """The plan's line on the capture list kvplan prices (its size and largest, and the rule), where vLLM subtracts
    its graph estimate and no log states the shape (kvplan.engines.vllm.capture_list.list_note)."""
    v2 = graph_note(model, st.v, st.gpu, st.eager, st.weight_dtype, getattr(st, "v1_fallback", False))
    if v2 or not st.cudagraphs or st.graph_shape:
        return ()
    return (list_note(model, st.max_num_seqs, st.max_num_batched_tokens, st.v, st.gpu, full_graphs(model),
                      st.max_capture),)


def graph_notes(model, dep, st) -> tuple[str, ...]:
    """What the plan says of the CUDA-graph term: priced by a fit where vLLM subtracts its measurement, or why it
    subtracts 0 (the V2 runner of 0.22-0.28: kvplan.engines.vllm.runner)."""
    v2 = graph_note(model, st.v, st.gpu, st.eager, st.weight_dtype, getattr(st, "v1_fallback", False))
    if v2 or not st.cudagraphs:
        return (v2,) if v2 else ()
    layers = max(b - a for a, b in stage_ranges(model, dep))  # the rank overhead_terms prices
    mib = per_graph_cost(model, layers, st.weight_dtype) / MIB
    fitted = (f"CUDA-graph estimate: vLLM measures it (free-memory drops of two captures per mode); kvplan prices "
              f"{mib:.0f} MiB a further graph, a per-layer driver cost fitted on H100 logs of 0.19, not derived")
    notes = (fitted, *((off,) if (off := off_fa3_note(st.gpu, model)) else ()), *awq_note(model, dep.tp, st))
    if not has_recurrent_layers(model):
        return notes
    return (*notes, "CUDA-graph estimate of a hybrid: the fit saw attention layers only; a recurrent layer "
                    "launches its own kernels (vLLM's GDN layer: causal_conv1d_update, the gated delta-rule update, "
                    "a gated norm), priced here as an attention layer's. One 0.19.0 log (a Qwen3.5-27B fine-tune, "
                    "tp 4, 80 GB Hopper) printed 1.59 GiB where kvplan gives 1.18: expect the estimate low and the "
                    "KV pool high by about the difference")


# The training logs off FA3 that print vLLM's estimate, kvplan's error on each (benchmarks/budget_corpus.py --train;
# tests/test_vllm_graphs_off_fa3.py ties these to the rows): the fit cannot be read off them, they differ in more
# than the backend (docs/budget.md round 36)
OFF_FA3_TRAINING = (("A100, tp 2, AWQ's own kernel forced, its fp16 copy priced", -14), ("RTX A5000", 34),
                    ("T4, 0.30's V2 runner", 57))


def off_fa3_note(gpu, model=None) -> str | None:
    """The plan's caveat where vLLM runs no FlashAttention 3 (an NVIDIA GPU whose profile gives a capability other
    than 9.x: FA3 is vLLM's only on 9.x, `fa_utils.py` get_flash_attn_version 0.19.0 L74-83; from the default
    backend order, `platforms/cuda.py` _get_backend_priorities 0.21.0 L131-147, FlashInfer on 10.x, FlashAttention 2
    from 8.0, below it Triton; an MLA model's backends are others): the per-graph cost was fitted on FA3 (H100)
    logs only."""
    cap = getattr(gpu, "capability", None)
    if cap is None or vendor_of(gpu) != "NVIDIA" or cap[0] == 9:
        return None
    backend = "FlashInfer" if cap[0] == 10 else "FlashAttention 2" if cap >= (8, 0) else "Triton attention"
    if model is not None and has_mla(model.layers):
        backend = "an MLA backend other than FA3's"
    misses = ", ".join(f"{pct:+d}% ({what})" for what, pct in OFF_FA3_TRAINING)
    return (f"CUDA-graph estimate off FlashAttention 3: on compute capability {cap[0]}.{cap[1]} vLLM's default "
            f"attention backend is {backend}, whose graphs the per-graph fit (H100, FA3) never saw; the training "
            f"logs off FA3 miss by {misses}: an extrapolation")


def has_recurrent_layers(model) -> bool:
    """Whether the model has recurrent-state layers (Mamba, GDN): the CUDA-graph fit's per-layer cost describes
    attention layers only, so such a model's estimate is an extrapolation (graph_notes says so) and its logs stay
    out of the fit (benchmarks/budget_calibrate.py)."""
    return bool(recurrent_states(model.layers))  # Falcon-H1's mixer too (a ParallelHybrid layer)
