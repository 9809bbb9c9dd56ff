"""A deployment's `Shape` (kvplan.speed.terms): a model spec on a GPU profile at tp / ep, in given dtypes.

Per tensor-parallel rank: the weights of kvplan.model.weights.weight_bytes (sharded parts / tp, the
replicated ones whole, the LM head / tp, a tied one's being the embedding table's vocabulary rows, which its
logits read whole; the embedding's lookup reads a few rows only), the
routed experts / max(tp, ep), the KV bytes per token of kvplan.planning.profile (windows apart),
2 x active parameters of FLOPs per token but the embedding's and the LM head's, the head's 2 x vocab x hidden / tp
(tied or not: vLLM's ParallelLMHead splits the vocabulary over tp) apart, per position whose logits a step computes
(kvplan.speed.terms.head_rows), and 4 x heads x head dim per query-key pair over the
attention layers (an MLA layer's decode at its absorbed width, latent + rope; its prefill where the engine
decompresses K and V at 2 x heads x (qk_nope + rope + v), with the decompression of the cached context a prefill
step attends to: attention_flops). DeepSeek Sparse Attention (kvplan.model.layers.IndexedMLA: DeepSeek-V3.2, GLM-5)
attends each
query to at most `index_topk` cached tokens, chosen by an indexer that scores every one of them: its latent is read
for at most top-k tokens a sequence (`kv_topk`) and its heads' FLOPs run over at most top-k pairs a query
(`attn_topk`), while the indexer's keys are read for every token and its 2 x heads x dim FLOPs a pair run over every
pair (its heads replicated on every rank, as its weights are: kvplan.readers.params). Bytes are read at the profile's
measured bandwidth where it has one (read_bandwidth), FLOPs
run at its measured matmul rate where it has one (read_flops).
Pipeline stages run one after the other for a token, so pp does not change a
step's time here (the whole model over tp); data-parallel replicas are the load model's business,
but for the experts: with ep > 1 the dp replicas share them, so a rank's experts serve every
replica's tokens in a step (`ep_replicas` = dp).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.dtypes import GGUF_MIXES, GGUF_TYPES, canonical_kv_dtype, canonical_weight_dtype
from kvplan.model.layers import IndexedMLA, attending
from kvplan.model.weight_formats import PLAIN_BYTES
from kvplan.model.weights import own_format, weight_bytes
from kvplan.planning.profile import PAGED, kv_profile
from kvplan.speed.compute_dtype import STATED, compute_dtype, datasheet_flops, ggml_rate_of, read_flops, sixteen_bit
from kvplan.speed.ggml import attention_rate as ggml_attention_rate
from kvplan.speed.ggml import paths as ggml_paths
from kvplan.speed.ggml_graph import graph_tokens
from kvplan.speed.ggml_scan import scan_seconds
from kvplan.speed.mlaform import as_run, mla_heads_per_rank
from kvplan.speed.model import (absorbed_prefill, custom_allreduce_bytes, engine_key, gemm_kernels,
                                measured_allreduce_kernel)
from kvplan.speed.mxfp4 import moe_block_m, mxfp4_precision
from kvplan.speed.overlap import overlaps_host
from kvplan.speed.recurrent import recurrent_flops
from kvplan.speed.allreduce import allreduce_table, fabric_latency, link
from kvplan.speed.terms import Shape, gemm_rate

_BIG = 1 << 40
# A recurrent layer's states are kept in the model's dtype, not the KV cache's: SGLang's conv states in
# SGLANG_MAMBA_CONV_DTYPE, bfloat16 unless set (sgl-project/sglang@02e208ded6769bd3332cbdc6cf0da939f541514f:
# python/sglang/srt/configs/mamba_utils.py#L47-68, mamba2_state_dtype), vLLM's in mamba_cache_dtype, whose 'auto' is
# the model dtype (vllm-project/vllm@02d710837549a368073552333f66d714477415d2:vllm/model_executor/layers/mamba/
# mamba_utils.py#L96-109, _mamba_state_dtype); neither follows --kv-cache-dtype. A layer's own ssm_dtype (the config's
# or a run's stated one, kvplan.speed.ssm_dtype) still types its recurrent values (kvplan.model.recurrent.state_bytes).


def custom_off(s: Shape, engine: str | None, gpu, version: str | None) -> Shape:
    """Shape `s` for a run that turned its engine's custom all-reduce off (kvplan.speed.model.nccl_only): the one-kernel
    latency only below what the engine tries next (vLLM's symmetric memory from 0.11.0, for bf16 activations:
    custom_allreduce_bytes' `custom`), NCCL's ring past it, no measured table."""
    off = custom_allreduce_bytes(engine, s.tp, gpu, version, False, s.act_dtype) if s.oneshot_latency_s else 0
    return replace(s, oneshot_latency_s=s.oneshot_latency_s if off else 0.0, oneshot_max_bytes=off, allreduce=())


def weight_dtype_of(name: str | None) -> str | None:
    """A measurement's weight dtype in kvplan's words (fp4 = nvfp4), None for the checkpoint's own."""
    if not name:
        return None
    key = str(name).strip().lower().replace("-", "_")
    key = {"fp4": "nvfp4", "fp8_block": "fp8", "int4_wo": "int4", "q4_k_s": "q4_k", "q5_k_s": "q5_k",
           "iq3_xs": "iq3_s"}.get(key, key)
    return canonical_weight_dtype(key)


def shape_for(spec, gpu, *, tp: int = 1, ep: int = 1, weight_dtype: str | None = None,
              kv_dtype: str | None = None, dp: int = 1, engine: str | None = None, date: str | None = None,
              version: str | None = None, prefix_cache: bool = True, attention_backend: str | None = None,
              attention_dp: bool = False, compute: str | None = None, prefill_graph: bool = False,
              host_overlap: bool | None = None) -> Shape:
    """The Shape of `spec` on `gpu` at tensor parallelism `tp`, expert parallelism `ep` and `dp`
    data-parallel replicas; under `engine` llama.cpp (a build of `date`, None: current) with its GEMM paths, under an
    engine whose MXFP4 MoE kernels kvplan.speed.mxfp4 reads (release `version`, None: current) at their precision;
    `prefix_cache`: the engine's prefix cache on (its default), which some releases' MLA prefill reads
    (kvplan.speed.model.absorbed_prefill), through the `attention_backend` the run names (None: the default);
    `attention_dp`: the dp replicas are attention-DP ranks of one engine, counted in its tp size
    (mla_heads_per_rank); `compute`: the 16-bit dtype the run states (on_gpu); `prefill_graph`: the engine replays its
    prefill steps from a CUDA graph (Shape.prefill_graph); `host_overlap`: the engine schedules a step while the GPU
    runs the last (Shape.host_overlap; None: the release's default, kvplan.speed.overlap). An MLA model under a
    release with no MLA kernel is priced as it runs, decompressed (kvplan.speed.mlaform.as_run)."""
    spec = as_run(spec, engine, version)
    s = on_gpu(model_terms(spec, tp=tp, ep=ep, weight_dtype=weight_dtype, kv_dtype=kv_dtype, dp=dp), spec, gpu,
               weight_dtype, engine=engine, date=date, version=version, prefix_cache=prefix_cache,
               attention_backend=attention_backend, tp_size=tp * dp if attention_dp else tp, compute=compute,
               prefill_graph=prefill_graph)
    return replace(s, host_overlap=overlaps_host(engine, version) if host_overlap is None else host_overlap)


def attention_flops(layers, heads: int, tp: int) -> tuple[float, float, tuple, float]:
    """(decode FLOPs per query-key pair over these layers on one rank, prefill FLOPs per pair, ((the part of them a
    sparse layer's heads, or a sliding-window or chunked-local layer's, run, top-k or span), ...), GEMM FLOPs a prefill
    spends per cached token it decompresses).

    A local layer's query attends to at most its span of keys, and the engines' kernels skip the rest (FlashAttention's
    `window_size` = (window - 1, 0) in vLLM's FlashAttentionImpl: vllm-project/vllm@0084b783:vllm/v1/attention/
    backends/flash_attn.py), so its FLOPs are capped as a top-k layer's are, as its KV reads already were
    (`kv_windows`).

    Decode: 4 x heads / tp x head dim a layer (MLA absorbed: latent + rope), and a DSA layer's indexer 2 x its heads x
    dim (replicated on every rank), which scores every pair where its heads run at most top-k a query (module
    docstring). Prefill: the same, but where an MLA layer says what its heads decompress to (qk_nope_head_dim,
    v_head_dim): 2 x heads / tp x (qk_nope + rope + v), ordinary multi-head attention over K and V decompressed by
    kv_b_proj, whose 2 x kv_lora_rank x heads / tp x (qk_nope + v) FLOPs run again for each cached token a prefill
    step attends to (its own new tokens' are the layer's parameters, in the GEMM FLOPs a token already). So vLLM's
    MLA backends (vllm-project/vllm@00a817ad:vllm/v1/attention/backends/mla/common.py, module docstring: the
    "compute friendly" _forward_prefill, and _compute_prefill_context running kv_b_proj over the cached context, chunk
    by chunk; the absorbed "data-movement friendly" _forward_decode for decode), SGLang's MHA_ONE_SHOT / MHA_CHUNKED_KV
    for an extend without speculation (sgl-project/sglang@0a8dcfa9:python/sglang/srt/models/deepseek_common/
    attention_backend_handler.py, _handle_attention_backend) and TensorRT-LLM's context phase
    (NVIDIA/TensorRT-LLM@00547a25:tensorrt_llm/_torch/modules/attention.py, MLA.forward_context: default,
    with_cached_kv, with_chunked_prefill). A DSA layer with top-k keeps its absorbed width in prefill: its sparse
    prefill attends in the latent's MQA form, as its decode does (DeepSeek-V3.2's report)."""
    pairs = prefill = decompress = 0.0
    capped: dict = {}
    for layer in attending(layers, tp):
        layer = getattr(layer, "attention", layer)  # Falcon-H1's ParallelHybrid: its attention half
        d = getattr(layer, "head_dim", 0) or (getattr(layer, "kv_lora_rank", 0)
                                              + getattr(layer, "qk_rope_head_dim", 0))
        flops = 4 * (heads / tp) * d
        pairs += flops
        nope, v = getattr(layer, "qk_nope_head_dim", 0), getattr(layer, "v_head_dim", 0)
        sparse = isinstance(layer, IndexedMLA) and layer.index_topk
        if getattr(layer, "kv_lora_rank", 0) and nope and v and not sparse:
            prefill += 2 * (heads / tp) * (nope + layer.qk_rope_head_dim + v)
            decompress += 2 * layer.kv_lora_rank * (heads / tp) * (nope + v)
        else:
            prefill += flops
        if sparse:
            capped[layer.index_topk] = capped.get(layer.index_topk, 0.0) + flops
            indexer = 2 * layer.index_n_heads * layer.index_head_dim
            pairs, prefill = pairs + indexer, prefill + indexer
        elif layer.span:  # a sliding window or local chunk: at most its span of keys a query
            capped[layer.span] = capped.get(layer.span, 0.0) + flops
    return pairs, prefill, tuple(sorted((f, k) for k, f in capped.items())), decompress


def sparse_reads(prof) -> tuple:
    """((bytes a token, top-k), ...) of a KV profile's DSA latents: read for at most top-k tokens a sequence (their
    indexer keys, for every token, stay in the growth bytes)."""
    capped: dict = {}
    for layer, n in prof.groups:
        if isinstance(layer, IndexedMLA) and layer.index_topk:
            latent = prof.token_bytes(layer) - layer.indexer_bytes()
            capped[layer.index_topk] = capped.get(layer.index_topk, 0) + latent * n
    return tuple(sorted((b, k) for k, b in capped.items()))


def model_terms(spec, *, tp: int = 1, ep: int = 1, weight_dtype: str | None = None,
                kv_dtype: str | None = None, dp: int = 1) -> dict:
    """The Shape's fields that do not depend on the GPU (nearly all of shape_for's work): a sweep builds
    them once per model × tp × ep × dp × dtypes and puts them on each GPU with on_gpu."""
    wb = weight_bytes(spec, weight_dtype)
    p = spec.params
    kv = canonical_kv_dtype(kv_dtype or "auto", spec.dtype)
    prof = kv_profile(spec.layers, tp, kv, canonical_kv_dtype("auto", spec.dtype), 16, PAGED)  # states: model dtype
    windows = tuple((prof.token_bytes(layer) * n, layer.tokens_held(_BIG))
                    for layer, n in prof.groups if layer.bounded and prof.token_bytes(layer))
    pairs, prefill_pairs, attn_topk, decompress = attention_flops(spec.layers, spec.num_attention_heads, tp)
    kv_topk = sparse_reads(prof)
    spread = max(tp, ep)
    active_dense = p.active - p.embedding - p.lm_head - p.experts_active
    head, head_bytes = lm_head(spec, wb)
    per_expert = p.experts / p.num_experts / spread if p.num_experts else 0.0
    plain, plain_share = plain_gemm(spec, weight_dtype)
    return dict(
        plain_flops=2.0 * (plain[0] / tp + plain[1] / spread), plain_decompress=decompress * plain_share,
        dense_bytes=int((wb.sharded + head_bytes) // tp + wb.replicated),
        expert_bytes=int(wb.experts // spread),
        num_experts=p.num_experts, top_k=p.experts_per_token, expert_params=per_expert,
        kv_bytes_per_token=prof.growth_bytes_per_token(), kv_windows=windows, kv_topk=kv_topk, attn_topk=attn_topk,
        state_bytes_per_seq=prof.state_bytes_per_sequence(),
        flops_per_token=2.0 * (active_dense / tp + p.experts_active / spread), head_flops=2.0 * head / tp,
        plain_head=not gguf(weight_dtype or spec.quantization.method), recurrent_flops=recurrent_flops(spec.layers, tp),
        attn_flops_per_pair=pairs, attn_prefill_flops_per_pair=prefill_pairs, decompress_flops=decompress,
        layers=spec.num_layers, hidden=spec.hidden_size, tp=tp, ep=ep,
        moe_layers=p.num_moe_layers, ep_replicas=max(1, dp) if ep > 1 and p.num_experts else 1,
    )


def lm_head(spec, wb) -> tuple[int, int]:
    """(the LM head's parameters, its bytes) whole, tied or not: a tied head multiplies by the embedding table's
    vocab x hidden rows (not a learned position table beside them: GPT-2's), in the table's own format."""
    p = spec.params
    if p.lm_head:
        return p.lm_head, wb.lm_head
    head = spec.vocab_size * spec.hidden_size
    return head, (wb.embedding * head // p.embedding if p.embedding else 0)


def gguf(stored: str | None) -> bool:
    """Whether weights stored so are a GGUF file's (its output layer quantized too)."""
    return stored in GGUF_TYPES or stored in GGUF_MIXES


def plain_gemm(spec, weight_dtype: str | None) -> tuple[tuple[float, float], float]:
    """((active dense parameters, active routed-expert parameters) a token multiplies in the model dtype, the share
    of the attention's decompression among them) for a quantized checkpoint: the modules its exclusion list keeps
    (Quantization.kept: an NVFP4 export's attention, Llama-3.1-405B-FP8's attention and edge MLPs) and every dense
    module where the method quantizes only the experts (MXFP4: vLLM Mxfp4Config.get_quant_method gives every
    LinearBase an UnquantizedLinearMethod). Their GEMMs run at the bf16 rate, as vLLM's UnquantizedLinearMethod runs
    them; the checkpoint's own exclusions stand only in its own format (kvplan.model.weights.own_format). The LM head,
    which no format kvplan reads quantizes but GGUF (kvplan.model.weights.weight_bytes), is priced apart, per sampled
    position (Shape.head_flops, plain_head)."""
    p, q = spec.params, spec.quantization
    stored = weight_dtype or q.method
    if stored in PLAIN_BYTES or gguf(stored) or not own_format(spec, weight_dtype):
        return (0.0, 0.0), 0.0
    ka, km, ks, ke = (q.kept_of(r) for r in ("attention", "mlp", "shared_experts", "experts"))
    if q.experts_only:
        ka, km, ks = p.attention, p.mlp, p.shared_experts
    routed = ke * p.experts_active / p.experts if p.experts else 0.0
    return (float(ka + km + ks), routed), (min(1.0, ka / p.attention) if p.attention else 0.0)


def read_bandwidth(gpu) -> int:
    """Bytes/s the speed terms read device memory at: the profile's `achieved_bandwidth_bytes_per_s` (a published
    bandwidth-bound benchmark on that part) where it has one, its datasheet `bandwidth_bytes_per_s` otherwise
    (parts with no published measurement: kvplan/hardware/profiles/README.md, "Achieved bandwidth")."""
    return gpu.achieved_bandwidth_bytes_per_s or gpu.bandwidth_bytes_per_s


def on_gpu(terms: dict, spec, gpu, weight_dtype: str | None = None, *, engine: str | None = None,
           date: str | None = None, version: str | None = None, prefix_cache: bool = True,
           attention_backend: str | None = None, tp_size: int | None = None, compute: str | None = None,
           prefill_graph: bool = False) -> Shape:
    """model_terms' fields on `gpu`: its bandwidth (read_bandwidth) and GEMM rates at the weight dtype and at bf16
    (read_flops), the datasheet's beside them for the roofline, and its link; under llama.cpp, its GEMM paths by
    tokens per step (kvplan.speed.ggml) and the steps its build replays from a graph (kvplan.speed.ggml_graph);
    MXFP4 MoE weights at the precision the engine's kernels multiply in at `version` where kvplan.speed.mxfp4 reads
    them (SGLang's, vLLM's, TensorRT-LLM's), the weight dtype's own rate otherwise;
    an MLA prefill at the decode width where the engine runs it absorbed (kvplan.speed.model.MLA_PREFILL, and
    with its `prefix_cache` on by release and `attention_backend`, its default by heads a rank over the engine's
    `tp_size`, attention-DP ranks included, None: terms' tp: kvplan.speed.mlaform); the
    profile's measured all-reduce times for the tp group where the engine runs the kernel they timed
    (kvplan.speed.model.MEASURED_ALLREDUCE); the latency of the engine's custom all-reduce on a fully connected
    fabric and its size limit (kvplan.speed.model.CUSTOM_ALLREDUCE). The 16-bit rates (`bf16_rate`, and the GEMM's
    where the weights are not fp8/fp4) are those of the dtype the run computes in (kvplan.speed.compute_dtype: the
    `compute` dtype the run states, else a 16-bit `weight_dtype`, else the model's dtype; fp16 without BF16 math);
    `prefill_graph` as shape_for's."""
    stored = weight_dtype or (spec.quantization.method if spec.quantization else None)
    stated = compute or (weight_dtype if weight_dtype in STATED else None)
    compute = compute_dtype(spec.dtype, gpu, stated, ggml=gemm_kernels(engine) == "ggml")[0]
    own = gemm_rate(gpu, stored, compute)[1]  # the weights' own precision's rate, which the grouped term keeps
    dtype, block_m = stored, 0
    if str(stored or "").lower() == "mxfp4" and spec.params.num_experts:
        key = engine_key(engine) if engine else None
        dtype, block_m = mxfp4_precision(key, gpu, version) or stored, moe_block_m(key, gpu, version)
    peak, precision = gemm_rate(gpu, dtype, compute)
    peak_bf16 = datasheet_flops(gpu, "bf16")  # the roofline's, as ever
    rate, bf16 = (read_flops(gpu, precision) if peak else 0.0), read_flops(gpu, sixteen_bit(gpu, compute)[1])
    link_bw, latency = link(gpu, max(terms["tp"], terms["ep"]))
    oneshot = custom_allreduce_bytes(engine, terms["tp"], gpu, version, dtype=compute)  # the engine's custom kernel
    oneshot_latency = fabric_latency(gpu, terms["tp"]) if oneshot else 0.0
    paths, missing = (), ""
    if gemm_kernels(engine) == "ggml":
        dense = terms["flops_per_token"] / 2 - terms["top_k"] * terms["expert_params"]
        rate_of = ggml_rate_of(gpu)
        paths, missing = ggml_paths(gpu, stored, dense, rate_of, date)
        bf16 = ggml_attention_rate(gpu, rate_of)  # its attention's two accumulators
        # no chunked FLOPs (kvplan.speed.recurrent): its serial scan at its measured time (kvplan.speed.ggml_scan)
        terms = {**terms, "recurrent_flops": 0.0, "measured_s_per_token": scan_seconds(spec.layers, gpu),
                 "graph_tokens": graph_tokens(gpu, date, terms["num_experts"] > 0, terms["tp"])}  # its graph replays
    # a rank's KV heads as the engine's MLA default reads them, over its whole tp size (`tp_size`: attention-DP ranks
    # included; None: terms' tp), by the rule kvplan.engines.sglang.attention reads for the page and the aiter cut
    heads = mla_heads_per_rank(spec, tp_size or terms["tp"])
    if absorbed_prefill(engine, version, prefix_cache, gpu, heads, attention_backend,
                        spec.architecture):  # attends as its decode does
        terms = {**terms, "attn_prefill_flops_per_pair": terms["attn_flops_per_pair"], "decompress_flops": 0.0}
    return Shape(**terms, bandwidth=float(read_bandwidth(gpu)), peak_bandwidth=float(gpu.bandwidth_bytes_per_s),
                 gemm_rate=rate or bf16, grouped_rate=(read_flops(gpu, own) if own != precision else 0.0),
                 bf16_rate=bf16, peak_bf16_rate=peak_bf16,
                 link_bandwidth=link_bw, link_latency_s=latency, oneshot_latency_s=oneshot_latency,
                 oneshot_max_bytes=oneshot if oneshot_latency else 0, act_dtype=compute,
                 allreduce=allreduce_table(gpu, terms["tp"]) if measured_allreduce_kernel(engine) else (),
                 moe_block_m=block_m, paths=paths, rate_missing=missing, prefill_graph=prefill_graph)

