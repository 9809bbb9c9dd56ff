"""vLLM: the KV budget of `gpu_worker.determine_available_memory` and the block pool of kv_cache_utils.

Sources (read as released wheels; see docs/engines.md section 1 for line numbers):
  * budget: `vllm/v1/worker/gpu_worker.py` v0.11.0 L222-300 (total x gmu - weights - torch peak of the
    profile run - non-torch), v0.20.0+ also minus the CUDA-graph estimate (`vllm/envs.py` v0.20.0 L1725);
    legacy V0 `vllm/worker/worker.py` v0.6.6 L177-248.
  * defaults: gpu_memory_utilization 0.90 -> 0.92 in v0.20.0 (`vllm/config/cache.py` v0.19.1 L41,
    v0.20.0 L66); block 16 (`config/cache.py`), 64 for FlashMLA (`platforms/cuda.py` v0.11.0 L126-182);
    max_num_batched_tokens / max_num_seqs tiers by GPU size (`engine/arg_utils.py` v0.11.0 L1605-1623,
    v0.33.0 L2940-3039; before 0.11 by release from the 0.8.0-0.10.2 wheels, see batch_defaults).
  * the block pool (blocks per request in each kind of layer, kv-cache groups): kvplan/engines/vllm/pool.py.
  * printed figures (num_gpu_blocks, GPU KV cache size, concurrency), the longest context: capacity.py beside it.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from kvplan.engines.vllm.overhead import encoder_budget, encoder_profile_bytes, missing_facts, overhead_terms
from kvplan.engines.vllm.runner import priced_v2
from kvplan.engines.vllm.speculative import check_vllm, vllm_view
from kvplan.planning.plan import UNIFIED, cache_dtypes
from kvplan.engines.context import vllm_rule
from kvplan.engines.base import Capacity, Engine, fact_warnings, parse_version
from kvplan.engines.versions import dotted
from kvplan.hardware.facts import fact_missing
from kvplan.engines.vllm.capacity import capacity, max_context
from kvplan.engines.vllm.deepseek_v4 import release_problem as v4_release_problem
from kvplan.engines.vllm import (
    api_servers, awq_bits, command, gdn_ba, gptq_order, moe_padding, multimodal,
    marlin_fp8, plan_notes, pre_mla, quant_methods, uma, w4a8,
)
from kvplan.engines.vllm.pool import (  # noqa: F401
    BLOCKS_PER_REQUEST, Pool, VllmRules, build_pool, stage_pools, v0_aligned_bytes,
)
from kvplan.engines.vllm.settings import Settings
from kvplan.engines.options import opt_bool, opt_int
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.vllm import cache_dtype as vllm_cache_dtype
from kvplan.engines.vllm import ssm_dtype as vllm_ssm
from kvplan.planning.deploy import stage_ranges
from kvplan.planning.plan_warnings import PlanWarning
from kvplan.model.compressed import CompressedMLA, has_compressed
from kvplan.model.layers import IndexedMLA, Kind
from kvplan.model.recurrent import ParallelHybrid
from kvplan.model.weights import weight_bytes
from kvplan.engines import fp8_blocks, fp8_linear, kvbm, lmcache, served_dtype
from kvplan.engines.lora import vllm_bytes as lora_bytes
from kvplan.engines.vllm.offload import cpu_pool as vllm_cpu_pool
from kvplan.engines.vllm.defaults import (  # noqa: F401 (re-exported: tests and benchmarks read them here)
    DEFAULT_VERSION, OPTS, VERSIONS, _big_gpu, _device_name, _named_hopper, batch_defaults, reads_device_name, settings,
)


def overhead(model, dep, st: Settings) -> tuple[int, dict]:
    """Per-GPU non-KV memory vLLM subtracts besides the weights (modelled and calibrated per term in
    kvplan/engines/vllm/overhead.py on the log corpus)."""
    parts = dict(_overhead_terms(model, dep, st, (model.quantization.quant_method, model.quantization.act_order)))
    return sum(parts.values()), parts


@lru_cache(maxsize=16)
def _overhead_terms(model, dep, st: Settings, _unequal: tuple) -> tuple:
    """The terms, once per plan (request() takes the sum, settings_dict() the terms); `_unequal`: what == skips."""
    return tuple(overhead_terms(model, dep, st).items())


def dcp_release_problem(model, version: str) -> str | None:
    """Why this vLLM release has no decode context parallel for this model (None: it has).
    MLA from 0.10.2 (vllm-project/vllm#23734, merged 2025-08-27); GQA/MQA full attention from
    0.11.0 (#24864, FlashAttention, merged 2025-09). The layout's own limits: kvplan.planning.deploy.dcp_problem."""
    v = parse_version(version)
    if v < (0, 10, 2):
        return f"vLLM {version} has no --decode-context-parallel-size (added in 0.10.2, vllm-project/vllm#23734)"
    if v < (0, 11, 0) and any(layer.kind == Kind.FULL for layer in model.layers):
        return (f"vLLM {version} shards only MLA caches over decode-context-parallel ranks; GQA came in 0.11.0 "
                "(vllm-project/vllm#24864)")
    return None


# architecture -> (the first release with its model class, the change that added it): an older release has no class to
# load it with, so a plan for one is refused rather than priced on rules (the block-FP8 check) of a model it lacks
MODEL_FROM = {"MiMoV2FlashForCausalLM": ((0, 14, 0), "vllm-project/vllm#30836, merged 2025-12-19")}


def model_release_problem(model, version: str) -> str | None:
    """Why this vLLM release cannot load this model at all (None: it can, or kvplan has no first release for it)."""
    first = MODEL_FROM.get(model.architecture)
    if first and parse_version(version) < first[0]:
        return (f"vLLM {version} has no {model.architecture} (added in {dotted(first[0])}, {first[1]}): "
                f"plan it with a later {arg('engine_version')}")
    return None


class Vllm(Engine):
    name = "vllm"
    display_name = "vLLM"
    stage_split_env, stage_split_since = "VLLM_PP_LAYER_PARTITION", ((0, 5, 4), 0)  # kvplan.engines.stage_split
    versions = VERSIONS
    default_version = DEFAULT_VERSION
    option_names = OPTS
    emits = True
    fit_follows_ssm_dtype = False  # the fit's corpus keeps the reader's state types (kvplan.engines.vllm.ssm_dtype)
    kinds = frozenset(BLOCKS_PER_REQUEST) | {Kind.NONE}  # its table; a layer that caches nothing takes no block
    loaded_label = "Model loading took (weights as loaded)"  # gpu_model_runner's line
    # DeepseekV32IndexerCache: one more MLAAttentionSpec per layer; Falcon-H1: a FullAttentionSpec and a MambaSpec
    reads_layers = frozenset({IndexedMLA, ParallelHybrid, CompressedMLA})
    # --block-size: vllm/config/cache.py BlockSize, Literal[1, 8, 16, 32, 64, 128] in v0.11.0 (docs/engines.md),
    # with 256 in later releases; kvplan takes the union for every release
    block_sizes = (1, 8, 16, 32, 64, 128, 256)
    supports_dp = True  # -dp: each DP rank an engine core with its own scheduler and pool
    supports_speculative = True  # --speculative-config: drafter layers in the same groups (kvplan.planning.speculative)
    kv_dtype_flags = {"fp8": "fp8", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}  # --kv-cache-dtype
    # offload tiers (kvplan.engines.offload): its own CPU tier by release, LMCache's local CPU backend, Dynamo KVBM's
    offload_rules = {"native": {"cpu": vllm_cpu_pool}, "lmcache": {"cpu": lmcache.cpu_pool}, "kvbm": kvbm.RULES}
    offload_missing = {"native": "vLLM's native offloading has a CPU tier only",
                       "lmcache": "LMCache's disk and remote backends are not modelled; its local CPU backend is"}
    supports_dcp = True  # -dcp: each rank of a dcp group holds every dcp-th token (check_layout: by release)
    dcp_tokens_whole = True  # "GPU KV cache size" counts the whole dcp group's tokens

    def dp_front_end(self, version: str | None = None) -> tuple[bool, str]:
        """By release (`version`, else this engine's; one that is not a release number: this engine's):
        kvplan.engines.vllm.api_servers."""
        v = version or self.version or self.default_version
        try:
            one = api_servers.one_for_all(v)
        except KvplanError:
            v = self.version or self.default_version
            one = api_servers.one_for_all(v)
        return one, api_servers.said(v)

    def check_layout(self, model, dep) -> None:
        super().check_layout(model, dep)
        version = self.version or self.default_version
        why = model_release_problem(model, version)  # before any rule of a model class the release lacks
        if why:
            raise KvplanError(why, EXIT_USAGE, param="engine_version", value=version)
        awq_bits.check(model, version)  # 8-bit AWQ where the release's AWQ configs take 4 bits only
        awq_bits.check_tp(model, dep, version)  # AWQ at group_size -1 under tensor parallelism: zero-row scales
        gptq_order.check(model, version)  # GPTQ act-order from 0.30.0
        fp8_linear.check_vllm(model, dep, version)  # a block-FP8 dense linear shard
        fp8_blocks.check(model, dep, "vllm", version)  # a block-FP8 expert shard
        if dep.dcp > 1 and has_compressed(model.layers):
            raise KvplanError("vLLM's DeepSeek-V4 window caches refuse decode context parallelism "
                              "(SlidingWindowSpec asserts dcp 1)", EXIT_USAGE)
        if dep.dcp > 1:
            why = dcp_release_problem(model, self.version or self.default_version)
            if why:
                raise KvplanError(why, EXIT_USAGE)

    def check_layers(self, model, kv_dtype=None) -> None:
        """DeepSeek-V4 only in the releases kvplan reads it for (kvplan.engines.vllm.deepseek_v4); the refusal also
        names the fp8 cache those releases need unless `kv_dtype` (the plan's, None: not known here) is fp8."""
        super().check_layers(model)
        if has_compressed(model.layers):
            version = self.version or self.default_version
            why = v4_release_problem(parse_version(version), version, kv_dtype, defaulted=self.version is None)
            if why:
                raise KvplanError(why, EXIT_USAGE, param="engine_version", value=version)

    def float32_served(self) -> tuple[str, str]:
        """A float32 config served in 16 bits by release (kvplan.engines.served_dtype.vllm_float32)."""
        return served_dtype.vllm_float32(parse_version(self.version or DEFAULT_VERSION))

    def context_limit(self, model):
        """vLLM's derived max_model_len by release (kvplan.engines.context.vllm_rule)."""
        return vllm_rule(model, parse_version(self.version or DEFAULT_VERSION))

    def settings(self, model, gpu, dep, req) -> Settings:
        """The release's settings, once its quantization methods hold the plan's (vllm.quant_methods) and its AWQ, W4A8
        and compressed-tensors FP8 rules on `gpu` load the checkpoint (vllm.awq_bits, vllm.w4a8, vllm.marlin_fp8)."""
        quant_methods.check_release(model, req, self.version or self.default_version, defaulted=self.version is None)
        awq_bits.check_gpu(model, self.version or self.default_version, gpu)
        w4a8.check(model, dep, gpu, self.version or self.default_version)
        marlin_fp8.check(model, gpu, self.version or self.default_version)  # block FP8 on W8A16 before 0.15.0
        return settings(model, gpu, dep, req, self.version, self.opts, self.explicit)

    def assumptions(self, model, gpu, dep, st: Settings) -> tuple:
        """The batch tier's device name (reads_device_name) and the kernels' and workspace's compute capability
        and fabric (overhead.missing_facts), where the profile leaves them out; on a unified-memory GPU, the OS's
        share at start-up and the host growth vLLM counts (kvplan.engines.vllm.uma)."""
        named = reads_device_name(st.v, gpu) and fact_missing(gpu, "device_name")
        facts = fact_warnings("vLLM", gpu, [*(["device_name"] if named else []), *missing_facts(model, dep, st)])
        # tagged as what this engine assumes of unified memory, so the plan's general note is not said twice
        states = vllm_ssm.assumption(model, st)  # the recurrent states' types (kvplan.engines.vllm.ssm_dtype)
        ba = gdn_ba.note(model, dep.tp, st.v, gpu, st.weight_dtype, stage_ranges(model, dep))  # in_proj_ba whole
        return (*facts, *(w._replace(topic=UNIFIED) for w in uma.warnings(gpu, st)),
                *states, *plan_notes.release_notes(st), *ba,
                *plan_notes.refined(model, dep, st), *moe_padding.note(model, dep, st),
                *plan_notes.marlin(model, dep, st),
                *self._eager())

    def _eager(self) -> tuple:
        """enforce_eager, said where the speed figures cannot follow it: the corpus fit skips every run stating its
        engine's CUDA graphs off (kvplan.speed.fields.GRAPHS_OFF), so the step times are a graph run's."""
        if not opt_bool(self.opts, "enforce_eager", False):
            return ()
        return (PlanWarning("enforce_eager=true: vLLM runs without CUDA graphs, but the step times are priced as "
                            "the speed corpus's runs ran, with graphs (its eager runs are skipped: "
                            "kvplan.speed.fields.GRAPHS_OFF), so eager decode steps may take longer than shown"),)

    def check_speculative(self, method: str) -> None:
        """Draft models from 0.15.0, MTP from 0.11.0 (kvplan.engines.vllm.speculative.check_vllm)."""
        check_vllm(method, parse_version(self.version or DEFAULT_VERSION))

    def restated(self, model, notices):
        """The reader's tower notice where limit_mm_per_prompt 0 skips the tower (kvplan.engines.vllm.multimodal)."""
        return multimodal.restated(model, opt_int(self.opts, "limit_mm_per_prompt", multimodal.UNSET), notices)

    def view(self, model, st: Settings):
        """With an MTP drafter before 0.20.0, each MTP layer's own LM head copy (vllm.speculative); the recurrent
        states in the types the release pools them in (vllm.ssm_dtype); from 0.30.0 no GPTQ g_idx (vllm.gptq_order)."""
        model = pre_mla.as_planned(model, st.version)  # before 0.7.1: MLA decompressed (kvplan.engines.vllm.pre_mla)
        vllm_ssm.check(model, st)
        model = gptq_order.view(vllm_view(model, st.v), st.v)
        return vllm_ssm.view(multimodal.without_towers(model, st.mm_limit), st)

    def loaded_extra(self, model, dep, st: Settings) -> int:
        """What "Model loading took" holds beyond the checkpoint: MXFP4 experts padded for the kernel, NVFP4 block
        scales swizzled on Blackwell, the RoPE cos/sin tables (kvplan.engines.vllm.overhead, `weights_repack`)."""
        return overhead(model, dep, st)[1]["weights_repack"]

    def request(self, req, st: Settings, model, dep):
        # the non-KV memory besides the weights: the repacking is booked as weights (loaded_extra)
        total, parts = overhead(model, dep, st)
        # on a unified-memory GPU, what vLLM also counts of the host's growth during start-up (uma.host_counted),
        # beside the overhead, estimated or given: --overhead prices activations and runtime, not the host's growth
        host = uma.host_counted(st.gpu, st, weight_bytes(model).total)
        over = (req.overhead_bytes if req.overhead_bytes is not None else total - parts["weights_repack"]) + host
        req = vllm_cache_dtype.as_cached(req, model)  # MiMo-V2-Flash: the model's own dtype
        # the states' types as the pool holds them (one source of truth: memory and speed read them)
        ssm = vllm_ssm.pool_ssm_dtype(model, st) or req.ssm_dtype
        conv = vllm_ssm.conv_dtype(model, st) or req.state_dtype
        return dataclasses.replace(req, gpu_memory_utilization=st.gpu_memory_utilization, block_size=st.block_size,
                                   overhead_bytes=over, ssm_dtype=ssm, state_dtype=conv,
                                   host_overlap=opt_bool(self.opts, "async_scheduling", False)
                                   if "async_scheduling" in self.opts else None)  # the speed figures': plan_overlaps

    def checkpoint_kv_rule(self, ckv):
        """--kv-cache-dtype auto on a checkpoint's declared KV cache, by release (engines/vllm/cache_dtype.py)."""
        return vllm_cache_dtype.checkpoint_kv_rule(ckv, self.version or self.default_version)

    def lora_price(self, model, dep, lora, st: Settings):
        """--max-loras x --max-lora-rank slots on the wrapped projections, by release (kvplan.engines.lora)."""
        return lora_bytes(model, dep, lora, st.version)

    def rules(self, st: Settings) -> VllmRules:
        return VllmRules.of(st)

    def capacity(self, model, dep, stages, req, st: Settings, use) -> Capacity:
        kvd, std = cache_dtypes(req, model)
        cap = capacity(model, dep, [s.kv_memory_bytes for s in stages], req.context, req.batch, st, kvd, std)
        v2 = priced_v2(model, st.v, st.gpu, st.weight_dtype, st.v1_fallback)  # the runner (kvplan.engines.vllm.runner)
        encoder = encoder_profile_bytes(model, encoder_budget(model, st.max_num_batched_tokens), st.v, v2, st.v1)
        cap = cap._replace(notes=(*cap.notes, *vllm_cache_dtype.notes(model, kvd)),
                           lines=(*cap.lines, *multimodal.rows(model, st, encoder)))
        return cap._replace(notes=(*cap.notes, *plan_notes.capacity_notes(model, dep, req, st)))

    def fits(self, cap: Capacity, req) -> bool:
        return cap.blocks > 0 and cap.max_concurrency >= req.batch

    def answers(self, model, dep, stages, req, st: Settings, use, cap: Capacity):
        """DeepSeek-V4: the requests the scheduler admits (block ids over all groups), not the printed concurrency
        (kvplan.engines.vllm.deepseek_v4), which can be higher; none where the start-up check refuses (uma)."""
        out = super().answers(model, dep, stages, req, st, use, cap)
        if uma.refuses(st.gpu, st):  # its start-up check on a unified-memory GPU: nothing is served
            return out._replace(max_concurrency=0, max_context=0, fits=False)
        if cap.admitted is None:  # capacity() worked it out at this request's context
            return out
        return out._replace(max_concurrency=cap.admitted, fits=cap.blocks > 0 and cap.admitted >= req.batch)

    def max_context(self, model, dep, stages, req, st: Settings, cap: Capacity) -> int:
        return max_context(model, dep, cap, req.batch, st, *cache_dtypes(req, model))

    # The pool's arithmetic from a given budget (check-log reads a budget or a block count from a log).
    def block(self, model, dep, st: Settings, kv_dtype, state_dtype) -> tuple[int, int]:
        """(bytes of one block id across its group, tokens per block) of the first stage's pool."""
        pool = stage_pools(model, dep, st, kv_dtype, state_dtype)[0]
        return pool.bytes_per_block, pool.block_size

    def capacity_at(self, model, dep, st: Settings, kv_bytes: int, context: int, kv_dtype, state_dtype) -> Capacity:
        return capacity(model, dep, kv_bytes, context, 1, st, kv_dtype, state_dtype)

    def longest_context(self, model, dep, st: Settings, cap: Capacity, batch: int, kv_dtype, state_dtype) -> int:
        return max_context(model, dep, cap, batch, st, kv_dtype, state_dtype)

    def settings_dict(self, st: Settings, model, dep, req) -> dict:
        parts = overhead(model, dep, st)[1]
        return {**st.as_dict(), **{f"overhead_{k}": v for k, v in parts.items()},
                "overhead_host_token_table": uma.token_table_bytes(st.gpu, st),
                "overhead_page_cache": uma.page_cache_bytes(st.gpu, st, weight_bytes(model).total),
                "memory_unified": uma.unified(st.gpu), "free_from_meminfo": uma.reads_meminfo(st.gpu, st.v),
                # data-parallel ranks that step together: a MoE model's (DPEngineCoreProc), a dense one's run apart
                # (kvplan.engines.scheduler.LOCKSTEP_DP; read by lockstep_of)
                "dp_lockstep": dep.dp if dep.dp > 1 and model.params.num_experts else 1}

    def emit_args(self, plan, model, settings: dict, gpu=None) -> list[str]:
        return command.serve_args(self, plan, model, settings, gpu)

    def parallel_flags(self, dep, model) -> list[str]:
        return command.parallel_flags(dep)

    def emit_note(self, result, model) -> str | None:
        return command.margin_note(result, model)

    def emit_weights_note(self, result, model) -> str | None:
        return command.weights_note(self, result, model)

ENGINE = Vllm
