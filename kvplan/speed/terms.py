"""The terms of one engine step: roofline quantities in seconds, each later scaled by a coefficient.

A deployment's `Shape` holds what one tensor-parallel rank reads and computes (integers for bytes);
`features(shape, tokens, seqs, context, pairs, prefill_pairs=..., prefill_context=...)` gives one step's terms, in
the order of `TERMS`:

  weights    dense weight bytes read / bandwidth (routed experts apart); the bandwidth of weights, kv and
             experts is the profile's measured `achieved_bandwidth_bytes_per_s` where it has one, its
             datasheet `bandwidth_bytes_per_s` otherwise (kvplan.speed.shape.read_bandwidth)
  kv         KV bytes read (cached tokens x bytes per token, windows capped, DeepSeek Sparse Attention's latent
             read for at most its top-k tokens a sequence; a sequence's fixed recurrent state read and written
             back once; llama.cpp's attention scores without FlashAttention, kvplan.speed.ggml) / bandwidth
  gemm       2 x active parameters x tokens (the LM head apart) / the weight dtype's dense rate (fp8 or fp4 where the
             profile has it: `dense_flops`), the 16-bit rate otherwise (the dtype the run computes in, bf16 or fp16:
             kvplan.speed.compute_dtype; `bf16_rate` below is that rate, named for the usual case), and the modules
             a quantized checkpoint keeps in the model dtype (its exclusion list, MXFP4's dense layers, the LM head)
             at that 16-bit rate (kvplan.speed.shape.plain_gemm; gemm_seconds), as the recurrent layers'
             chunked recurrence (`recurrent_flops` a token: kvplan.speed.recurrent); the rate is the profile's measured
             `achieved_dense_flops` where it has one (kvplan.speed.compute_dtype.read_flops), the datasheet's otherwise.
             The LM head's 2 x vocab x hidden / tp (tied or not) only for the positions whose logits the step
             computes (`sampled`: one a sequence in the step, head_rows), not for every prompt token. A Shape with
             `paths` (llama.cpp: kvplan.speed.ggml) takes the rate by tokens per step, an MMQ path's MoE tiles' padded
             columns too, and a dequantizing path adds its fp16 copy's bytes to the weights term
  attn       4 x heads x head dim x query-key pairs / the bf16 rate, read the same way (quadratic in a prefill;
             a prefill query's pairs at `prefill_attn_rate` where the engine runs its context attention in FP8:
             kvplan.speed.fit.fp8_context_fmha);
             a sparse layer's heads at most top-k pairs a query, its indexer's 2 x heads x dim over every pair. The
             pairs prefill queries form (`prefill_pairs`) at the prefill width (`attn_prefill_flops_per_pair`: an MLA
             layer's heads decompressed, kvplan.speed.shape.attention_flops), and the GEMM term adds the decompression
             of the cached tokens a prefill step attends to (`decompress_flops` x `prefill_context`)
  experts    routed-expert bytes the step's tokens touch (uniform routing) / bandwidth, and where the MoE kernel tiles
             an expert's rows in blocks of `moe_block_m` (vLLM's Marlin MoE: kvplan.speed.mxfp4.moe_block_m) the
             expert's bytes again for each further block (reread_bytes); with expert
             parallelism over data-parallel replicas (attention DP + EP: TensorRT-LLM's DEP, SGLang's
             DP attention, vLLM's DP + EP), a rank's experts serve the tokens of every replica
             (`ep_replicas` x the replica's tokens), as kvplan.planning.plan.prepare's step tokens do
  grouped    experts touched x 2 x one expert's parameters / the GEMM rate: a grouped GEMM at
             t tokens per expert runs at t / (t + t0) of peak, so its time is FLOPs / rate x (1 + t0 / t),
             and the coefficient of this term is t0 (tokens per expert at half efficiency). The rate is the
             weight dtype's own (`grouped_rate`) where an engine's kernel multiplies in a wider precision
             than its weights (MXFP4 experts with bf16 or FP8 activations, kvplan.speed.mxfp4): its shortfall
             at few tokens an expert is reading those weights, the same bytes as a kernel whose activations
             match them, so the term stays the multiple of the expert read it is for every other checkpoint
             (a run that states TensorRT-LLM-gen's fused MoE or triton_kernels' matmul_ogs under SGLang has none:
             `grouped_shortfall` False, kvplan.speed.corpus.own_moe_kernel; the t0 is SGLang's Triton fused_moe's)
  comm       tensor-parallel all-reduces (2 per layer, ring: 2(n-1)/n x bytes / per-direction link
             bandwidth) and expert-parallel dispatch + combine ((n-1)/n x bytes each), the latter only where the
             experts span data-parallel replicas (ep > tp: `moves_tokens`); no tensor-parallel bandwidth term where the
             engine reduces inside the GEMMs (`fused_allreduce`: kvplan.speed.fit.FUSED_ALLREDUCE); where the
             profile gives a measured all-reduce time by message bytes for the tensor-parallel group
             (`interconnect.allreduce_us`: `allreduce`), the tensor-parallel all-reduces are that time
             (measured_allreduce, its latency within it) in place of the ring's bandwidth and latency
  latency    collective calls x the link's latency per call (NCCL's ring model, below; where the engine runs a
             one-kernel custom all-reduce on a fully connected fabric, its tensor-parallel calls below the kernel's
             size limit at `fabric_latency`, flat in n: kvplan.speed.model.CUSTOM_ALLREDUCE)
  step       1 (seconds per step: scheduling, launches, sampling); 0 where the engine schedules the next step while
             the GPU runs this one (`host_overlap`: vLLM's async scheduling, kvplan.speed.overlap)
  layer      layers on the rank (seconds per layer per step; none where llama.cpp replays the step's graph: ggml_graph)
  seq        sequences in the step (seconds per sequence per step)
  request    1 for a request's prefill (seconds per request: tokenising, admission, detokenising)
  pstep      prefill steps (seconds per prefill batch: an engine that runs its prefill batches apart from its
             decode batches pays each batch's scheduling and launch once, however many requests it holds, and one
             that runs a step with prompt tokens without its CUDA graph, TensorRT-LLM's PyTorch backend, that
             step's eager launches);
             only the coefficient sets kvplan.speed.eras.ENGINE_TERMS names fit it, every other set's is 0
  player     prefill steps x layers on the rank (seconds per layer of a prefill batch: a step run eagerly launches
             each layer's kernels from the host, so its cost grows with the layers, TensorRT-LLM's PyTorch backend);
             likewise only the sets ENGINE_TERMS names
  pmoe       prefill steps x MoE layers on the rank (seconds per MoE layer of a prefill batch: a step run without a CUDA
             graph launches each MoE block's routing, alignment, quantization and expert kernels from the host, many
             more than a dense MLP's, SGLang's extend and TensorRT-LLM's PyTorch context steps: kvplan.speed.eras);
             likewise only the sets ENGINE_TERMS names; none where the engine replays its prefill steps from a CUDA
             graph (`prefill_graph`: SGLang from 0.5.10; TensorRT-LLM where a run turns its piecewise graph on)
  ingress    requests queued ahead in the serving front end (seconds per request: the API server's HTTP parsing,
             chat template and tokenising, in a process apart from the engine's steps): not in any step, only in
             first tokens, a burst's N crossings or a spread request's own (kvplan.speed.frontend.ingress_queue); 0 in
             every step's features
  measured   a timed kernel's seconds a token x the step's tokens (kvplan.speed.ggml_scan), coefficient 1 (fit.PINNED)

The link's bandwidth and latency a collective call costs (NCCL's ring, a custom all-reduce's one hop, a profile's
measured times) are kvplan.speed.allreduce's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.planning.plan import expected_experts_touched as experts_touched
from kvplan.speed.allreduce import measured_allreduce
from kvplan.speed.compute_dtype import sixteen_bit
from kvplan.speed.ggml import entry_at, padded_expert_flops

TERMS = ("weights", "kv", "gemm", "attn", "experts", "grouped", "comm", "latency", "step", "layer", "seq", "request",
         "pstep", "player", "pmoe", "ingress", "measured")
ACT_BYTES = 2  # activations cross the link in 16 bits
FP4_NAMES, FP8_NAMES = ("fp4", "nvfp4", "mxfp4"), ("fp8", "int8")


@dataclass(frozen=True)
class Shape:
    """One rank of a deployment as the step-time terms read it."""

    dense_bytes: int  # weights every step reads: all but the routed experts
    expert_bytes: int = 0  # routed experts held on this rank
    num_experts: int = 0  # routed experts per MoE layer (on this rank's view: all of them)
    top_k: int = 0
    expert_params: float = 0.0  # one expert's parameters on this rank, over all MoE layers
    kv_bytes_per_token: int = 0  # unbounded layers, this rank
    kv_windows: tuple = ()  # ((bytes per token, window), ...) of bounded layers
    kv_topk: tuple = ()  # ((bytes per token, top-k), ...): parts of kv_bytes_per_token a step reads for at most top-k
    # tokens a sequence (DeepSeek Sparse Attention's latent: kvplan.model.layers.IndexedMLA)
    state_bytes_per_seq: int = 0  # a sequence's fixed state on this rank (Mamba / linear attention, DeepSeek-V4)
    flops_per_token: float = 0.0  # 2 x active parameters on this rank, the LM head apart
    plain_flops: float = 0.0  # of them, those of modules the checkpoint keeps in the model dtype: at bf16_rate
    recurrent_flops: float = 0.0  # a token's in the recurrent layers' chunked prefill kernels, at bf16_rate (recurrent)
    measured_s_per_token: float = 0.0  # a token's seconds in kernels timed, not modelled (ggml_scan): `measured`
    head_flops: float = 0.0  # the LM head's 2 x vocab x hidden / tp, per position whose logits a step computes
    plain_head: bool = True  # the LM head runs at bf16_rate (every checkpoint but a GGUF file, its output quantized)
    plain_decompress: float = 0.0  # of decompress_flops, those of a kept attention's kv_b_proj: at bf16_rate
    attn_flops_per_pair: float = 0.0  # 4 x heads on this rank x head dim, over attention layers: a decode query's
    attn_prefill_flops_per_pair: float | None = None  # a prefill query's (MLA decompressed); None: the same
    decompress_flops: float = 0.0  # GEMM FLOPs a prefill step spends per cached token it attends to (MLA's kv_b_proj)
    attn_topk: tuple = ()  # ((FLOPs per pair, k), ...): parts of attn_flops_per_pair at most k pairs a query
    # (a sparse layer's top-k, a local layer's window or chunk)
    layers: int = 1
    hidden: int = 0
    tp: int = 1
    ep: int = 1
    moe_layers: int = 0
    ep_replicas: int = 1  # data-parallel replicas whose tokens this rank's experts serve (dp where ep > 1)
    bandwidth: float = 1.0  # bytes/s the terms read at: measured where the profile has it, else the datasheet's
    peak_bandwidth: float = 0.0  # the datasheet's bytes/s, for the roofline; 0: the same as `bandwidth`
    gemm_rate: float = 0.0  # FLOP/s at the weight dtype the terms read: measured where the profile has it
    grouped_rate: float = 0.0  # FLOP/s the `grouped` term divides by: the weight dtype's own rate; 0: gemm_rate
    bf16_rate: float = 0.0  # the same at bf16
    peak_bf16_rate: float = 0.0  # the datasheet's bf16 FLOP/s, for the roofline; 0: the same as `bf16_rate`
    link_bandwidth: float = 0.0  # bytes/s one direction; 0: no link (one GPU)
    link_latency_s: float = 0.0  # per collective call
    moe_block_m: int = 0  # expert rows a MoE kernel's tile takes, re-reading the expert's weights per tile; 0: none
    grouped_shortfall: bool = True  # False: a MoE kernel the set's `grouped` t0 was not fitted on (own_moe_kernel)
    fused_allreduce: bool = False  # tensor-parallel all-reduces inside the row-parallel GEMMs: no bandwidth term
    allreduce: tuple = ()  # ((message bytes, seconds), ...) one measured all-reduce among the tp ranks; (): the ring
    oneshot_latency_s: float = 0.0  # per tensor-parallel call of the engine's custom all-reduce; 0: the ring's
    oneshot_max_bytes: int = 0  # messages at or past it go to NCCL's ring (link_latency_s)
    act_dtype: str = "bf16"  # the 16-bit dtype activations and all-reduces run in (kvplan.speed.compute_dtype)
    prefill_attn_rate: float = 0.0  # FLOP/s prefill queries' attention runs at (FP8 context FMHA: fp8); 0: bf16_rate
    paths: tuple = ()  # (kvplan.speed.ggml.GemmPath, ...) ascending: llama.cpp's kernels by tokens per step
    rate_missing: str = ""  # a precision a path needs that the profile does not rate (kvplan.speed.ggml)
    score_bytes_per_flop: float = 0.0  # attention scores materialized (llama.cpp without FlashAttention): kv term
    prefill_graph: bool = False  # prefill steps replay a CUDA graph, MoE blocks inside it: no `pmoe` launch cost
    graph_tokens: int = 0  # llama.cpp: steps of at most this many tokens replay a CUDA / HIP graph, no `layer` cost
    host_overlap: bool = False  # the host's work a step overlaps the GPU's (vLLM's async scheduling): no `step` cost
    graph_context: float = 0.0  # vLLM V0: decode steps whose sequences hold at most this many cached tokens on mean
    # replay a CUDA graph, no `layer` cost (max_seq_len_to_capture); 0: every step launched from the host
    graph_batch: int = 0  # vLLM V0: ... and hold at most this many sequences (its largest captured batch); 0: no limit


def path_at(s: Shape, per_step: float) -> tuple[float, float]:
    """(GEMM FLOP/s, extra bytes a step reads) for a step of `per_step` tokens: the Shape's own GEMM rate and
    none, or where it has `paths` the last whose first token count is <= per_step."""
    entry = entry_at(s.paths, per_step)
    return (s.gemm_rate, 0.0) if entry is None else (entry.rate, entry.extra_bytes)


def gemm_rate(gpu, weight_dtype: str | None, compute: str = "bf16") -> tuple[float, str]:
    """(FLOP/s, the precision it is) a GEMM runs at with these weights: fp8 weights on a GPU with
    FP8 math run at its fp8 rate, fp4 weights at its fp4 rate (its fp8 one where it has no fp4),
    everything else (and fp8 on a GPU without FP8 math: weight-only kernels) at the 16-bit rate of the
    dtype the run `compute`s in (kvplan.speed.compute_dtype.sixteen_bit: bf16, or fp16 where it has its own)."""
    flops = gpu.dense_flops
    w = (weight_dtype or "").lower()
    if w in FP4_NAMES and flops.get("fp4"):
        return float(flops["fp4"]), "fp4"
    if (w in FP4_NAMES or w in FP8_NAMES) and flops.get("fp8") and gpu.fp8 is not False:
        return float(flops["fp8"]), "fp8"
    return sixteen_bit(gpu, compute)


def measured_tp(s: Shape) -> bool:
    """Whether a step's tensor-parallel all-reduces take the profile's measured times (`allreduce`) in place of the
    ring's bandwidth and latency: tp > 1, a table for the group, not fused into the GEMMs."""
    return s.tp > 1 and bool(s.allreduce) and not s.fused_allreduce


