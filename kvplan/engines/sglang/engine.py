"""SGLang: `mem_fraction_static` and the token pool of `ModelRunner.profile_max_num_token`.

Sources (PyPI wheels; docs/engines.md section 2):
  * the releases, options and the `Settings` of one plan: kvplan.engines.sglang.settings.
  * default mem_fraction_static, chunked prefill, cuda-graph batch and DP attention: kvplan.engines.sglang.defaults.
  * budget: `rest = free_after_weights - free_before_weights x (1 - fraction)` (0.4.3.post4
    `model_executor/model_runner.py` L608-633; 0.5.23 `mem_cache/kv_cache_configurator.py` L2990-3060),
    so the weights and the CUDA context are already out of it.
  * cell per token: H_rank x (d_k + d_v) x L x b with H_rank = max(1, H // tp); MLA 576 x L x b, not split
    (0.4.3.post4 `configs/model_config.py` L213-220, model_runner L612-623); tokens rounded down to the
    page (default page 1); buffers get `size + page` rows (`mem_cache/memory_pool.py` L209-212).
  * hybrid SWA (0.5.x): swa_full_tokens_ratio 0.8; cell = full layers + 0.8 x SWA layers; full pool
    = budget // cell, SWA pool = 0.8 x full (0.5.23 `pool_configurator.py` L656-905).
  * hybrids' recurrent-state slots come out of "rest" first, by release: kvplan.engines.sglang.mamba.
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
from kvplan.engines.sglang import defaults as sglang_defaults
from kvplan.engines.sglang import dsa as sglang_dsa
from kvplan.engines.sglang import dsv4 as sglang_dsv4
from kvplan.engines.sglang import gptq_marlin as sglang_gptq_marlin
from kvplan.engines.sglang import fp8_default as sglang_fp8
from kvplan.engines.sglang import layout as sglang_layout
from kvplan.engines.sglang import mamba as sglang_mamba
from kvplan.engines.sglang import multimodal as sglang_mm
from kvplan.engines.sglang import quant_methods as sglang_quant
from kvplan.engines.sglang import req_pool as sglang_req_pool
from kvplan.engines.sglang import swa as sglang_swa
from kvplan.engines.sglang import uma as sglang_uma, unpriced as sglang_unpriced
from kvplan.engines.sglang.boot import emit_advice
from kvplan.engines.sglang.defaults import (  # noqa: F401 (default_fraction re-exported: sglang.default_fraction)
    default_fraction, dp_attention,
)
from kvplan.engines.sglang.settings import (  # noqa: F401 (re-exported: sglang.VERSIONS, sglang.settings, ...)
    DEFAULT_VERSION, OPTS, VERSIONS, Settings, settings,
)
from kvplan.planning.deploy import Deployment, stage_ranges
from kvplan.core.dtypes import DType
from kvplan.planning.plan import UNIFIED, cache_dtypes
from kvplan.model.spec import weight_bytes
from kvplan.engines.sglang.layout import reads_capability
from kvplan.hardware.facts import fact_missing, vendor_of
from kvplan.engines.context import sglang_rule
from kvplan.engines.base import Capacity, Engine, Figure, fact_warnings, opt_bool
from kvplan.model.compressed import CompressedMLA, has_compressed
from kvplan.model.layers import LOCAL_KINDS, IndexedMLA, Kind
from kvplan.model.recurrent import ParallelHybrid
from kvplan.engines.sglang.offload import cpu_pool as hicache_pool
from kvplan.engines.sglang import prefill_graph as sglang_prefill_graph
from kvplan.engines.sglang.rules import SglangRules

GIB = 2**30
MIB = 2**20



def cell_bytes(layers, tp: int, kv_dtype: DType, st: Settings) -> tuple[int, int, int]:
    """(full-pool bytes per token, SWA-pool bytes per token, K-only bytes per token of the pool whose "KV Cache is
    allocated" line SGLang prints first) on one rank: with a hybrid SWA pool the SWA sub-pool's, which SWAKVPool
    builds before the full one, each logging its own line (0.5.8 wheel `mem_cache/swa_memory_pool.py` L63-76,
    `mem_cache/memory_pool.py` L595-605)."""
    full = swa = k_full = k_swa = 0
    hybrid = st.hybrid_swa
    for layer in layers:
        if layer.kind in (Kind.NONE, Kind.STATE):
            continue
        if st.dsa is not None and isinstance(layer, IndexedMLA):  # counted as sized, printed as allocated (dsa.py)
            full, k_full = full + st.dsa.counted(layer, kv_dtype), k_full + st.dsa.allocated(layer, kv_dtype)
            continue
        tok = layer.token_bytes(kv_dtype, tp)
        k = kv_dtype.bytes_for(_k_elements(layer, tp))
        if hybrid and layer.kind in LOCAL_KINDS:
            swa, k_swa = swa + tok, k_swa + k
        else:
            full, k_full = full + tok, k_full + k
    return full, swa, k_swa if swa else k_full


def _k_elements(layer, tp: int) -> int:
    """K values of one token in one layer on one rank: MLA's latent is all "K"; a layer whose V heads are narrower
    than its K heads (MiMo-V2-Flash: 192 / 128) has k_buffer rows of head_dim, v_buffer rows of v_head_dim
    (`MHATokenToKVPool`, `head_dim` and `v_head_dim`, 0.5.8 `mem_cache/memory_pool.py`)."""
    elements = layer.elements_per_token(tp)
    if layer.kind == Kind.MLA:
        return elements
    k, v = getattr(layer, "head_dim", 0), getattr(layer, "v_head_dim", 0) or getattr(layer, "head_dim", 0)
    return elements * k // (k + v) if k else elements // 2


def _backend_notes(page: int, st: Settings, model, kv_dtype: DType) -> list[str]:
    """What the attention backend sets, in words: the page it forces, aiter's cut of the fraction (attention.py),
    a DSA model's pool rows (dsa.py)."""
    return ([f"page_size {page}: {st.page_why}"] if st.page_why else []) + \
        ([f"mem_fraction_static {st.mem_fraction_static:g} in force: {st.aiter_why}"] if st.aiter_why else []) + \
        ([sglang_dsa.note(st.dsa, model, kv_dtype)] if st.dsa is not None else [])


def _chunk_note(st: Settings) -> list[str]:
    """Chunked prefill off (-1), in words: what SGLang then reserves and schedules (defaults.CHUNK_OFF)."""
    if st.chunked_prefill_size > 0:
        return []
    return [f"chunked_prefill_size {st.chunked_prefill_size}: chunked prefill off, each prompt prefilled whole; "
            f"SGLang's default mem_fraction_static (0.5.3 on) reserves activations for max_prefill_tokens "
            f"{sglang_defaults.MAX_PREFILL_TOKENS:,} x 1.5 MiB, not for a chunk, and captures no prefill graph"]


def capacity(model, dep, kv_bytes: int, context: int, batch: int, st: Settings, kv_dtype: DType,
             state_dtype: DType | None = None) -> Capacity:
    """SGLang's pool for `kv_bytes` of budget ("rest") per rank: #tokens, K size, concurrency.

    Under pp each stage sizes its cell from its own layers (`num_effective_layers = end_layer -
    start_layer`, 0.5.23 `model_executor/model_runner_components/layer_setup.py` L154, read by
    `DefaultPoolConfigurator`, `model_executor/pool_configurator.py` L227-237) out of the same "rest"
    (free memory is the minimum over every rank, `get_available_gpu_memory(distributed=True)`,
    `mem_cache/kv_cache_configurator.py` L3000-3004): the stage with the largest cell holds the fewest
    tokens, the count every stage keeps (all-reduced MIN over pp ranks, `_apply_token_constraints` L3107-3116;
    Plan.token_pool_stage), and the state slots are priced on the stage with the most (L3229-3260)."""
    full_cell, swa_cell, k_cell = pool_cell(model, dep, kv_dtype, st)
    page, ratio = st.page_size, st.swa_full_tokens_ratio
    budget = max(0, kv_bytes)
    states = sglang_mamba.state_pool(model, dep, budget, st.state) if st.state else None
    left = max(0, budget - states.reserved) if states else budget  # the token pool's, after the state slots
    if swa_cell:
        full_tokens = int(left // (full_cell + ratio * swa_cell)) // page * page
        swa_tokens = int(ratio * full_tokens) // page * page
    else:
        full_tokens = int(left // full_cell) // page * page if full_cell else 0
        swa_tokens = 0
    windows = [layer.span for layer in model.layers if layer.kind in LOCAL_KINDS]
    conc = full_tokens / context if context else 0.0
    if swa_cell and windows:
        need = min(context, max(windows) + page)
        conc = min(conc, swa_tokens / need)
    rows = (swa_tokens if swa_cell else full_tokens) + page  # buffers carry one padded page (0.4.3: one slot)
    k_size = rows * k_cell  # bytes of the first pool printed; SGLang prints them as "GB" that are GiB
    printed = swa_tokens if swa_cell else full_tokens
    lines = [
        Figure("KV budget per GPU (rest)", budget, "bytes"),
        Figure("mem_fraction_static", st.mem_fraction_static, "number"),
        Figure("cell per token", (full_cell, swa_cell, ratio) if swa_cell else full_cell,
               "B full + B SWA x ratio" if swa_cell else "B"),
        Figure("max_total_num_tokens", full_tokens, "count"),
        Figure("KV Cache is allocated", (printed, k_size), "sglang tokens, K GiB"),
        Figure(f"requests of {context:,} tokens", conc, "ratio"),
    ]
    if swa_cell:
        lines.insert(4, Figure("SWA pool tokens", swa_tokens, "count"))
    running, rows, said = sglang_mamba.scheduler(states, st.state, st.max_running_requests, full_tokens, context,
                                                 st.context_len or context)  # the server's context_len
    lines[2:2], notes = rows, list(said)
    if running is not None:
        conc = min(conc, running)
        lines[-1:] = [Figure("max_running_requests", running, "count"), Figure(f"requests of {context:,} tokens",
                                                                                conc, "ratio")]
    req_line, above = sglang_req_pool.priced(st, full_tokens, context, states and states.requests)  # req_pool.py
    lines += [req_line, *sglang_mm.rows(model, st, above[1])]  # the cache's headroom after the request slots
    if st.prefill_graph:
        lines.append(Figure("prefill CUDA-graph reserve", int(st.prefill_graph[1] * MIB), "MiB"))
        notes.append(sglang_prefill_graph.note(st.version, *st.prefill_graph))
    notes += sglang_mm.notes(model, st, above[1]) + _backend_notes(page, st, model, kv_dtype) + _chunk_note(st)
    if any(layer.kind in LOCAL_KINDS for layer in model.layers) and sglang_swa.note(model, st.version):
        notes.append(sglang_swa.note(model, st.version))
    pooled = sglang_mamba.pooled(model, dep, states, st.state, full_tokens * full_cell + swa_tokens * swa_cell) \
        if states else None
    return Capacity("sglang", st.version, budget, full_tokens, conc, context, full_cell + swa_cell,
                    None, page, tuple(lines), tuple(notes), max_running=running, pooled=pooled, above=above)


def pool_cell(model, dep, kv_dtype: DType, st: Settings) -> tuple[int, int, int]:
    """cell_bytes of the stage that bounds the pool: under pp each stage's cell is its own layers' (capacity),
    and the largest holds the fewest tokens. A DSA pool kvplan does not plan is refused here (dsa.refuse)."""
    sglang_dsa.refuse(st)
    return max((cell_bytes(model.layers[a:b], dep.tp, kv_dtype, st) for a, b in stage_ranges(model, dep)),
               key=lambda c: (c[0] + st.swa_full_tokens_ratio * c[1], c[2]))


def k_size_gib(tokens: int, model, dep: Deployment, kv_dtype: DType, st: Settings) -> float:
    """The "K size" SGLang prints for a pool of `tokens` (GB in the log = GiB): (tokens + one page) x the K
    bytes of a token on one rank of the bounding stage (pool_cell; a stage's own layers under pp, `dep` cut as
    the release cuts them), in the pool it prints first (the SWA sub-pool of a hybrid SWA model, whose line prints
    its own tokens: cell_bytes)."""
    return (tokens + st.page_size) * pool_cell(model, dep, kv_dtype, st)[2] / GIB


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
        tp_size = self._tp_size(model, dep)
        dense_tp = sglang_layout.dense_split(self.opts, tp_size)
        sglang_gptq_marlin.check(model, dep, gpu, version, tp_size, dense_tp)  # a shard Marlin's repack refuses
        return settings(model, gpu, dep, req, self.version, self.opts, self.explicit)

    def _tp_size(self, model, dep) -> int:
        """SGLang's --tp-size: every rank of the replica group under DP attention, else tp."""
        return dep.tp * dep.dp if dp_attention(model, dep, self.opts) else dep.tp

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
        tp_size = self._tp_size(model, dep)
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
        tp_size = self._tp_size(model, dep)
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
