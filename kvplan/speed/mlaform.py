"""Which attention backend an engine runs an MLA model's prefill through, where the backend sets the prefill's form.

SGLang from 0.4.6 picks DeepSeek's attention method by backend (sglang 0.4.6 wheel `srt/models/deepseek_v2.py`
dispatch_attn_forward_method L570-612; 0.5.3 and 0.5.6.post1 `_handle_attention_backend` and the `handle_attention_*`
functions, 0.5.6.post1 L331-447; 0.5.12 `models/deepseek_common/attention_backend_handler.py` L56-176, the same rules).
With SGLang's radix cache on, a served run's prompts each reuse a cached prefix (the tokenizer's BOS token) from the
second request on, where the cache matches single tokens (page size 1: triton, flashinfer and fa3 by default; flashmla
64, cutlass_mla 128 and trtllm_mla 32 / 64 tokens a page, 0.5.6.post1 `srt/server_args.py` L1404-1466, under which a
one-token prefix is no match). Then: triton runs the batch absorbed (MLA) once any request has a cached prefix, a
long prompt's later chunks too (their prefix is the earlier chunks); flashinfer likewise through 0.4.7 (0.4.6 L573-584,
0.4.7 L752-763); fa3 from 0.4.6 and flashinfer by 0.5.3 absorb only where the batch's cached prefixes sum to more than
0 and less than SGL_CHUNKED_PREFIX_CACHE_THRESHOLD (8,192, 0.4.6 L567), and decompress (MHA_CHUNKED_KV / MHA_ONE_SHOT)
at 0 or past it, so a prompt's chunks past its first 8,192 tokens, where a long prompt's pairs are, run decompressed
(on an H200 SGLang 0.5.3 prefills 8,192 // dp tokens a chunk a worker: `server_args.py` L607-611, L957): kvplan
prices those two decompressed, the short prompts they absorb having few pairs; trtllm_mla decompresses every
extend while the chunked prefix cache is on (its default); aiter decompresses every extend (0.4.7 L781-789, 0.5.7
L421-425, 0.5.12 L143-147; 0.5.3 and 0.5.6.post1 absorb
under DP attention with a cached prefix, not priced here). `ABSORBS_WITH_PREFIX` names, by release, the backends that
attend absorbed at any cached prefix. The decode of every backend read is the absorbed MLA form (each handler's
non-extend branch, `_dispatch_mla_subtype`). A DSA model (DeepSeek-V3.2, GLM-5: an indexer's top-k) runs SGLang's nsa
backend (0.5.3 `srt/server_args.py` L806-812), which this table does not name; its sparse layers already attend at the
absorbed width in prefill (kvplan.speed.shape.attention_flops), so the rule moves none of its terms.

The backend where a run names none: an MLA model's default, by release and GPU (`DEFAULTS`): 0.4.6 fa3 on Hopper
(compute capability 9), triton elsewhere (0.4.6 `srt/model_executor/model_runner.py` L258-263); from 0.4.7 flashinfer
on compute capability 10 and, on ROCm, aiter where a rank holds 16 or 128 heads, triton otherwise (0.4.7 model_runner
L336-352; 0.5.3 L533-549); from 0.5.4 trtllm_mla on compute capability 10 for the DeepSeek family only, where the run
names no backend, prefill or decode one (`SM100_MLA`: 0.5.4 `server_args.py` L879-888 and 0.5.6.post1 L1040-1049,
DeepseekV3ForCausalLM without DSA; 0.5.8 adds MistralLarge3ForCausalLM and PixtralForConditionalGeneration, 0.5.9
KimiK25ForConditionalGeneration, 0.5.23 LongcatFlash and Dots3Note), so DeepSeek-V2-Lite (DeepseekV2ForCausalLM) on a
B200 keeps flashinfer. kvplan.engines.sglang.attention reads the same table for the page that backend forces.

Before an engine had an MLA kernel at all it ran an MLA model as multi-head attention over what kv_b_proj decompresses,
and cached that (`LATENT_FROM`, `as_run`): vLLM's MLA came in 0.7.1 (vllm-project/vllm#12601, which superseded
vllm-project/vllm#12597 "Implement MLA for deepseek v3/r1", opened 2025-01-31, after 0.7.0's release of 2025-01-27;
Neural Magic's "Enhancing DeepSeek Models with MLA and FP8 Optimizations in vLLM", 2025-02-04: DeepSeek on 8 x H200
held 54,560 tokens of cache under 0.7.0 and about 512,000 under 0.7.1). Through 0.7.0 `DeepseekV2Attention` builds
`Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads)` and pads V with zeros to qk_head_dim
(`torch.nn.functional.pad(v, [0, self.qk_head_dim - self.v_head_dim])`, "padding value to qk_head_dim for
alignment": read in the class vLLM keeps for a config it runs without MLA, vllm-project/vllm@
002d6073aa034d4f5545d45021b0e56d1f3c3593:vllm/model_executor/models/deepseek_v2.py `DeepseekV2Attention`; the 0.7.0
tag itself not read, its cache size checked against the blog's in tests/test_vllm_pre_mla.py), so a token costs each
layer 2 x heads / tp x
(qk_nope + rope) values: DeepSeek-R1 at tp 8, 2 x 16 x 192 x 2 B x 61 layers = 749,568 B a rank, where the latent is
576 x 2 B x 61 = 70,272 B (10.7 x). Every term the Shape prices reads the expanded layers (KV bytes, attention FLOPs);
the engine's pool too (kvplan.engines.vllm.engine).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.releases import release_of
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.layers import decompressed, has_mla
from kvplan.speed.eras import engine_of, padded

# Before 0.4.6 every backend: SGLang's DeepSeek attention through 0.4.5 takes forward_normal (decompressed) for an
# extend only where no request of the batch reuses a cached prefix, forward_absorb otherwise (sglang 0.4.2.post4 wheel
# `srt/models/deepseek_v2.py` L503-516, 0.4.3.post2 L511-531 on its default Triton path, 0.4.4 L553-568, 0.4.5
# `no_absorb` L695-715; its fa3 backend absorbs every extend). Its radix cache is on unless --disable-radix-cache (or
# speculative decoding) turns it off (0.4.3.post2 `srt/server_args.py` L139, L264-271) and matches any number of
# leading tokens (`mem_cache/radix_cache.py` match_prefix L100-121), so once one prompt is cached, a prompt that starts
# as it does (a tokenizer's BOS token is enough) reuses that prefix and the whole batch attends in the latent's MQA
# form. From 0.4.6 the backends named (module docstring).
# engines whose MLA prefill can run absorbed with a cached prefix: (first release, the backends that attend absorbed at
# any cached prefix; ANY: every backend), the last rule at or below a release holding
ANY = None
ABSORBS_WITH_PREFIX = {"sglang": (((0,), ANY), ((0, 4, 6), ("triton", "flashinfer")), ((0, 5, 3), ("triton",)))}
AITER_HEADS = (16, 128)  # the heads a rank SGLang's aiter MLA backend takes (0.4.7 model_runner L345-347)
# (first release, {(vendor, compute capability major): backend}) for an MLA model where the run names none; a GPU
# the table does not name runs triton. AMD's entry (major None) holds where a rank has AITER_HEADS heads
DEFAULTS = {"sglang": (((0, 4, 6), {("NVIDIA", 9): "fa3"}),
                       ((0, 4, 7), {("NVIDIA", 9): "fa3", ("NVIDIA", 10): "flashinfer", ("AMD", None): "aiter"}))}
FALLBACK = "triton"
# (the GPU, the backend, ((first release, architectures), ...)): the architectures an engine defaults to that backend on
# that GPU where the run names none, ahead of DEFAULTS; each entry extends the one before (module docstring). SGLang's
# 0.5.14-0.5.22 were not read: planned with 0.5.13's list, which 0.5.9 set
SM100_MLA = {"sglang": (("NVIDIA", 10), "trtllm_mla",
                        (((0, 5, 4), ("DeepseekV3ForCausalLM",)),
                         ((0, 5, 8), ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")),
                         ((0, 5, 9), ("KimiK25ForConditionalGeneration",)),
                         ((0, 5, 23), ("LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN",
                                       "Dots3NoteForCausalLM"))))}


def mla_heads_per_rank(spec, tp_size: int) -> int:
    """The KV heads a rank holds as SGLang counts them for its ROCm MLA default (AITER_HEADS): the config's
    num_key_value_heads (ModelSpec.mla_kv_heads where an MLA config gives its own count, else its attention heads, as
    DeepSeek's and Kimi's configs write them) over the whole --tp-size, DP attention's ranks included, floor 1
    (get_num_kv_heads(tp_size): 0.5.3 model_runner.py L540-543; 0.5.23 arg_groups/model_override_base.py L340-345).
    DeepSeek's 128 at tp 2 x dp 4 under DP attention: 128 // 8 = 16 (aiter), not 128 // 2 = 64."""
    return max(1, (spec.mla_kv_heads or spec.num_attention_heads) // max(1, tp_size))


def _at(version) -> tuple[int, ...] | None:
    rel = release_of(version)
    return rel if rel is None else padded(rel)


def architecture_default(key: str, version: str | None, architecture: str | None) -> tuple[tuple, str] | None:
    """((vendor, compute capability major), backend) where engine `key` at `version` (None: its newest rule) defaults
    `architecture` to a backend of its own on that GPU (SM100_MLA), else None."""
    gpu, backend, rules = SM100_MLA.get(key, (None, None, ()))
    at = _at(version)
    names = [name for first, archs in rules if at is None or at >= first for name in archs]
    return (gpu, backend) if architecture and architecture in names else None


def default_backend(key: str, version: str | None, gpu, heads_per_rank: int,
                    architecture: str | None = None) -> str | None:
    """The attention backend engine `key` runs an MLA model of `architecture` through at release `version` (None: its
    newest rule) on `gpu` where the run names none: SM100_MLA's where it names the architecture on this GPU, else
    DEFAULTS'; None where the engine has no rule or the release precedes it."""
    rules = DEFAULTS.get(key)
    if not rules:
        return None
    at = _at(version)
    picked = [table for first, table in rules if at is None or at >= first]
    if not picked:
        return None
    vendor, cap = vendor_of(gpu), capability_of(gpu)
    own = architecture_default(key, version, architecture)
    if own and own[0] == (vendor, cap[0] if cap else None):
        return own[1]
    table = picked[-1]
    if vendor == "AMD":
        return table.get(("AMD", None), FALLBACK) if heads_per_rank in AITER_HEADS else FALLBACK
    return table.get((vendor, cap[0] if cap else None), FALLBACK)


def absorbs_with_prefix(key: str, version: str | None, gpu, heads_per_rank: int, stated: str | None,
                        architecture: str | None = None) -> bool:
    """Whether engine `key` at `version` (None: its newest rule) on `gpu` attends an MLA prefill of `architecture`
    absorbed once its prompts reuse a cached prefix, through the backend the run `stated` or its default
    (ABSORBS_WITH_PREFIX; False for an engine with no rule)."""
    rules, at = ABSORBS_WITH_PREFIX.get(key, ()), _at(version)
    picked = [names for first, names in rules if at is None or at >= first]
    if not picked:
        return False
    backend = stated or default_backend(key, version, gpu, heads_per_rank, architecture)
    return picked[-1] is ANY or backend in picked[-1]


# (engine, (its first release with an MLA kernel, whether its expanded cache pads V to K's width)): module docstring
LATENT_FROM = {"vllm": ((0, 7, 1), True)}


def caches_latent(engine_key: str | None, version) -> bool:
    """Whether `engine_key` (an era's or a harness's key reads its engine's rule) at `version` (None: a current
    release) runs and caches an MLA layer as its latent (LATENT_FROM; True for an engine without a rule)."""
    rule = LATENT_FROM.get(engine_of(engine_key or ""))
    at = _at(version)
    return rule is None or at is None or at >= rule[0]


def as_run(spec, engine_key: str | None, version):
    """`spec` as `engine_key` at `version` runs it: an MLA model's layers decompressed to per-head K and V where the
    release predates the engine's MLA kernel (caches_latent; kvplan.model.layers.decompressed), else `spec` itself."""
    if caches_latent(engine_key, version) or not has_mla(spec.layers):
        return spec
    pad_v = LATENT_FROM[engine_of(engine_key or "")][1]
    heads = spec.num_attention_heads
    return replace(spec, layers=tuple(decompressed(layer, heads, pad_v) for layer in spec.layers))