def replays_graph(s: Shape, tokens: float, seqs: float = 0.0, context: float = 0.0) -> bool:
    """Whether a step of `tokens` replays a captured graph, so launches no `layer` cost: llama.cpp's up to
    Shape.graph_tokens; vLLM V0's decode-only step (a token a sequence) of at most Shape.graph_batch `seqs` sequences
    (where it is set) holding `context` cached tokens while their mean is within Shape.graph_context. V0's model
    runner replays a graph only for a decode batch whose size is within its largest captured batch and whose longest
    sequence is within max_seq_len_to_capture (`_use_captured_graph`, kvplan.bench.running.case_graph): the mean
    stands in for the longest, so a batch whose mean is near the limit and whose longest is past it is counted as
    replayed (optimistic there)."""
    if s.graph_context:
        return 0 < tokens <= seqs and context <= s.graph_context * seqs and (not s.graph_batch or seqs <= s.graph_batch)
    return bool(s.graph_tokens) and tokens <= s.graph_tokens


def features(s: Shape, tokens: float, seqs: float, context: float, pairs: float, *, request: float = 0.0,
             steps: float = 1.0, prefill_steps: float = 0.0, prefill_pairs: float = 0.0, prefill_context: float = 0.0,
             sampled: float | None = None, seq_steps: float | None = None) -> list[float]:
    """One step's terms (TERMS order) at coefficient 1: `tokens` scheduled tokens of `seqs` sequences
    reading `context` cached tokens in all and forming `pairs` query-key pairs, `prefill_pairs` of them formed by
    prefill queries, whose sequences had `prefill_context` cached tokens before the step (summed over its `steps`).
    `steps`: how many engine steps these tokens take (a prefill in chunks reads the weights once per chunk);
    `request`: requests admitted (their fixed cost); `prefill_steps`: how many of the steps are prefill batches;
    `sampled`: positions whose logits the LM head computes (None: one a sequence a step, head_rows); `seq_steps`:
    sequences scheduled summed over the steps (None: `seqs` in every step; a packed prefill's: model.packed_rows)."""
    bw, reads = s.bandwidth, seqs if seq_steps is None else seq_steps  # a window caps each step's read of a sequence
    sampled = head_rows(seqs, steps) if sampled is None else sampled
    kv = s.kv_bytes_per_token * context + 2 * s.state_bytes_per_seq * seqs  # a state is read and written back
    for bpt, window in s.kv_windows:
        kv += bpt * min(context, reads * window)
    for bpt, k in s.kv_topk:  # of the bytes above, read for at most k tokens a sequence
        kv -= bpt * max(0.0, context - reads * k)
    capped = sum(f * max(0.0, pairs - tokens * k) for f, k in s.attn_topk)  # of the FLOPs below, at most k a query
    attn = (s.attn_flops_per_pair * (pairs - prefill_pairs) / s.bf16_rate + prefill_width(s) * prefill_pairs
            / (s.prefill_attn_rate or s.bf16_rate) - capped * capped_pair_seconds(s, pairs, prefill_pairs)
            if s.bf16_rate else 0.0)  # a prefill query's pairs at its own rate (FP8 context FMHA), if any
    per_step, per_seqs = tokens / steps, seqs if seq_steps is None else seq_steps / steps
    if s.score_bytes_per_flop:  # the scores' bytes, a micro-batch's masked pairs too (kvplan.speed.ggml)
        q = tokens / max(1.0, steps * seqs)  # one sequence's tokens a step
        kv += s.score_bytes_per_flop * (s.attn_flops_per_pair * (pairs + tokens * (q - 1) / 2) - capped)
    rate, extra = path_at(s, per_step) if s.paths else (s.gemm_rate, 0.0)
    routed = per_step * s.ep_replicas  # the tokens this rank's experts serve in one step
    touched = experts_touched(s.num_experts, s.top_k, routed) if s.num_experts else 0.0  # planning's formula
    share = touched / s.num_experts if s.num_experts else 0.0
    comm = lat = 0.0
    message = per_step * s.hidden * ACT_BYTES  # one tensor-parallel all-reduce's bytes
    if measured_tp(s):  # each call's measured time, its latency within it
        comm += 2 * s.layers * steps * measured_allreduce(s.allreduce, message)
    elif s.tp > 1:
        if not s.fused_allreduce:  # TensorRT-LLM's GEMM + AllReduce reduces tile by tile under the GEMM
            comm += 2 * s.layers * 2 * (s.tp - 1) / s.tp * tokens * s.hidden * ACT_BYTES / s.link_bandwidth
        oneshot = s.oneshot_latency_s and message < s.oneshot_max_bytes  # the engine's custom all-reduce
        lat += 2 * s.layers * steps * (s.oneshot_latency_s if oneshot else s.link_latency_s)
    if moves_tokens(s):
        comm += 2 * s.moe_layers * (s.ep - 1) / s.ep * tokens * s.top_k * s.hidden * ACT_BYTES / s.link_bandwidth
        lat += 2 * s.moe_layers * steps * s.link_latency_s
    return [
        (s.dense_bytes + extra) * steps / bw,
        kv / bw,
        gemm_seconds(s, tokens, prefill_context, rate, sampled, steps),
        attn,
        (s.expert_bytes * share + reread_bytes(s, routed, touched)) * steps / bw,
        touched * 2 * s.expert_params * steps / (s.grouped_rate or s.gemm_rate) if s.gemm_rate and s.grouped_shortfall
        else 0.0,
        comm,
        lat,
        0.0 if s.host_overlap else steps,  # kvplan.speed.overlap
        0.0 if replays_graph(s, per_step, per_seqs, context / steps) else s.layers * steps,  # else launched by the host
        seqs * steps if seq_steps is None else seq_steps,
        request,
        prefill_steps,
        prefill_steps * s.layers,
        0.0 if s.prefill_graph else prefill_steps * s.moe_layers,
        0.0, s.measured_s_per_token * tokens,  # ingress: no step's (frontend.ingress_queue); measured: timed kernels'
    ]


