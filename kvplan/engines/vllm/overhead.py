"""vLLM's non-KV memory per GPU, term by term, modelled from the engine's source and calibrated on logs.

vLLM sizes the KV cache as `total x gpu_memory_utilization - weights - torch peak increase of the
profile run - non-torch increase` (`vllm/v1/worker/gpu_worker.py` determine_available_memory, v0.11.0
L222-300; v0.19.0 prints each term at DEBUG: "Total non KV cache memory: ...; torch peak memory
increase: ...; non-torch forward increase memory: ...; weights memory: ..."), minus the CUDA-graph
estimate where the release subtracts it (kvplan/engines/vllm/engine.py Settings.cudagraphs). This module
models the three non-weight terms and what the loaded weights gain over the checkpoint (the MXFP4
kernel padding and the RoPE cos/sin tables: the `weights_repack` term); `overhead_terms` is the one
entry point (vllm.overhead calls it).

1. Activation peak (`gpu_model_runner.py` profile_run, v0.11.0-v0.19.0): one dummy forward pass of
   `max_num_batched_tokens` tokens (T), then `_dummy_sampler_run` over the last hidden state of each of
   min(max_num_seqs, T) requests (S): fp32 logits of S x vocab (gathered whole on every tensor-parallel
   rank), their softmax / top-k-top-p buffers and the sampled-token bookkeeping. Modelled as
       peak = SAMPLER x S x vocab + Triton buffer + FORWARD_MLP x T x width/tp + FORWARD_HIDDEN x T x hidden
   (bytes per element of each product; the Triton top-k/top-p buffer of 0.17+, min(next_pow2(min(SMs, S)), SMs)
   fp32 vocabulary rows, source-derived: kvplan/engines/vllm/sampler.py), plus for MoE models fused_moe's three
   intermediate caches
   (MOE_WORKSPACE x T x top_k x (3 x I_e/tp + H)). Pipeline stages before the last run no sampler.
   The legacy V0 engine (< 0.8, eager, T = max_model_len without chunked prefill) keeps the
   planner's eager form. The V2 model runner (0.22-0.33.x as read, kvplan.engines.vllm.runner.priced_v2) samples
   the same S rows without top-k/top-p: 6 B per logit (2 B on 0.26.x and 0.28-0.32), and 0.33 a second time with
   every sampling feature on (14 B in FlashInfer's sampler), source-derived (kvplan.engines.vllm.sampler); its
   forward pass and non-torch terms keep V1's fits (the plan says so), and it profiles no encoder before 0.27.0.
2. Non-torch increase (CUDA/NCCL allocations outside PyTorch up to the end of the profile run): a
   constant for one GPU, larger with tensor parallelism (NCCL's buffers, before 0.11.0 the custom all-reduce's where
   built: custom_ar.py; FlashInfer's all-reduce fusion workspace from 0.17.0) and with pipeline parallelism alone,
   plus what the CUDA-graph
   profiling of 0.18.0-0.26.x leaves behind inside the window (kvplan/engines/vllm/non_torch.py). From 0.27.0 the
   budget is the free-memory drop since start-up, which also holds V2's states and V1's input buffers
   (`runner_states`, `runner_buffers`), and the graph profiling is after the window.
3. CUDA graphs (`gpu_model_runner.py` v0.19.0 "Estimated CUDA graph memory: X GiB total", subtracted
   from v0.20.0 unless --enforce-eager): vLLM's own sum, step by step, in kvplan/engines/vllm/cudagraphs.py.

The constants were fitted by `benchmarks/budget_corpus.py --calibrate` on the TRAINING split of the
log corpus (tests/fixtures/logs/corpus/index.yaml; split by source, never by record) and are checked
against the held-out split by the same benchmark; tests/test_budget_corpus.py re-fits them and fails
if these values drift from what the training split gives.
"""

from __future__ import annotations

from kvplan.engines.base import parse_version
from kvplan.engines.vllm.non_torch import (  # noqa: F401  (the calibrated constants, re-exported)
    NON_TORCH_SINGLE, NON_TORCH_SINGLE_V011, NON_TORCH_TP, NON_TORCH_TP_LEGACY, NON_TORCH_TP_V011,
    V0_NON_TORCH_SINGLE, non_torch, workspace_possible)
from kvplan.engines.vllm.sampler import (  # noqa: F401  (the sampler's constants and rules, re-exported)
    SAMPLER_BYTES, SAMPLER_BYTES_V011, sampler_note, sm_count_missing, sort_sampler, triton_buffer_bytes,
    v2_capability_read, v2_sampler_bytes, v2_sm_count_missing, v2_state_bytes)
