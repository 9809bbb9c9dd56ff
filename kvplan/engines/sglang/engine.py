"""SGLang: `mem_fraction_static` and the token pool of `ModelRunner.profile_max_num_token`.

Sources (PyPI wheels; docs/engines.md section 2):
  * the releases, options and the `Settings` of one plan: kvplan.engines.sglang.settings.
  * default mem_fraction_static, chunked prefill, cuda-graph batch and DP attention: kvplan.engines.sglang.defaults.
  * budget: `rest = free_after_weights - free_before_weights x (1 - fraction)` (0.4.3.post4
    `model_executor/model_runner.py` L608-633; 0.5.23 `mem_cache/kv_cache_configurator.py` L2990-3060),
    so the weights and the CUDA context are already out of it.
  * the token pool out of it (the cell per token, #tokens, SWA sub-pool, state slots): kvplan.engines.sglang.pool.
  * DeepSeek-V4's pools (page 256, SWA share 0.1, per full token, 0.5.15-0.5.18): kvplan.engines.sglang.dsv4.
"""

from __future__ import annotations

import dataclasses

from kvplan.engines import fp8_blocks, fp8_linear, served_dtype
from kvplan.engines.lora import sglang_bytes as sglang_lora_bytes
from kvplan.engines.sglang import allreduce as sglang_allreduce
from kvplan.engines.sglang import awq_rules as sglang_awq
from kvplan.engines.sglang import attention as sglang_attention
from kvplan.engines.sglang import command
from kvplan.engines.sglang import cache_dtype as sglang_cache_dtype
from kvplan.engines.sglang import dsa as sglang_dsa
from kvplan.engines.sglang import dsv4 as sglang_dsv4
from kvplan.engines.sglang import gptq_marlin as sglang_gptq_marlin
from kvplan.engines.sglang import fp8_default as sglang_fp8
from kvplan.engines.sglang import layout as sglang_layout
from kvplan.engines.sglang import mamba as sglang_mamba
from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.sglang import quant_methods as sglang_quant
from kvplan.engines.sglang import req_pool as sglang_req_pool
from kvplan.engines.sglang import uma as sglang_uma, unpriced as sglang_unpriced
from kvplan.engines.sglang.boot import emit_advice
from kvplan.engines.sglang.defaults import (  # noqa: F401 (default_fraction re-exported: sglang.default_fraction)
    default_fraction, dp_attention,
)
from kvplan.engines.sglang.settings import (  # noqa: F401 (re-exported: sglang.VERSIONS, sglang.settings, ...)
    DEFAULT_VERSION, OPTS, VERSIONS, Settings, settings,
)
from kvplan.planning.plan import UNIFIED, cache_dtypes
from kvplan.model.weights import weight_bytes
from kvplan.engines.sglang.layout import reads_capability
from kvplan.hardware.facts import fact_missing, vendor_of
from kvplan.engines.context import sglang_rule
from kvplan.engines.base import Capacity, Engine, fact_warnings, opt_bool
from kvplan.model.compressed import CompressedMLA, has_compressed
from kvplan.model.layers import IndexedMLA, Kind
from kvplan.model.recurrent import ParallelHybrid
from kvplan.engines.sglang.offload import cpu_pool as hicache_pool
from kvplan.engines.sglang.pool import capacity, k_size_gib, pool_cell
from kvplan.engines.sglang.rules import SglangRules