def capped_pair_seconds(s: Shape, pairs: float, prefill_pairs: float) -> float:
    """Seconds per FLOP of the pairs a window or top-k cap takes off (Shape.attn_topk): at the bf16 rate, or shared
    between it and `prefill_attn_rate` as the step's pairs are (so a cap never takes off more than it priced)."""
    if not s.prefill_attn_rate or not pairs:
        return 1.0 / s.bf16_rate
    share = min(1.0, prefill_pairs / pairs)
    return (1.0 - share) / s.bf16_rate + share / s.prefill_attn_rate


def reread_bytes(s: Shape, routed: float, touched: float) -> float:
    """Routed-expert bytes a step reads past one read of each touched expert, where its MoE kernel tiles an expert's
    rows in blocks of `moe_block_m` (in the `experts` term): (rows / block - touched) experts' bytes, rows = routed
    tokens x top-k; 0 for a Shape without such a kernel or a step of fewer rows than touched experts' blocks."""
    if not s.moe_block_m or not s.num_experts:
        return 0.0
    return s.expert_bytes / s.num_experts * max(0.0, routed * s.top_k / s.moe_block_m - touched)


def moves_tokens(s: Shape) -> bool:
    """Whether each MoE layer dispatches tokens to their experts' ranks and combines them back: only where the
    experts span more ranks than the attention's tensor-parallel group (ep > tp: data-parallel attention, each
    replica holding its own tokens). Where ep <= tp every rank holds every token, computes its own experts' share
    and the layer's one tensor-parallel all-reduce sums them, already counted (vllm-project/vllm@0014ec6c:
    vllm/model_executor/layers/fused_moe/layer.py `forward_impl`, dispatch/combine only where dp_size > 1;
    sgl-project/sglang@00114aef: python/sglang/srt/models/deepseek_v2.py `forward_normal`, the experts then
    `tensor_model_parallel_all_reduce`; NVIDIA/TensorRT-LLM@000561df: tensorrt_llm/_torch/models/
    modeling_deepseekv3.py, the MoE output's all-reduce, fused with the next norm)."""
    return s.ep > s.tp and s.moe_layers > 0