from kvplan.engines.vllm.runner import priced_v2
from kvplan.engines.vllm.mxfp4 import (  # noqa: F401  (the MXFP4 backends' rules, re-exported)
    backend_for, nvidia_capability as _nvidia_capability, weights_repack_extra)
from kvplan.engines import fp8_blocks, fp8_linear
from kvplan.engines.vllm import (awq_bits, gdn_ba, marlin_dense_pad, marlin_freed, marlin_fp8, marlin_moe_pad, v0_mla,
                                 w4a8)
from kvplan.engines.vllm.load_split import load_limit, load_tensors
from kvplan.engines.vllm.cudagraphs import (  # noqa: F401  (vLLM's CUDA-graph estimate, re-exported)
    CUDAGRAPH_BASE, CUDAGRAPH_FIRST_PIECEWISE, CUDAGRAPH_PER_GRAPH_LAYER, CUDAGRAPH_PER_LAYER, FA_MAX_SPLITS,
    capture_sizes, cudagraph_counts, cudagraph_estimate, fa3_graphs, fa_split_accumulator,
    full_graphs)
from kvplan.core.caching_allocator import allocated_rounding
from kvplan.core.intmath import round_up
from kvplan.hardware.facts import fact_missing, vendor_of
from kvplan.model.layers import Kind
from kvplan.planning.deploy import node_size, stage_ranges
from kvplan.planning.plan import activation_estimate
from kvplan.readers.rope import _DTYPE_BYTES, rope_table_bytes

GIB = 2**30
MIB = 2**20

# --- calibrated on the training split (benchmarks/budget_corpus.py --calibrate) --------------------
# Three eras of the V1 engine, as the corpus shows them: v0.19.0 logs (DEBUG breakdown, H100), v0.11.0
# (llm-d's table of v0.11 H100 logs: the sampler's profile costs ~2.7x more per logit) and releases
# before 0.11 (only the printed budget: tp > 1 non-torch is its residual). Non-torch memory has its own
# module and release boundaries from the source (kvplan/engines/vllm/non_torch.py).
# The sampler's cost per logit follows the code path (kvplan/engines/vllm/sampler.py: FlashInfer, the PyTorch sort of
# 0.11-0.16, the Triton kernel of 0.17+ with its buffer of one vocabulary row per SM, source-derived).
FORWARD_MLP_BYTES = 0.095  # per token x MLP width / tp of the profile forward pass
FORWARD_HIDDEN_BYTES = 2.69  # per token x hidden size of the profile forward pass
MOE_WORKSPACE_BYTES = 1.78  # per element of the fused-MoE caches (T x top_k x (3 x I_e/tp + H)), MoE only


def activation_peak(model, tp: int, tokens: int, max_seqs: int, last_stage: bool = True,
                    version: tuple[int, ...] = (0, 19, 0), gpu=None, flashinfer_sampler: bool | None = None,
                    mxfp4_backend: str | None = None, weight_dtype=None, v2: bool = False,
                    v1: bool | None = None) -> int:
    """Torch peak increase of vLLM's profile run on one rank (bytes); `v2`: on the V2 model runner (0.22+), whose
    sampler is priced from its source; its forward pass is V1's (both skip attention in the profile: V1 builds no
    attention metadata there, gpu_model_runner.py 0.22.0 L5712-5714; V2 passes skip_attn, gpu/model_runner.py L590).
    `v1` False: a 0.8-0.10 run on the V0 fallback (kvplan.engines.vllm.v0_fallback), priced as V0's eager run."""
    if version < (0, 8, 0) or v1 is False:
        mla = v0_mla.profile_peak(model, tp, tokens, version, weight_dtype)  # MLA's eager prefill / MoE (v0_mla)
        if mla is not None:
            return mla
        # V0 runs the profile forward eagerly: the MLP's gate+up output (2 x width), its activation and
        # four hidden-size buffers in 16 bits stay live (kvplan.planning.plan.activation_estimate), which the
        # V1 compiled graph fuses away; the V1 constants below were fitted on V1 logs only.

        return activation_estimate(model, tp, tokens=tokens, max_seqs=max_seqs)
    seqs = min(max_seqs, tokens)
    if v2:  # the V2 runner's sampler, by release (kvplan.engines.vllm.sampler: the logits, 0.33's warmup pass)
        sampler = v2_sampler_bytes(version, seqs, model.vocab_size, _DTYPE_BYTES.get(model.dtype, 2), gpu,
                                   flashinfer_sampler)
    else:
        per_logit = SAMPLER_BYTES_V011 if sort_sampler(version, flashinfer_sampler, seqs) else SAMPLER_BYTES
        buffer = triton_buffer_bytes(version, seqs, model.vocab_size, gpu, flashinfer_sampler)
        sampler = per_logit * seqs * model.vocab_size + buffer
    sampler = sampler if last_stage else 0
    forward = tokens * (FORWARD_MLP_BYTES * model.intermediate_size / tp + FORWARD_HIDDEN_BYTES * model.hidden_size)
    moe = moe_workspace_elements(model, tp, tokens, gpu, version, mxfp4_backend)
    return int(sampler + forward + MOE_WORKSPACE_BYTES * moe)


