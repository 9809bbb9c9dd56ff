"""TensorRT-LLM (PyTorch backend): a fraction of the memory left free after a profiling run, in blocks of 32.

Sources (code index snapshots; docs/engines.md section 3):
  * `KvCacheConfig.free_gpu_memory_fraction` default 0.9, `tokens_per_block` 32, `max_num_tokens` 8192
    (`tensorrt_llm/llmapi/llm_args.py`; docs page examples/kvcacheconfig.html: "90% of free GPU memory").
  * budget: `tensorrt_llm/_torch/pyexecutor/_util.py` @ 0004396720054fd8e205cbf616f21f0b57c6b412,
    `KvCacheCreator.configure_kv_cache_capacity`: kv = (total - peak of the warm-up run) x fraction, where the
    peak holds the weights, the activations of `max_num_tokens` and non-torch memory. Read again for 1.x (the
    1.1-1.2 shape of `KvCacheCreator`, code index versions; docs/engines.md): the dry run enqueues context requests
    of min(max_num_tokens, max_seq_len - 1) tokens up to max_num_tokens in all, each generating one token, over a
    temporary KV cache sized for just those (plus one or two tokens a sequence); its bytes are added back
    (`_cal_max_memory`: (total - peak + the temporary cache's bytes) x fraction). The generation CUDA graphs (where
    cuda_graph_config gives no batch sizes, the LLM API's default CudaGraphConfig: max_batch_size 0 read as 128
    and padding off, so batch sizes 1-31, 32, 64 and 128, NVIDIA/TensorRT-LLM@fcd3f31682808ae56118ae43c1d7864a3a945e6f:
    tensorrt_llm/llmapi/llm_args.py `_generate_cuda_graph_batch_sizes`; 1, 2, 4 and every 8 to 128 only with
    enable_padding) are captured before the profiling, so their pools sit in the non-torch part of the peak; the
    pool is then min(that, fraction x free memory when the final cache is made), the first binding after the dry
    run frees its activations. Checked end to end against one datacenter-GPU log of the PyTorch backend
    (TensorRT-LLM#6294, 0.20.0 inferred, H100, training split): +3.4% on the budget (54.27 against 52.51 GiB), not
    attributed, as the thread shows no peak line (docs/engines.md section 3). A DGX Spark log of gpt-oss-120b on
    1.1.0rc3 prints them too: there the device's count holds the page cache as used, which
    kvplan.engines.trtllm.uma counts.
  * bytes per token: `resource_manager.py` (commit d2a5560a) `get_cache_size_per_token`:
    L x kv_factor x (d x H // tp) x b, kv_factor 1 for MLA (d = 576, no tp split). Heads are NOT replicated
    when tp > H (d x H // tp), unlike vLLM and SGLang. Blocks: ceil(max_tokens / 32), min over ranks
    (`KVCacheManager.calculate_max_num_blocks`, the same at d2a5560a and in the 0.20-era file whose warning
    "Both free_gpu_memory_fraction and max_tokens are set" TensorRT-LLM#6294 prints): max_tokens is the budget
    floor-divided by the bytes per token, and the pool rounds it UP to whole blocks. Checked against that
    training log (0.20.0, Llama-3.1-8B FP8 on an H100): 860,308 tokens -> 26,885 blocks = 860,320 tokens, 52.51 GiB
    (benchmarks/budget_trtllm.py).
  * attention DP (`enable_attention_dp`, --dp on a MoE model): every rank its own attention rank with whole KV heads,
    its own pool and max_batch_size, all but the routed experts whole (kvplan/engines/trtllm/layout.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.planning.deploy import node_size, stage_ranges
from kvplan.core.intmath import cdiv
from kvplan.planning.plan import UNIFIED, PlanWarning, activation_estimate, cache_dtypes, runtime_bytes
from kvplan.engines.context import trtllm_rule
from kvplan.engines.base import Capacity, Engine, Figure, check_opts, check_version, opt_float, opt_int
from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.model.layers import ATTENTION_KINDS, Kind
from kvplan.engines import kvbm
from kvplan.engines.lora import trtllm_bytes as lora_bytes
from kvplan.engines.trtllm.offload import cpu_pool as host_cache_pool
from kvplan.engines.trtllm import allreduce, alltoall
from kvplan.engines.trtllm import layout as adp
from kvplan.engines.trtllm import mlp_split
from kvplan.engines.trtllm import cache_dtype as trtllm_cache_dtype
from kvplan.engines.trtllm import uma as trtllm_uma
from kvplan.engines.options import opt_shared_bytes
from kvplan.model.weights import weight_bytes

VERSIONS = ("0.20.0", "1.2.0")
DEFAULT_VERSION = "1.2.0"
# capacity_scheduler_policy: how the scheduler admits (kvplan.engines.admission), read by the simulator, not the pool
OPTS = ("free_gpu_memory_fraction", "tokens_per_block", "max_num_tokens", "capacity_scheduler_policy",
        "os_memory", "page_cache")  # the last two: a unified-memory GPU (kvplan.engines.trtllm.uma)


@dataclass(frozen=True)
class Settings:
    version: str
    free_gpu_memory_fraction: float
    tokens_per_block: int
    max_num_tokens: int
    os_memory: int | None = None  # unified memory: what the OS and other processes hold, as stated (trtllm/uma.py)
    page_cache: int | None = None  # unified memory: a stated page cache (None: a cold load, the whole checkpoint)
    uma_bytes: int = 0  # what those add to the used memory the budget counts (0 on a discrete GPU)
    allreduce_bytes: int = 0  # the custom all-reduce workspace on one node (kvplan.engines.trtllm.allreduce)
    alltoall_bytes: int = 0  # the MoE all-to-all's comm workspace, where booked (kvplan.engines.trtllm.alltoall)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def settings(model, gpu, dep, req, version=None, opts=None, explicit=None) -> Settings:
    opts = dict(opts or {})
    check_opts("trtllm", opts, OPTS)
    version = check_version("trtllm", version, VERSIONS, DEFAULT_VERSION)
    frac = (explicit or {}).get("gpu_memory_utilization") or 0.9
    kv = req.kv_dtype
    if kv is not None and kv.block_elems > 1:
        raise KvplanError(f"TensorRT-LLM has no {kv.name} KV cache; use auto, fp16/bf16 or fp8", EXIT_USAGE)
    tpb = opt_int(opts, "tokens_per_block", 32)
    if tpb < 1:
        raise KvplanError("tokens_per_block must be at least 1", EXIT_USAGE)
    held, cache = opt_shared_bytes(opts, "os_memory", None, gpu), opt_shared_bytes(opts, "page_cache", None, gpu)
    used = trtllm_uma.used_bytes(gpu, held, cache, weight_bytes(model).total)  # 0 where it does not apply
    return Settings(version, opt_float(opts, "free_gpu_memory_fraction", float(frac)), tpb,
                    opt_int(opts, "max_num_tokens", 8192), held, cache, used,
                    allreduce.rank_bytes(model, dep, node_size(dep, gpu), version),
                    alltoall.rank_bytes(model, gpu, dep, version))


def bytes_per_token(layers, tp: int, kv_dtype) -> int:
    total = 0
    for layer in layers:
        if layer.kind == Kind.MLA:
            total += kv_dtype.bytes_for(layer.kv_lora_rank + layer.qk_rope_head_dim)
        elif layer.kind in ATTENTION_KINDS:
            dv = getattr(layer, "v_head_dim", 0) or layer.head_dim
            total += kv_dtype.bytes_for(layer.num_kv_heads * (layer.head_dim + dv) // tp)  # no replication
    return total


def rank_bytes_per_token(model, dep, kv_dtype) -> int:
    """A token's KV bytes on the deployment's largest pipeline stage, what every rank's pool is sized by (the pool's
    blocks are the minimum over ranks)."""
    return max(bytes_per_token(model.layers[a:b], dep.tp, kv_dtype) for a, b in stage_ranges(model, dep))


def capacity(model, dep, kv_bytes: int, context: int, batch: int, st: Settings, kv_dtype, state_dtype=None):
    bpt = rank_bytes_per_token(model, dep, kv_dtype)
    tokens = max(0, kv_bytes) // bpt if bpt else 0
    # max_tokens = budget // bytes per token, then blocks_in_primary_pool = ceil(max_tokens / tokens_per_block):
    # the pool rounds up, up to one block past the budget (KVCacheManager.calculate_max_num_blocks; TensorRT-LLM#6294
    # prints 860,308 estimated tokens and allocates 26,885 blocks, 860,320 tokens)
    blocks = cdiv(tokens, st.tokens_per_block)
    per_req = cdiv(context, st.tokens_per_block)
    conc = blocks / per_req if per_req else 0.0
    lines = [Figure("KV budget per GPU", kv_bytes, "GiB"), Figure("kv size per token", bpt, "B"),
             Figure(f"blocks of {st.tokens_per_block}", blocks, "count"),
             Figure("max tokens", blocks * st.tokens_per_block, "count"),
             Figure(f"requests of {context:,} tokens", conc, "ratio")]
    notes = ()
    if any(getattr(l, "num_kv_heads", 10**9) < dep.tp for l in model.layers):
        notes = ("tp exceeds the KV heads: TensorRT-LLM's estimate (d x H // tp) under-counts the replicated heads",)
    if dep.dp > 1:
        opts = ", ".join(f"{k}: {str(v).lower()}" for k, v in adp.parallel_options(dep).items())
        notes += (f"attention DP ({opts}): each of the {dep.dp} ranks holds attention, dense MLPs, shared experts, "
                  f"embedding and LM head whole, 1/{dep.tp * dep.dp} of the routed experts, whole KV heads and its own "
                  "pool and max_batch_size (kvplan/engines/trtllm/layout.py)",)
    return Capacity("trtllm", st.version, kv_bytes, blocks * st.tokens_per_block, conc, context, bpt, blocks,
                    st.tokens_per_block, tuple(lines), notes)


@dataclass(frozen=True)
class TrtRules:
    """Token slots one request takes per layer: every attention layer (sliding ones too: the KV cache
    manager sizes blocks by the whole sequence, as capacity() does) holds ceil(n / 32) blocks."""

    name = "trtllm"

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        return cdiv(seq_len, block) * block if layer.kind in ATTENTION_KINDS and seq_len > 0 else 0


def kv_budget(free: int, st: Settings, exact: bool) -> int:
    """The KV bytes TensorRT-LLM takes of `free` (memory after the warm-up peak): the fraction of it.
    An exact --kv-cache-memory is taken as given, and a shortfall (free <= 0) is reported as it is:
    scaling it would make a larger fraction look like less room."""
    share = kv_fraction(free, st, exact)
    return free if share == 1 else int(free * share)


def kv_fraction(free: int, st: Settings, exact: bool) -> float:
    """The share of `free` kv_budget keeps: free_gpu_memory_fraction, 1 for an exact budget or a shortfall."""
    return 1.0 if exact or free <= 0 else st.free_gpu_memory_fraction


class TrtLlm(Engine):
    name = "trtllm"
    aliases = ("tensorrt-llm", "trt-llm", "tensorrt_llm")
    versions = VERSIONS
    # bytes_per_token and TrtRules: attention and MLA layers by the whole sequence; a layer without a
    # cache adds nothing. Recurrent states (Mamba, linear attention) are not in the table: TRT-LLM keeps
    # them in a separate Mamba cache manager this engine does not model, and pricing them at 0 would be
    # silently wrong, so such models are refused (check_layers) and planned with the default engine.
    kinds = frozenset({Kind.FULL, Kind.MLA, Kind.SLIDING, Kind.CHUNKED, Kind.NONE})
    default_version = DEFAULT_VERSION
    option_names = OPTS
    offload_rules = {"native": {"cpu": host_cache_pool}, "kvbm": kvbm.RULES}  # kvplan.engines.offload
    offload_missing = {"native": "TensorRT-LLM's host cache is one secondary (CPU) pool"}
    supports_dp = True  # enable_attention_dp on a MoE model: each rank its own requests and pool (trtllm/layout.py)
    # one trtllm-serve process fronts every attention-DP rank: its OpenAIServer holds the tokenizer beside the executor
    # (NVIDIA/TensorRT-LLM@00057725d9a6591f033e44f31c219e2426827bb7:tensorrt_llm/serve/openai_server.py), one HTTP
    # front end unless num_serve_frontends says more (default 1: NVIDIA/TensorRT-LLM PR 19379, open, would make it 8)
    dp_one_front_end = True

    def check_layout(self, model, dep) -> None:
        super().check_layout(model, dep)
        adp.check_attention_dp(model, dep)

    def placement(self, model, dep, gpu=None):
        """Under attention DP a rank holds all but the routed experts whole (kvplan/engines/trtllm/layout.py);
        otherwise vLLM's tensor-parallel placement, but DeepSeek-V3's dense MLPs and shared experts over the
        narrower groups TensorRT-LLM builds them on (kvplan/engines/trtllm/mlp_split.py)."""
        if dep.dp > 1:
            return adp.placement(dep)
        place, narrowed = super().placement(model, dep, gpu), mlp_split.splits(model, dep, gpu)
        return place._replace(mlp=narrowed[0], shared=narrowed[1]) if narrowed else place

    def tp_group(self, model, dep) -> tuple[int, str]:
        """Under attention DP one tp group of every rank, tensor_parallel_size (kvplan/engines/trtllm/layout.py)."""
        return (dep.tp * dep.dp, adp.NODE_GROUP) if dep.dp > 1 else (dep.tp, "")

    def assumptions(self, model, gpu, dep, st) -> tuple:
        """The narrowed DeepSeek-V3 MLP split, where it applies, with the GPUs per node it assumed; on a
        unified-memory GPU the page cache and the OS's share the budget counts (kvplan.engines.trtllm.uma)."""
        said = mlp_split.note(model, dep, gpu)
        uma = trtllm_uma.warnings(gpu, st.os_memory, st.page_cache, weight_bytes(model).total,
                                  st.free_gpu_memory_fraction)  # () on a discrete GPU without the options
        dp_ws = allreduce.note(model, dep, st.allreduce_bytes, st.version)  # settings' rank_bytes
        a2a = alltoall.note(model, gpu, dep, st.version)  # the MNNVL all-to-all's workspace, booked or not
        return (((PlanWarning.literal(said),) if said else ()) + ((PlanWarning.literal(dp_ws),) if dp_ws else ())
                + ((PlanWarning.literal(a2a),) if a2a else ())
                + tuple(w._replace(topic=UNIFIED) for w in uma))

    def result(self, model, gpu, dep, req):
        """The base engine's plan, and on a unified-memory GPU where the weights, page cache and OS's share leave
        nothing, why the pool is not known (kvplan.engines.trtllm.uma)."""
        res = super().result(model, gpu, dep, req)
        if not trtllm_uma.applies(gpu) or res.plan.kv_memory_bytes_per_gpu > 0:
            return res
        return res._replace(plan=dataclasses.replace(res.plan, warnings=(*res.plan.warnings, trtllm_uma.EVICTED)))

    def context_limit(self, model):
        """TensorRT-LLM's inferred max_seq_len (kvplan.engines.context.trtllm_rule)."""
        return trtllm_rule(model)

    def settings(self, model, gpu, dep, req) -> Settings:
        return settings(model, gpu, dep, req, self.version, self.opts, self.explicit)

    def overhead_estimate(self, model, dep, st: Settings) -> int:
        return (activation_estimate(model, dep.tp, tokens=st.max_num_tokens) + runtime_bytes(dep) + st.allreduce_bytes
                + st.alltoall_bytes)

    def request(self, req, st: Settings, model, dep):
        # kv = (total - weights - overhead) x fraction: the planner's (total - w - o) with utilisation 1,
        # then scaled by budget(); on a unified-memory GPU the page cache and the OS's share beside the overhead,
        # estimated or given (--overhead prices activations and runtime, not them: trtllm/uma.py)
        over = (req.overhead_bytes if req.overhead_bytes is not None else
                self.overhead_estimate(model, dep, st)) + st.uma_bytes
        return dataclasses.replace(req, gpu_memory_utilization=1.0, block_size=st.tokens_per_block, overhead_bytes=over)

    def checkpoint_kv_rule(self, ckv):
        """kv_cache_config.dtype auto on a declared KV cache, by release (engines/trtllm/cache_dtype.py)."""
        return trtllm_cache_dtype.checkpoint_kv_rule(ckv, self.version or self.default_version)

    def lora_price(self, model, dep, lora, st: Settings):
        """LoraConfig(max_loras, max_lora_rank): the PEFT device cache's pages (kvplan.engines.lora)."""
        return lora_bytes(model, dep, lora)

    def rules(self, st: Settings) -> TrtRules:
        return TrtRules()

    def budget(self, stages, req, st: Settings):
        exact = req.kv_cache_memory_bytes is not None
        return tuple(s._replace(kv_memory_bytes=kv_budget(s.kv_memory_bytes, st, exact)) for s in stages)

    def kv_share(self, stages, req, st: Settings) -> float:
        """free_gpu_memory_fraction, where kv_budget scales the binding stage's room (not a given budget, nor a
        shortfall): the memory table's 'x free fraction' step."""
        return kv_fraction(min(s.kv_memory_bytes for s in stages), st, req.kv_cache_memory_bytes is not None)

    def capacity(self, model, dep, stages, req, st: Settings, use) -> Capacity:
        return capacity(model, dep, use.kv_memory_bytes_per_gpu, req.context, req.batch, st,
                        cache_dtypes(req, model)[0])

    def max_context(self, model, dep, stages, req, st: Settings, cap: Capacity) -> int:
        return min(model.max_context, (cap.blocks // max(1, req.batch)) * st.tokens_per_block)

    def settings_dict(self, st: Settings, model, dep, req) -> dict:
        out = {**st.as_dict(), "overhead_estimate": self.overhead_estimate(model, dep, st)}
        if dep.dp > 1:  # the LLM API options that lay the deployment out (trtllm/layout.py)
            out["parallel"] = adp.parallel_options(dep)
        return out


ENGINE = TrtLlm