def head_rows(seqs: float, steps: float = 1.0) -> float:
    """Positions whose logits a step computes: one for each sequence it schedules, a prefill chunk that does not end
    its prompt included (its token is sampled and dropped). vLLM: `logits_indices = query_start_loc[1:] - 1`, then
    `compute_logits(hidden_states[logits_indices])` ("we should not sample any token from these partial requests,
    we do so for simplicity": vllm-project/vllm@4e179065:vllm/v1/worker/gpu_model_runner.py, _prepare_inputs and
    execute_model); TensorRT-LLM's PyTorch backend: `gather_ids`, one a context chunk or generation request
    (NVIDIA/TensorRT-LLM@1a0dc5f7:tensorrt_llm/_torch/pyexecutor/model_engine.py, _prepare_tp_inputs; context
    logits gathered only with gather_context_logits); SGLang: an extend without input logprobs keeps
    `hidden_states[cumsum(extend_seq_lens) - 1]`, one a request (sgl-project/sglang@5993251f:python/sglang/srt/
    layers/logits_processor.py, _get_pruned_states); llama.cpp: only the tokens a batch marks for output, "the output
    only for the last token" where it marks none (llama_batch_get_one, llama-bench's pp test:
    ggml-org/llama.cpp@21e9bbe2:src/llama-batch.cpp, llama_batch_allocr::init)."""
    return seqs * steps