def moe_workspace_elements(model, tp: int, tokens: int, gpu=None, version: tuple[int, ...] | None = None,
                           mxfp4_backend: str | None = None) -> int:
    """Elements of fused_moe's three intermediate caches for one chunk of `tokens` (fused_moe.py
    fused_experts: (M, top_k, 2 I_e/tp) gate-up output, (M x top_k, I_e/tp) activation, (M, top_k, H)
    down output, M = min(tokens, VLLM_FUSED_MOE_CHUNK_SIZE 32768)); 0 for a dense model, and for MXFP4 experts
    in the Triton or FlashInfer kernels (kvplan.engines.vllm.mxfp4: which one, by release and GPU)."""
    p = model.params
    if not p.num_experts or not p.experts_per_token:
        return 0
    if model.quantization.method == "mxfp4" and backend_for(gpu, version, mxfp4_backend) != "marlin":
        return 0  # Hopper/Blackwell run MXFP4 experts in the Triton / FlashInfer kernels, not fused_moe
    width = model.intermediate_size // p.experts_per_token // tp  # one expert's width on this rank
    return min(tokens, 32768) * p.experts_per_token * (3 * width + model.hidden_size)


# --- weights as loaded: MXFP4 MoE experts padded for the kernel: kvplan.engines.vllm.mxfp4 (source-derived) ---


# --- weights as loaded: NVFP4 block scales swizzled for Blackwell (source-derived, not fitted) -----
# An NVFP4 linear stores uint8 [N, K/2] and fp8 scales [N, K/16] (modelopt.py ModelOptNvFp4LinearMethod
# .create_weights; compressed-tensors' nvfp4-pack-quantized alike): kvplan.model.spec counts 9/16 B a weight.
# On Blackwell (SM100 / SM120) the CUTLASS and FlashInfer FP4 GEMMs take the scales swizzled:
# swizzle_blockscale (vllm quantization/utils/nvfp4_utils.py; modelopt.py before) pads them to
# [round_up(N, 128), round_up(K/16, 4)], per expert for MoE weights. Before Blackwell vLLM runs NVFP4
# weight-only through Marlin (marlin_utils_fp4.py prepare_fp4_layer_for_marlin / prepare_moe_fp4_layer_
# for_marlin): the weights and scales are repacked in place, the same bytes, except that from 0.24.0 a dense shard
# fitting neither Marlin tile is zero-padded (kvplan.engines.vllm.marlin_fp8, in weights_repack).
# Blackwell is compute capability 10.x (B200, B300, GB200, GB300) and 12.x (RTX 5090, RTX PRO 6000):
# vLLM's FP4 GEMMs ask for capability >= 10.0 (cutlass_fp4_supported).


