"""llama.cpp: the cells it allocates for `-c`/`-np`, per cache type, and the bytes they take.

llama.cpp preallocates the whole cache at start-up (no budget fraction): `n_ctx` cells (padded) per
layer, each a K row and a V row of `ggml_row_size(type, n_embd)` bytes. Sources (the llama.cpp copies
vendored in llama-cpp-python sdists, commit named per era; docs/engines.md section 4):
  * padding: none up to Mar 2024 (`c2101a2e` llama.cpp L12782); GGML_PAD(n_ctx, 256 with flash
    attention else 32) from Aug 2024 (`1d1ccce6` src/llama.cpp L17572; `8733e0cf` llama-kv-cache.cpp
    L20-22); always 256 now (`0c1e5709` llama-context.cpp L290).
  * sequences: one unified cache until Jul 2025; from Aug 2025 (`4227c9be`, llama-model.cpp L18096-18104)
    a non-unified cache is n_seq streams of pad(ceil(n_ctx / n_seq)) cells; now (`0c1e5709` L292-306)
    n_ctx_seq = GGML_PAD(n_ctx / n_seq, 256) and n_ctx = n_ctx_seq x n_seq.
  * row bytes: ggml_row_size = n / block x block bytes (q8_0 34 B per 32, q4_0 18, ...;
    ggml/src/ggml-common.h L194-452): kvplan.core.dtypes.
  * iSWA (llama-kv-cache-iswa.cpp): SWA layers get `pad256(min(size_base, n_swa x (unified ? n_seq : 1)
    + n_ubatch))` cells now (L69-81); `min(size_base, pad(n_swa x (unified ? n_seq : 1) + n_ubatch))` in
    Aug 2025; `min(size_base, pad(n_swa x n_seq_max + n_ubatch))` in Jul 2025; `swa_full` gives them the
    full size. No iSWA before May 2025.
  * MLA: K of kv_lora_rank + rope (576) per cell; a V of kv_lora_rank (512) too until at least Aug 2025
    (`4227c9be`); K only now (`0c1e5709` llama-kv-cache.cpp L230-234).
  * recurrent layers keep f32 conv + ssm states per sequence (llama-memory-recurrent.cpp).

HOST_EMBEDDING: llama.cpp keeps the input layer (token_embd) in host memory whatever -ngl says: "there is very
little benefit to offloading the input layer, so always keep it on the CPU", `dev_input = { cpu_dev, ... }`
(llama.cpp ec98e2002 src/llama-model.cpp L2411-2412, as vendored at ollama/ollama@f63eea3d
llama/llama.cpp/src/llama-model.cpp); in 2023 `tok_embeddings` was created with GGML_BACKEND_CPU. A model
without output.weight loads token_embd again as the output head (`TENSOR_DUPLICATED`, L2648), placed as the
output layer (dev_output, on the last GPU, L2504-2506) and not shared with the host copy (L2618-2623 reuses a
tensor only within the same buffer type). So GPU weights exclude the table, a tied head's copy stays
(kvplan.planning.layout.host_shift); a decode step gathers B rows of it on the CPU, nothing the speed model
reads (kvplan.speed.shape prices the head only).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.core.dtypes import KV_DTYPES, DType
from kvplan.engines.context import engine_length, llamacpp_rule
from kvplan.engines.base import Capacity, Engine, Figure, check_opts, check_version_name, opt_bool, opt_int
from kvplan.engines.llamacpp import uma as llamacpp_uma
from kvplan.engines.options import opt_shared_bytes, os_share
from kvplan.engines.checkpoint_kv import KvRule
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.intmath import cdiv
from kvplan.engines.emit import GGUF_PLAIN, gguf_file_type, model_arg, own_gguf
from kvplan.model.layers import ATTENTION_KINDS, LOCAL_KINDS, Kind
from kvplan.model.weights import weight_bytes
from kvplan.planning.layout import Placement
from kvplan.planning.plan import UNIFIED, Answers, NON_TORCH_BYTES
from kvplan.core.search import largest_fitting
from kvplan.core.units import plural

MIB = 2**20
VERSIONS = ("2023-04", "2024-03", "2024-08", "2025-07", "2025-08", "current")
DEFAULT_VERSION = "current"
OPTS = ("n_ubatch", "flash_attn", "kv_unified", "swa_full", "type_v", "os_memory")  # the last: llamacpp/uma.py
F16 = KV_DTYPES["fp16"]
F32 = KV_DTYPES["fp32"]


# what the engine table's lines count over: llama-server allocates -c cells for -np slots whatever memory is left
SCOPE = "cells and MiB: the whole cache (every layer, all its GPUs) that -c / -np allocate for the batch"
# the pool row is the cells llama.cpp allocates at the plan's -c / -np (what check-log compares), the tokens row what
# memory would hold at the context if -c were raised: max concurrency slots, the engine table's "at max concurrency"
ANSWER_LABELS = ("KV cells at the planned -c / -np", "tokens memory holds (-c raised)")


def pad(n: int, to: int) -> int:
    return cdiv(n, to) * to if to > 1 else n


@dataclass(frozen=True)
class Settings:
    version: str
    n_ubatch: int
    flash_attn: bool
    kv_unified: bool
    swa_full: bool
    type_k: DType
    type_v: DType
    os_memory: int | None = None  # a unified-memory GPU's OS share as stated (kvplan.engines.llamacpp.uma)
    os_held: int = 0  # what of it the plan keeps out (0 on a discrete GPU)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["type_k"], d["type_v"] = self.type_k.name, self.type_v.name
        return d


def settings(model, gpu, dep, req, version=None, opts=None, explicit=None) -> Settings:
    """llama-server defaults (common/common.h): n_ubatch 512, swa_full off, kv_unified off when -np is given."""
    opts = dict(opts or {})
    check_opts("llama.cpp", opts, OPTS)
    version = check_version_name("llama.cpp", version, VERSIONS, DEFAULT_VERSION)
    kv = req.kv_dtype or F16
    if kv.name in ("bf16",):
        kv = F16  # llama.cpp's default cache type is f16 (same bytes)
    if kv.name in ("fp8", "int8"):
        raise KvplanError(f"llama.cpp has no {kv.name} KV cache; use f16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl",
                          EXIT_USAGE)
    tv = KV_DTYPES.get(opts["type_v"].lower().replace("f16", "fp16").replace("f32", "fp32"), None) \
        if "type_v" in opts else kv
    if tv is None:
        raise KvplanError(f"unknown {arg('engine_opts')} type_v {opts['type_v']!r}", EXIT_USAGE, param="engine_opts",
                          value={"type_v": opts["type_v"]})
    fa = opt_bool(opts, "flash_attn", version in ("2025-08", "current"))  # "auto" since Aug/Sep 2025
    held = opt_shared_bytes(opts, "os_memory", None, gpu)
    return Settings(version, opt_int(opts, "n_ubatch", 512), fa, opt_bool(opts, "kv_unified", False),
                    opt_bool(opts, "swa_full", False), kv, tv, held, os_share(gpu, held))


@dataclass(frozen=True)
class Layout:
    """The cache llama.cpp allocates: cells per stream for base and SWA layers, and the bytes."""

    n_ctx: int  # after padding, all streams
    n_seq: int
    n_stream: int
    cells_base: int  # per stream
    cells_swa: int  # per stream (0 when no SWA layers)
    k_bytes: int
    v_bytes: int
    state_bytes: int
    layer_bytes: tuple[int, ...]  # per model layer (for a layer split over GPUs)

    @property
    def total(self) -> int:
        return self.k_bytes + self.v_bytes + self.state_bytes


def _rows(layer, st: Settings) -> tuple[int, int]:
    """(K row bytes, V row bytes) of one cell of one layer; tensor parallelism does not apply."""
    if layer.kind == Kind.MLA:
        k = st.type_k.bytes_for(layer.kv_lora_rank + layer.qk_rope_head_dim)
        v = 0 if st.version == "current" else st.type_v.bytes_for(layer.kv_lora_rank)
        return k, v
    if layer.kind in ATTENTION_KINDS:
        dv = getattr(layer, "v_head_dim", 0) or layer.head_dim
        return st.type_k.bytes_for(layer.num_kv_heads * layer.head_dim), st.type_v.bytes_for(layer.num_kv_heads * dv)
    return 0, 0


def layout(layers, n_ctx: int, n_seq: int, st: Settings) -> Layout:
    """Cells and bytes for `-c n_ctx -np n_seq` (n_ctx is the total over all sequences, as llama.cpp's -c)."""
    if n_ctx < 1 or n_seq < 1:
        raise KvplanError("llama.cpp needs n_ctx >= 1 and n_seq >= 1", EXIT_USAGE)
    ver = st.version
    unified = st.kv_unified or n_seq == 1
    if ver in ("2023-04", "2024-03"):
        n_pad, n_stream, per = 1, 1, n_ctx
    elif ver in ("2024-08", "2025-07"):
        n_pad = 256 if st.flash_attn else 32
        n_stream, per = 1, pad(n_ctx, n_pad)
    elif ver == "2025-08":
        n_pad = 256 if st.flash_attn else 32
        if unified:
            n_stream, per = 1, pad(n_ctx, n_pad)
        else:
            n_stream, per = n_seq, pad(cdiv(n_ctx, n_seq), n_pad)
    else:
        n_pad = 256
        if unified:
            n_stream, per = 1, pad(n_ctx, 256)
        else:
            n_stream, per = n_seq, pad(n_ctx // n_seq, 256)
    has_swa = any(layer.kind in LOCAL_KINDS for layer in layers)
    iswa = has_swa and ver in ("2025-07", "2025-08", "current") and not st.swa_full
    swa_cells = 0
    if has_swa:
        n_swa = max(layer.span for layer in layers if layer.kind in LOCAL_KINDS)
        if not iswa:
            swa_cells = per
        elif ver == "2025-07":
            swa_cells = min(per, pad(n_swa * n_seq + st.n_ubatch, n_pad))
        elif ver == "2025-08":
            swa_cells = min(per, pad(n_swa * (n_seq if unified else 1) + st.n_ubatch, n_pad))
        else:
            swa_cells = pad(min(per, n_swa * (n_seq if unified else 1) + st.n_ubatch), 256)
    k_total = v_total = state = 0
    per_layer = []
    for layer in layers:
        if layer.kind == Kind.STATE:
            b = F32.bytes_for(layer.state_elements(1)) * n_seq
            state += b
            per_layer.append(b)
            continue
        if layer.kind == Kind.NONE:
            per_layer.append(0)
            continue
        cells = (swa_cells if layer.kind in LOCAL_KINDS else per) * n_stream
        k, v = _rows(layer, st)
        k_total += k * cells
        v_total += v * cells
        per_layer.append((k + v) * cells)
    return Layout(per * n_stream, n_seq, n_stream, per, swa_cells, k_total, v_total, state, tuple(per_layer))


def compute_buffer_estimate(model, st: Settings) -> int:
    """GPU compute buffer (an estimate): n_ubatch rows of fp32 logits dominate. Qwen2.5-size vocab
    (151,936) x 512 x 4 B = 296.75 MiB against 300.75 and 304 MiB logged (LLamaSharp issue 1099,
    JamePeng/llama-cpp-python PR 1); plus the CUDA context as the planner counts it."""
    return st.n_ubatch * model.vocab_size * 4 + 4 * MIB + NON_TORCH_BYTES


@dataclass(frozen=True)
class LlamaCppRules:
    """Slots per sequence: the padded cells of one slot (iSWA layers: the SWA cache size)."""

    settings: Settings
    name = "llama.cpp"

    def tokens_allocated(self, layer, seq_len: int, block: int) -> int:
        if seq_len <= 0 or layer.kind not in ATTENTION_KINDS:
            return 0
        lay = layout((layer,), seq_len, 1, self.settings)
        return lay.cells_swa if layer.kind in LOCAL_KINDS else lay.cells_base


class LlamaCpp(Engine):
    name = "llama.cpp"
    aliases = ("llamacpp", "llama-cpp")
    versions = VERSIONS
    default_version = DEFAULT_VERSION
    option_names = OPTS
    emits = True
    # layout(): base and SWA cells for attention and MLA rows, f32 states per sequence, nothing for NONE
    kinds = frozenset({Kind.FULL, Kind.MLA, Kind.SLIDING, Kind.CHUNKED, Kind.STATE, Kind.NONE})
    splits_layers_only = True  # --split-mode layer: N GPUs are N pipeline stages, one layout
    layout = staticmethod(layout)

    def checked_version(self, version):
        """llama.cpp's versions are eras (named by month), not release numbers."""
        return check_version_name(self.name, version, self.versions, self.default_version)

    def deployment(self, dep):
        """llama.cpp splits layers over GPUs (--split-mode layer): dep.gpus stages, no tp."""
        return type(dep)(1, dep.gpus) if dep.tp > 1 else dep

    def context_limit(self, model):
        """llama.cpp's n_ctx_train (kvplan.engines.context.llamacpp_rule)."""
        return llamacpp_rule(model)

    def settings(self, model, gpu, dep, req) -> Settings:
        if dep.tp > 1:
            raise KvplanError(f"llama.cpp splits layers over GPUs (use {arg('pp')} N), not tensor parallelism",
                              EXIT_USAGE, param="tp", value=dep.tp)
        return settings(model, gpu, dep, req, self.version, self.opts, self.explicit)

    def checkpoint_kv_rule(self, ckv) -> KvRule:
        """n/a: llama.cpp serves a GGUF conversion, which carries no KV declaration; its cache type is its own setting
        (cache_type_k / cache_type_v, f16 by default), whatever the Hugging Face checkpoint declared."""
        return KvRule(False, "llama.cpp serves a GGUF conversion, whose cache type is its own cache_type_k / "
                             "cache_type_v setting (f16 by default)", hint=False)

    def request(self, req, st: Settings, model, dep):
        """The engine's utilisation (the whole memory), cells, compute buffer and cache type; and the context a slot
        gets: llama-server's per-slot length limit is -c / -np (n_ctx_seq, module docstring), which is also what it
        allocates, so a --max-model-len past --ctx (kvplan.engines.context.engine_length) is planned and emitted as
        each slot's length, as vLLM's and SGLang's commands keep it (issue 22)."""
        # on a unified GPU the OS's stated share is kept out beside the compute buffers, estimated or given (uma.py)
        over = (req.overhead_bytes if req.overhead_bytes is not None else compute_buffer_estimate(model, st)) \
            + st.os_held
        return dataclasses.replace(req, gpu_memory_utilization=1.0, block_size=1, overhead_bytes=over,
                                   kv_dtype=st.type_k, context=max(req.context, engine_length(model, req)))

    def placement(self, model, dep, gpu=None):
        """One GPU per stage, whole tensors (--split-mode layer); token_embd in host memory (HOST_EMBEDDING)."""
        return Placement(1, 1, 1, 1, 1, host_embedding=True)

    def result(self, model, gpu, dep, req):
        """The base engine's plan, with a note on the host-resident embedding (HOST_EMBEDDING) and one where a
        --max-model-len past --ctx made each slot longer (request())."""
        res = super().result(model, gpu, dep, req)
        notes = [host_embedding_note(model, res.plan.request.weight_dtype)]
        slot, batch, most = engine_length(model, req), res.plan.request.batch, int(res.capacity.max_concurrency)
        if most > batch:  # the pool is the batch's -c, so the Answers' pool is below the tokens requests could use
            notes.append(f"{plural(dep.gpus, 'GPU')}: llama-server allocates -c {slot * batch:,} for -np {batch} (the "
                         f"batch) whatever memory is left; memory holds {plural(most, 'slot')} of {slot:,}: "
                         f"-c {slot * most:,} -np {most} ({arg('batch')} {most})")
        if slot > req.context:
            notes.append(f"each slot planned at {arg('max_model_len')} {slot:,} tokens, not {arg('context')} "
                         f"{req.context:,}: llama-server's -c / -np is both a request's limit and what every slot "
                         f"allocates (-c {slot * res.plan.request.batch:,} for -np {res.plan.request.batch})")
        return res._replace(capacity=res.capacity._replace(notes=(*res.capacity.notes, *notes)))

    def rules(self, st: Settings) -> LlamaCppRules:
        return LlamaCppRules(st)

    def capacity(self, model, dep, stages, req, st: Settings, use) -> Capacity:
        """The cache for -c context x batch, -np batch; concurrency: the most slots of `context` that fit."""
        def fits(n: int) -> bool:
            return self._fits(model, dep, stages, req, req.context, n, st)

        conc = max(0, largest_fitting(fits, None, lo=1))  # no cap: as many slots as memory holds
        lay = layout(model.layers, req.context * req.batch, req.batch, st)
        return self._capacity(lay, req.context, req.batch, st, conc)

    def answers(self, model, dep, stages, req, st: Settings, use, cap: Capacity) -> Answers:
        def fits(c: int) -> bool:
            return self._fits(model, dep, stages, req, c, req.batch, st)

        mc = max(0, largest_fitting(fits, model.max_context, lo=1))
        fits_now = self._fits(model, dep, stages, req, req.context, req.batch, st)
        return Answers(cap.tokens, cap.max_concurrency_int, mc, fits_now)

    @staticmethod
    def _fits(model, dep, stages, req, ctx: int, n_seq: int, st: Settings) -> bool:
        """Does the cache for n_seq sequences of ctx fit on every GPU: beside the weights and compute
        buffer in the whole memory (full offload), or within --kv-cache-memory bytes per GPU?"""
        lay = layout(model.layers, ctx * n_seq, n_seq, st)
        if req.kv_cache_memory_bytes is not None:
            return all(sum(lay.layer_bytes[a:b]) <= req.kv_cache_memory_bytes for a, b in (s.layers for s in stages))
        # req.gpu_memory_utilization is 1 (request()): a stage's KV memory is usable - weights - overhead.
        return all(sum(lay.layer_bytes[a:b]) <= s.kv_memory_bytes for s in stages for a, b in (s.layers,))

    @staticmethod
    def _capacity(lay: Layout, context: int, batch: int, st: Settings, max_conc) -> Capacity:
        """The cache -c context x batch, -np batch allocates (llama.cpp sizes it from -c, not from free memory:
        module docstring), and the -c / -np that would give the `max_conc` slots memory holds (issue 22; result()'s
        note says it where they differ)."""
        lines = [
            Figure("-c / -np", (context * batch, batch), "a / b"),
            Figure("-c / -np at max concurrency", (context * max_conc, max_conc), "a / b"),
            Figure("n_ctx after padding", (lay.n_ctx, lay.n_stream, lay.cells_base), "cells in streams"),
            Figure("K (" + _gg(st.type_k) + ")", lay.k_bytes, "MiB"),
            Figure("V (" + _gg(st.type_v) + ")", lay.v_bytes, "MiB"),
            Figure("KV cache size", lay.k_bytes + lay.v_bytes, "MiB"),
        ]
        if lay.cells_swa:
            lines.insert(2, Figure("SWA cache", lay.cells_swa, "cells per stream"))
        if lay.state_bytes:
            lines.append(Figure("recurrent states (f32)", lay.state_bytes, "MiB"))
        notes = []
        if st.type_v.block_elems > 1 and not st.flash_attn:
            notes.append("a quantized V cache needs flash attention (-fa on)")
        return Capacity("llama.cpp", st.version, lay.total, lay.n_ctx, float(max_conc), context,
                        0, None, None, tuple(lines), tuple(notes), scope=SCOPE, answer_labels=ANSWER_LABELS)

    def settings_dict(self, st: Settings, model, dep, req) -> dict:
        return {**st.as_dict(), "compute_buffer_estimate": req.overhead_bytes - st.os_held}

    def assumptions(self, model, gpu, dep, st: Settings) -> tuple:
        """On a unified-memory GPU, the OS's share the plan keeps out (kvplan.engines.llamacpp.uma)."""
        # tagged as what this engine assumes of unified memory, so the plan's general note is not said twice
        return tuple(w._replace(topic=UNIFIED) for w in llamacpp_uma.warnings(gpu, st.os_memory))

    def emit_args(self, plan, model, settings: dict, gpu=None) -> list[str]:
        """`llama-server` (common/arg.cpp): -c is the total context over all slots, -np the slots,
        -ctk/-ctv the cache types, -ngl 99 for full offload, -fa on (a quantized V cache needs it). -m names a
        GGUF file of the plan's weight type: llama.cpp loads a file's tensors as stored (emit.gguf_file_type)."""
        r = plan.request
        ctk = {"fp16": "f16", "bf16": "f16", "fp32": "f32"}.get(settings["type_k"], settings["type_k"])
        ctv = {"fp16": "f16", "bf16": "f16", "fp32": "f32"}.get(settings["type_v"], settings["type_v"])
        gguf = own_gguf(plan, model) or f"{model.name}-{gguf_file_type(plan, model, gpu)}.gguf"
        args = ["llama-server", "-m", gguf, "-c", str(r.context * r.batch), "-np", str(r.batch),
                "-ngl", "99", "-ctk", ctk, "-ctv", ctv]
        if settings["flash_attn"] or ctv not in ("f16", "f32"):
            args += ["-fa", "on"]
        if settings["kv_unified"]:
            args += ["--kv-unified"]
        if settings["swa_full"]:
            args += ["--swa-full"]
        if settings["n_ubatch"] != 512:
            args += ["-ub", str(settings["n_ubatch"])]
        return args

    def emit_weights_note(self, result, model) -> str | None:
        """The GGUF file -m must be: llama.cpp loads its tensors as stored (kvplan.engines.emit.gguf_file_type), made by
        convert_hf_to_gguf.py for a plain type, by llama-quantize for a quantized one."""
        if own_gguf(result.plan, model):
            return (f"-m is the GGUF file the plan was read from, whose {model.checkpoint_bytes:,} B of weights it "
                    f"counts (token_embd in host memory, the rest on the GPUs)")
        kind = gguf_file_type(result.plan, model, result.gpu)
        how = (f"convert_hf_to_gguf.py --outtype {kind.lower()}" if kind in GGUF_PLAIN.values()
               else "llama-quantize, from a BF16 GGUF")
        return (f"llama.cpp loads the weights as the GGUF file stores them: -m must be a {kind} GGUF of "
                f"{model_arg(model)}, the weights this plan counts ({how})")


def host_embedding_note(model, weight_dtype) -> str:
    """The host memory token_embd takes (HOST_EMBEDDING), and where a tied output head's GPU copy is counted."""
    wb = weight_bytes(model, weight_dtype)
    tied = ("; the output head is tied to it, so llama.cpp loads a second copy (TENSOR_DUPLICATED) on the last GPU, "
            "counted there" if not wb.lm_head else "")
    return (f"token_embd ({model.vocab_size:,} x {model.hidden_size:,}, {wb.embedding:,} B = "
            f"{wb.embedding / MIB:,.1f} MiB) stays in host memory, not counted on the GPUs: llama.cpp keeps the input "
            f"layer on the CPU{tied}")


def _gg(d: DType) -> str:
    """ggml's spelling of a cache type."""
    return {"fp16": "f16", "fp32": "f32", "bf16": "bf16"}.get(d.name, d.name)


ENGINE = LlamaCpp