def gemm_seconds(s: Shape, tokens: float, prefill_context: float, rate: float, sampled: float = 0.0,
                 steps: float = 1.0) -> float:
    """The GEMM term at coefficient 1: the checkpoint's quantized modules' FLOPs at `rate` (its weight dtype's, or
    a llama.cpp path's, with its MoE tiles' padded columns over `steps` steps: ggml.padded_expert_flops), those it
    keeps in the model dtype (`plain_flops`, `plain_decompress`: kvplan.speed.shape.plain_gemm) at the bf16 rate; the
    LM head's over `sampled` positions (at the bf16 rate but in a GGUF file, `plain_head`), `recurrent_flops` at it."""
    if not rate:
        return 0.0
    head = s.head_flops * sampled
    plain = s.plain_flops * tokens + s.plain_decompress * prefill_context + (head if s.plain_head else 0.0)
    quantized = s.flops_per_token * tokens + s.decompress_flops * prefill_context + head - plain
    plain += s.recurrent_flops * tokens  # no weight's: the layers' chunked recurrence (kvplan.speed.recurrent)
    padded = steps * padded_expert_flops(s, tokens / steps) if s.paths and steps else 0.0
    return (quantized + padded) / rate + plain / (s.bf16_rate or rate)


def prefill_width(s) -> float:
    """FLOPs a prefill query-key pair costs on this rank (the decode width where the Shape or StageCost gives none)."""
    return s.attn_flops_per_pair if s.attn_prefill_flops_per_pair is None else s.attn_prefill_flops_per_pair