def _scale_pad(n: int, k: int) -> int:
    """Bytes one NVFP4 linear's fp8 scales gain when swizzled: [N, K/16] -> [N % 128, K/16 % 4]."""
    return round_up(n, 128) * round_up(k // 16, 4) - n * (k // 16)


def nvfp4_scale_padding(model, tp: int, gpu) -> int:
    """Bytes per rank the swizzled NVFP4 block scales add on Blackwell (0 elsewhere or for other formats):
    the attention projections and dense MLPs of every layer, and every expert of the MoE layers."""
    if model.quantization.method != "nvfp4" or (_nvidia_capability(gpu) or (0, 0)) < (10, 0):
        return 0
    p, hidden = model.params, model.hidden_size
    attn = [getattr(la, "attention", la) for la in model.layers]
    total = 0
    for la in (la for la in attn if la.kind in (Kind.FULL, Kind.SLIDING, Kind.CHUNKED) and hasattr(la, "head_dim")):
        q = model.num_attention_heads * la.head_dim // tp
        total += _scale_pad(q + 2 * max(1, la.num_kv_heads // tp) * la.head_dim, hidden) + _scale_pad(hidden, q)
    moe_layers = p.num_moe_layers if p.num_experts and p.experts_per_token else 0
    if moe_layers:
        width = model.intermediate_size // p.experts_per_token // tp
        total += moe_layers * p.num_experts * (_scale_pad(2 * width, hidden) + _scale_pad(hidden, width))
    dense = model.num_layers - moe_layers
    if dense and not moe_layers:  # (the few dense layers of a MoE model: their width is not in the spec)
        width = model.intermediate_size // tp
        total += dense * (_scale_pad(2 * width, hidden) + _scale_pad(hidden, width))
    return total


# --- weights as loaded: the RoPE cos/sin tables (source-derived, not fitted) ----------------------
# vllm/model_executor/layers/rotary_embedding/base.py (RotaryEmbedding.__init__, v0.11-main 2026):
# each distinct rotary embedding registers a [rows, rotary_dim] buffer of the model dtype, built on
# the GPU inside the model constructor, so "Model loading took" includes it on every rank (not
# sharded). Rows and tables per family: kvplan.readers.rope. Llama-4-Scout (10,485,760 positions x 128, bf16):
# 2.5 GiB per rank; Llama 3.1 (131,072 x 128): 32 MiB (kvplan.readers.rope.rope_table_bytes).


# --- multimodal models: the encoder outputs held through the profile run (source-derived) ---------
# vllm/v1/worker/gpu_model_runner.py profile_run (v0.8-v0.19): for a multimodal model vLLM first runs
# the vision encoder on a dummy batch of the largest items ("Encoder cache will be initialized with a
# budget of N tokens, and profiled with K image items of the maximum feature size"), keeps the outputs
# in self.encoder_cache while the text dummy run follows, then frees them; the torch peak therefore holds
# K x max_tokens_per_item embeddings of the text hidden size. The budget is
# max(max_num_batched_tokens, max_tokens_per_mm_item) (v1/core/encoder_cache_manager.py
# compute_mm_encoder_budget; SchedulerConfig sets max_num_encoder_input_tokens = encoder_cache_size =
# max_num_batched_tokens) and K = budget // max_tokens_per_item (multimodal/encoder_budget.py
# _get_max_items), so K x tokens per item is at most the budget: kvplan counts the whole budget in the
# model dtype (8192 x 5376 x 2 B = 84 MiB for Gemma 3 27B, whose 256 tokens per image divide it). The
# vision tower's own activations peak in the encoder pass, before the text run, and are not counted.
# Tokens of one image item where the config fixes them (ModelSpec.mm_tokens_per_image, read from the config's
# `mm_tokens_per_image`: 256 in google/gemma-3-*-it config.json, pan-and-scan off by default). Where a config
# does not say, the budget below is max_num_batched_tokens, a floor.


def encoder_budget(model, max_num_batched_tokens: int) -> int:
    """vLLM's encoder compute budget and cache size in tokens (v1/core/encoder_cache_manager.py
    compute_mm_encoder_budget: max(max_num_batched_tokens, the largest item's tokens))."""
    return max(max_num_batched_tokens, model.mm_tokens_per_image)


def encoder_profile_bytes(model, tokens: int, version: tuple[int, ...] = (0, 19, 0), v2: bool = False,
                          v1: bool | None = None) -> int:
    """Bytes of dummy encoder outputs vLLM's profile run holds for a multimodal model (0 otherwise). The V2 runner
    profiles no encoder before 0.27.0 (gpu/model_runner.py profile_run: 0.22.0 L588-604, 0.25.0 L648-664, 0.26.0
    L673-689 begin with the text dummy run; 0.27.0 L702-715 adds `profile_encoder_cache`, 0.28.0 L790-803,
    0.30.0 L938-955, 0.33.0 L1022-1034 keep it)."""
    if not getattr(model.params, "vision", 0) or version < (0, 8, 0) or v1 is False or (v2 and version < (0, 27, 0)):
        return 0

    return tokens * model.hidden_size * _DTYPE_BYTES.get(model.dtype, 2)


def overhead_terms(model, dep, st) -> dict[str, int]:
    """The per-GPU terms vLLM subtracts besides the weights, for the rank with the least KV room.

    `st` is vllm.Settings (version, max_num_batched_tokens, max_num_seqs, cudagraphs, gpu: its facts pick the
    MXFP4 kernels and the all-reduce workspace). The last pipeline stage runs the sampler: it is the one modelled.
    """
    v = parse_version(st.version)
    ranges = stage_ranges(model, dep)
    layers = max(b - a for a, b in ranges)
    gpu = getattr(st, "gpu", None)
    named = getattr(st, "mxfp4_backend", None)  # the MXFP4 kernel a log or the user names (kvplan.engines.vllm.mxfp4)
    wd = getattr(st, "weight_dtype", None)
    # the model runner (kvplan.engines.vllm.runner): V2's sampler and encoder profile, unless the run fell back to V1
    v2 = priced_v2(model, v, gpu, wd, getattr(st, "v1_fallback", False))
    act = activation_peak(model, dep.tp, st.max_num_batched_tokens, st.max_num_seqs, version=v, gpu=gpu,
                          flashinfer_sampler=getattr(st, "flashinfer_sampler", None), mxfp4_backend=named,
                          weight_dtype=wd, v2=v2, v1=st.v1)
    graphs = (cudagraph_estimate(layers, model, dep.tp, st.max_num_seqs, gpu, wd, getattr(st, "graph_shape", ()),
                                 st.max_num_batched_tokens, v, getattr(st, "max_capture", None),
                                 getattr(st, "awq_forced", False))
              if st.cudagraphs else 0)
    nt = non_torch(dep.tp, dep.pp, st.version, getattr(st, "eager", False), gpu, dep.dp, model,
                   st.max_num_batched_tokens, st.v1, node_size(dep, gpu))
    return {"activation_peak": act, "non_torch": nt, "cudagraphs": graphs,
            "weights_repack": (weights_repack_extra(model, dep.tp, gpu, named, v)
                               + nvfp4_scale_padding(model, dep.tp, gpu)
                               + rope_table_bytes(model) + allocator_rounding(model, dep, st)
                               + v0_mla.absorbed_bytes(model, dep.tp, v, wd, ranges)
                               + gdn_ba.extra_bytes(model, dep.tp, v, gpu, wd, ranges)
                               + fp8_blocks.refined_scale_bytes(model, dep, v)
                               + fp8_linear.partial_scale_bytes(model, dep, v)
                               + marlin_moe_pad.padded_bytes(model, dep, v, gpu)
                               + marlin_dense_pad.padded_bytes(model, dep, v, gpu)
                               - marlin_freed.freed_bytes(model, dep, v, gpu)  # GPTQ's qzeros / g_idx dropped
                               + marlin_fp8.loaded_bytes(model, dep, v, gpu)
                               + w4a8.loaded_bytes(model, dep, v, gpu)),
            "encoder_profile": encoder_profile_bytes(model, encoder_budget(model, st.max_num_batched_tokens), v, v2,
                                                     st.v1),
            # V2's penalties and grammar-bitmask states (R x vocab int32), in the budget from 0.27.0 (vllm.sampler)
            "runner_states": v2_state_bytes(v, st.max_num_seqs, model.vocab_size, _draft_tokens(model)) if v2 else 0,
            # V1's persistent input buffers and first block table, in the budget from 0.27.0 (v1_buffer_bytes)
            "runner_buffers": 0 if v2 else v1_buffer_bytes(model, v, st.max_num_batched_tokens, st.max_num_seqs,
                                                           st.max_model_len, st.block_size)}


V1_BUFFERS_COUNTED_FROM = (0, 27, 0)  # the budget's free-memory drop since the start-up snapshot (mem_utils.py L317)
_V1_TOKEN_BYTES = 4 + 8 + 8 + 1 + 8  # input_ids int32, positions, req_indices int64, is_token_ids bool, slot_mapping
_V1_REQUEST_BYTES = 4 * 8 + 8 + 1 + 4 * 6  # eight int32, one int64, one bool a request; six fp32/int32 sampling


def v1_buffer_bytes(model, version: tuple[int, ...], tokens: int, max_seqs: int, max_model_len: int,
                    block_size: int = 16) -> int:
    """Bytes of the V1 model runner's persistent GPU buffers that vLLM's budget counts (0 before 0.27.0).

    GPUModelRunner.__init__ builds them after the worker's start-up snapshot and outside the loader's window
    (gpu_worker.py 0.27.0 L395 snapshot, L423 runner; gpu_model_runner.py 0.27.0 L764-844): per token (T =
    max_num_batched_tokens, L505) input_ids, positions, req_indices, is_token_ids, inputs_embeds (T x hidden in the
    model dtype, L798-800) and query_pos (max(R + 1, T) int64, L843-844); per request (R = max_num_seqs) eight int32
    (query_start_loc one longer), one int64 and one bool vectors (L768-810) and six sampling vectors
    (gpu_input_batch.py L200-245); the input batch's first block table, R x cdiv(max_model_len, block size) int32,
    and its T int64 slot mapping (block_table.py L105-112; the placeholder block size, gpu_model_runner.py L693-715).
    Through 0.26.x
    the budget was weights + peak increase + non-torch increase, none of which holds them; from 0.27.0 it is the
    free-memory drop since the snapshot, which does (mem_utils.py 0.27.0 L317-326). Not priced: M-RoPE's and a
    drafter's buffers, and the caching allocator's rounding of these small tensors (at most a 2 MiB segment)."""
    if version < V1_BUFFERS_COUNTED_FROM:
        return 0
    embeds = tokens * model.hidden_size * _DTYPE_BYTES.get(model.dtype, 2)
    blocks = max_seqs * -(-max(max_model_len, 1) // max(block_size, 1)) * 4
    return (embeds + tokens * _V1_TOKEN_BYTES + 8 * max(max_seqs + 1, tokens) + max_seqs * _V1_REQUEST_BYTES
            + 4 + blocks)


def _draft_tokens(model) -> int:
    """The drafter's tokens a step (0 without one): V2's grammar bitmask keeps 1 + that many rows a request."""
    return getattr(getattr(model, "speculative", None), "num_speculative_tokens", 0) or 0


def allocator_rounding(model, dep, st) -> int:
    """What "Model loading took" (`max_memory_allocated` after `empty_cache`: vllm@002db495 `platforms/cuda.py`
    `get_current_memory_usage`) holds beyond the tensors' bytes: a block keeps its segment's tail of 1 MiB or less
    (kvplan.core.caching_allocator; a 31.5 MiB qkv holds 32 MiB, a 12.5 MiB o 12.5), and from 0.21.0 a tensor of
    20 MiB or more its whole segment (kvplan.engines.vllm.load_split: a 24.5 MiB o holds 26). docs/engines.md 1.2a."""
    return allocated_rounding(load_tensors(model, dep, st), load_limit(st))


def missing_facts(model, dep, st) -> tuple[str, ...]:
    """The hardware facts overhead_terms read for this plan that the GPU's profile leaves out (keys of
    kvplan.hardware.facts.ASSUMED_FACTS, what each rule assumed instead): the compute capability where an
    MXFP4 or NVFP4 checkpoint's kernel or the all-reduce workspace depends on it, the fabric where the
    workspace does, the multiprocessor count where the Triton sampler's buffer does (0.17+)."""
    gpu, wd = getattr(st, "gpu", None), getattr(st, "weight_dtype", None)
    nvidia = vendor_of(gpu) == "NVIDIA"
    v = parse_version(st.version)
    fi = getattr(st, "flashinfer_sampler", None)
    v2 = priced_v2(model, v, gpu, wd, getattr(st, "v1_fallback", False))  # V2's sampler (vllm.sampler)
    sms = v2_sm_count_missing(v, gpu, fi) if v2 else sm_count_missing(
        v, gpu, fi, min(st.max_num_seqs, st.max_num_batched_tokens))
    workspace = workspace_possible(v, dep.tp, dep.pp, dep.dp, getattr(st, "eager", False))
    kernels = nvidia and model.quantization.method in ("mxfp4", "nvfp4")
    out = []
    sampler_cc = v2 and v2_capability_read(v, gpu, fi)  # FlashInfer's sampler asks for 8.0-12.1 (0.33's V2)
    ba = gdn_ba.reads_capability(model, v, dep.tp, gpu, wd)  # AWQ's Marlin override, 0.22-0.23
    ba = ba or awq_bits.reads_capability(model, v)  # AWQ's config by capability through 0.11.2
    if (kernels or workspace or sampler_cc or ba) and nvidia and fact_missing(gpu, "compute_capability"):
        out.append("compute_capability")
    if workspace and nvidia and fact_missing(gpu, "interconnect.kind"):
        out.append("interconnect.kind")
    if sms:  # the Triton sampler's buffer (vllm.sampler)
        out.append("sm_count")
    return tuple(out)