class Sglang(Engine):
    name = "sglang"
    display_name = "SGLang"
    stage_split_env, stage_split_since = "SGLANG_PP_LAYER_PARTITION", sglang_layout.PP_FROM  # with --pp-size
    versions = VERSIONS
    default_version = DEFAULT_VERSION
    option_names = OPTS
    emits = True
    # cell_bytes and SglangRules: full and MLA layers in the full pool, sliding and chunked in the SWA pool
    # (from 0.5), recurrent states not pooled (a note), a layer without a cache nothing
    kinds = frozenset({Kind.FULL, Kind.MLA, Kind.SLIDING, Kind.CHUNKED, Kind.STATE, Kind.NONE})
    loaded_label = "Load weight end ... mem usage (weights as loaded)"  # model_runner's line
    # Falcon-H1: attention in the token pool, its mixer's state slots; DeepSeek-V4: its pools (0.5.15-0.5.18, dsv4.py)
    reads_layers = frozenset({IndexedMLA, ParallelHybrid, CompressedMLA})  # DSA's pool: kvplan.engines.sglang.dsa
    supports_dp = True  # DP attention: each rank its own token pool and requests
    # --dp N under one server: one TokenizerManager in the server process, the DP controller and schedulers as
    # subprocesses (sgl-project/sglang@18bfdd16794a857cefaebc00a0964935b8d0a026:python/sglang/srt/entrypoints/engine.py
    # `_launch_subprocesses`), so every request of every rank crosses the one front end
    dp_one_front_end = True
    offload_rules = {"native": {"cpu": hicache_pool}}  # HiCache's host pool (L2): kvplan.engines.offload
    offload_missing = {"native": "SGLang HiCache's L3 storage backends size themselves; kvplan sizes its host pool "
                                 "(cpu)"}

    def result(self, model, gpu, dep, req):
        """The base template on the weights SGLang serves: FP8 for a BF16 DeepSeek-V3 on capability 10.x in
        0.5.5-0.5.10 (kvplan.engines.sglang.fp8_default), and on a DSA model's fp8 cache where its auto is that
        (kvplan.engines.sglang.dsa), said in the plan's warnings."""
        version = self.version or self.default_version
        model = sglang_quant.as_read(model, version)  # the exclusion list as this release reads it
        req, said = sglang_fp8.served(model, gpu, version, req)
        req, kv_said = sglang_dsa.served(model, gpu, version, req)
        said = (*said, *kv_said)
        res = super().result(model, gpu, dep, req)
        res = res._replace(plan=dataclasses.replace(res.plan, warnings=(*res.plan.warnings, *said))) if said else res
        return sglang_req_pool.checked(res)  # the request-slot pool above the fraction

    def float32_served(self) -> tuple[str, str]:
        """A float32 config served as float16 (kvplan.engines.served_dtype.SGLANG_FLOAT32)."""
        return served_dtype.SGLANG_FLOAT32

    def context_limit(self, model):
        """SGLang's derived context_length (kvplan.engines.context.sglang_rule)."""
        return sglang_rule(model)

    def settings(self, model, gpu, dep, req) -> Settings:
        sglang_dsv4.check_gpu(model, gpu)  # DeepSeek-V4's kernels: the capabilities its releases run on
        version = self.version or self.default_version
        sglang_awq.check_gpu(model, gpu, version)  # AWQ: 4 bits from 0.5.3, compute capability 7.5+
        tp_size = self.tp_group(model, dep)[0]
        dense_tp = sglang_layout.dense_split(self.opts, tp_size)
        sglang_gptq_marlin.check(model, dep, gpu, version, tp_size, dense_tp)  # a shard Marlin's repack refuses
        return settings(model, gpu, dep, req, self.version, self.opts, self.explicit)

    def tp_group(self, model, dep) -> tuple[int, str]:
        """SGLang's --tp-size: every rank of the replica group under DP attention (unpriced.NODE_GROUP), else tp."""
        return (dep.tp * dep.dp, sglang_unpriced.NODE_GROUP) if dp_attention(model, dep, self.opts) else (dep.tp, "")

    def view(self, model, st: Settings):
        """Llama 4 without its vision tower where SGLang builds none (kvplan.engines.sglang.multimodal)."""
        return sglang_mm.without_tower(model, st.version, opt_bool(self.opts, "enable_multimodal", False))

    def restated(self, model, notices):
        version = self.version or self.default_version
        notices = sglang_quant.restated(model, version, notices)  # the exclusion list's notes as this release reads it
        return sglang_mm.restated(model, version, opt_bool(self.opts, "enable_multimodal", False), notices)

    def check_layout(self, model, dep) -> None:
        super().check_layout(model, dep)
        sglang_layout.check_pp(self.version or self.default_version, dep.pp)  # --pp-size from 0.4.6.post2
        tp_size = self.tp_group(model, dep)[0]
        dense_tp = sglang_layout.dense_split(self.opts, tp_size)
        fp8_linear.check_sglang(model, dep, self.version or self.default_version, tp_size, dense_tp)  # dense shard
        fp8_blocks.check(model, dep, "sglang", self.version or self.default_version)  # a block-FP8 expert shard

    def check_layers(self, model, kv_dtype=None) -> None:
        """DeepSeek-V4 only in the releases whose pools kvplan reads (kvplan.engines.sglang.dsv4), and only a
        quant_method the release registers (kvplan.engines.sglang.quant_methods)."""
        super().check_layers(model)
        sglang_dsv4.check_release(model, self.version or self.default_version, defaulted=self.version is None)
        sglang_quant.check_release(model, self.version or self.default_version, defaulted=self.version is None)

    def assumptions(self, model, gpu, dep, st: Settings) -> tuple:
        """The compute capability of the shared-expert fusion test, the MLA backend's page and the FP8 default
        (attention.py, fp8_default.py), and the fabric of the custom all-reduce rule (kvplan.engines.sglang.allreduce),
        where the profile leaves them out; the terms not priced (kvplan.engines.sglang.unpriced); on a unified-memory
        GPU, the free memory the pool is sized from (kvplan.engines.sglang.uma)."""
        vendor = vendor_of(gpu)
        version = self.version or self.default_version
        needs = (vendor in ("NVIDIA", "AMD") and fact_missing(gpu, "compute_capability")
                 and (reads_capability(model, self.opts, version) or sglang_fp8.reads_capability(model, version)
                      or (vendor == "NVIDIA" and sglang_awq.reads_capability(model))
                      or (vendor == "NVIDIA" and sglang_attention.reads_capability(model, self.opts, version))))
        tp_size = self.tp_group(model, dep)[0]
        fabric = sglang_allreduce.needs_fabric(gpu, tp_size)
        facts = (*fact_warnings("SGLang", gpu, (["compute_capability"] if needs else []) +
                                (["interconnect.kind"] if fabric else [])),  # and the terms it leaves unpriced
                 *sglang_unpriced.warnings(model, gpu, tp_size, dp_attention(model, dep, self.opts), version, dep))
        # tagged as what this engine assumes of unified memory, so the plan's general note is not said twice
        # (sglang_uma.warnings: none on a discrete GPU without the options)
        if st is None:
            return facts
        return (*facts, *(w._replace(topic=UNIFIED) for w in sglang_uma.warnings(gpu, st, weight_bytes(model).total)))

    def placement(self, model, dep, gpu=None):
        """DP attention, --moe-dense-tp-size, --enable-dp-lm-head and shared-expert fusion place weights
        differently (kvplan/engines/sglang/layout.py, docs/engines.md 9.2)."""
        dpa = dp_attention(model, dep, self.opts)
        return sglang_layout.placement(model, gpu, dep, self.opts, self.version or self.default_version, dpa)

    def loaded_extra(self, model, dep, st: Settings) -> int:
        """The RoPE tables and MXFP4 expert layouts SGLang builds while loading (kvplan.engines.sglang.loaded): in
        "mem usage"."""
        return st.loaded_extra

    def request(self, req, st: Settings, model, dep):
        # rest = free_before x fraction - weights, with free_before = total - init: as the planner's
        # "usable x utilisation - weights - overhead" with overhead = init x fraction; on a unified-memory GPU also
        # fraction x the OS's share and a cold load's page cache (kvplan.engines.sglang.uma), and from 0.5.18 a
        # multimodal model's embedding cache (sglang_mm.reserved), beside the overhead, estimated or given:
        # --overhead prices what init and activations hold, not the OS, the page cache or that reservation
        over = (req.overhead_bytes if req.overhead_bytes is not None else
                int(st.init_bytes * st.mem_fraction_static)) + st.uma_bytes + sglang_mm.reserved(st)
        sglang_cache_dtype.check_flag(req.kv_dtype, model, st.version, self.auto_kv_dtype(model))  # int8, ...
        if has_compressed(model.layers):  # its page and cache dtype (kvplan.engines.sglang.dsv4)
            sglang_dsv4.check_settings(st.page_size, cache_dtypes(req, model)[0])
        ssm = sglang_mamba.pool_ssm_dtype(model, st.state)  # the dtype the state pool holds: speed prices it
        # DP attention's ranks count in --tp-size, which a rank's MLA heads (and so ROCm's default backend) read; the
        # backend named and the radix cache's state set an MLA prefill's form, which the speed figures price
        # (kvplan.speed.plan.prefill_form says which); a prefill graph kept runs its steps without MoE launch costs
        return dataclasses.replace(req, gpu_memory_utilization=st.mem_fraction_static, block_size=st.page_size,
                                   overhead_bytes=over, ssm_dtype=ssm or req.ssm_dtype,
                                   attention_dp=st.attention_dp > 1,
                                   attention_backend=str(self.opts.get("attention_backend") or ""),
                                   prefix_cache=not opt_bool(self.opts, "disable_radix_cache", False),
                                   prefill_graph=st.prefill_replay)

    def with_checkpoint_kv(self, model, req):
        """A declared KV cache as the base engine reads it, then DeepSeek-V4's own auto, fp8_e4m3
        (kvplan.engines.sglang.dsv4.auto_cache)."""
        req, said = super().with_checkpoint_kv(model, req)
        req, v4 = sglang_dsv4.auto_cache(model, req)
        return req, (*said, *v4)

    def checkpoint_kv_rule(self, ckv):
        """--kv-cache-dtype auto on a checkpoint's declared KV cache, by release (engines/sglang/cache_dtype.py)."""
        return sglang_cache_dtype.checkpoint_kv_rule(ckv, self.version or self.default_version)

    def lora_price(self, model, dep, lora, st: Settings):
        """--max-loras-per-batch x --max-lora-rank buffers of the LoRA memory pool (kvplan.engines.lora)."""
        return sglang_lora_bytes(model, dep, lora)

    def rules(self, st: Settings) -> SglangRules:
        return SglangRules(st.page_size, st.hybrid_swa, st.dsa)

    def capacity(self, model, dep, stages, req, st: Settings, use) -> Capacity:
        kvd = cache_dtypes(req, model)[0]
        if has_compressed(model.layers):
            return self.capacity_at(model, dep, st, use.kv_memory_bytes_per_gpu, req.context, kvd)
        return capacity(model, dep, use.kv_memory_bytes_per_gpu, req.context, req.batch, st, kvd)

    def max_context(self, model, dep, stages, req, st, cap: Capacity) -> int:
        if has_compressed(model.layers):
            return sglang_dsv4.max_context(model, dep, cap, req.batch, st, self._attn_dp(model, dep))
        hi = min(model.max_context, cap.tokens // max(1, req.batch))  # each request holds its tokens
        held = cap.pooled and cap.pooled.requests  # the state pool capacity() built caps the request slots
        return sglang_req_pool.longest(st, cap.tokens, hi, model.max_model_len, held)  # its request slots too

    def _attn_dp(self, model, dep) -> int:  # each DP-attention worker its own pools
        return dep.dp if dp_attention(model, dep, self.opts) else 1

    # The pool's arithmetic from a given budget or token count (check-log reads them from a log).
    def capacity_at(self, model, dep, st: Settings, kv_bytes: int, context: int, kv_dtype,
                    state_dtype=None) -> Capacity:
        if has_compressed(model.layers):
            return sglang_dsv4.capacity(model, dep, kv_bytes, context, st, self._attn_dp(model, dep), kv_dtype)
        return capacity(model, dep, kv_bytes, context, 1, st, kv_dtype)

    def k_size_gib(self, model, dep, st: Settings, tokens: int, kv_dtype) -> float:
        """The K size (or an MLA pool's one "KV size", a DSA pool's with its indexer keys: 0.5.8.post1 wheel
        mem_cache/memory_pool.py L1832-1836, kvplan.engines.sglang.dsa) SGLang prints for `tokens`; refused where the
        model has a cache kvplan does not size for SGLang `st.version`, as a plan is."""
        self.check_layers(model)
        sglang_dsv4.no_log_check(model)
        return k_size_gib(tokens, model, dep, kv_dtype, st)

    def token_bytes(self, model, dep, st: Settings, kv_dtype) -> int:
        """Full + SWA pool bytes of one token on one rank of the stage that bounds the pool."""
        self.check_layers(model)
        sglang_dsv4.no_log_check(model)
        return sum(pool_cell(model, dep, kv_dtype, st)[:2])

    def emit_args(self, plan, model, settings: dict, gpu=None) -> list[str]:
        return command.launch_args(self, plan, model, settings, gpu)

    def parallel_flags(self, dep, model) -> list[str]:
        return command.parallel_flags(dep, model)

    def emit_note(self, result, model) -> str | None:
        """The margin --mem-fraction-static leaves (kvplan.engines.sglang.boot)."""
        return emit_advice(result.plan, result.settings, model)[1]

    def emit_weights_note(self, result, model) -> str | None:
        return command.weights_note(self, result, model)

ENGINE = Sglang