def roofline(s: Shape, tokens: float, seqs: float, context: float, pairs: float, steps: float = 1.0, *,
             prefill_pairs: float = 0.0, prefill_context: float = 0.0) -> float:
    """The old bound (kvplan.simulator.model.StepTimer): max(bytes read / bandwidth, FLOPs / the bf16 rate)."""
    return roofline_of(features(bound(s), tokens, seqs, context, pairs, steps=steps, prefill_pairs=prefill_pairs,
                                prefill_context=prefill_context))


def bound(s: Shape) -> Shape:
    """The Shape the roofline prices: no engine's kernels (`paths`, a fused all-reduce; a prefill graph moves only
    `pmoe`, unread), its bytes at the datasheet bandwidth, every FLOP at the datasheet's bf16 rate."""
    peak = s.peak_bf16_rate or s.bf16_rate
    return replace(s, paths=(), fused_allreduce=False, bandwidth=s.peak_bandwidth or s.bandwidth,
                   gemm_rate=peak, grouped_rate=0.0, bf16_rate=peak, rate_missing="")


def roofline_of(f: list[float]) -> float:
    """The roofline of a step whose terms (TERMS order, at coefficient 1) are `f`, the features of a `bound` Shape: the
    larger of its reads (weights, KV, experts) and its FLOPs (GEMM and attention)."""
    return max(f[0] + f[1] + f[4], f[2] + f[3])
