"""SGLang's DSA token pool (DeepSeek-V3.2, GLM-5: kvplan's IndexedMLA layers), by release, as its wheels size it.

Read in the wheels (sglang/srt/...); page 64 on CUDA is kvplan.engines.sglang.attention's:

* The pool, `NSATokenToKVPool` (0.5.10 `mem_cache/memory_pool.py` L1804) / `DSATokenToKVPool` (0.5.13 on; 0.5.23
  L5279-5380): per layer a latent buffer of (size + page) rows and an indexer key buffer of
  (size + page + 1) // page pages of page x (index_head_dim + index_head_dim / 128 x 4) uint8 (0.5.23
  `mem_cache/index_key_cache.py` L22-47): 128 fp8 keys and one fp32 scale = 132 B a token, whatever the KV dtype.
* The latent row (`calculate_mla_kv_cache_dim`, 0.5.10 `model_executor/model_runner_kv_cache_mixin.py` L240-285;
  0.5.23 `mem_cache/kv_cache_configurator.py` L3412-3473): kv_lora_rank + rope = 576 elements of the KV dtype
  (bf16: 1,152 B), except an fp8 cache under a scaled-layout backend: 512 fp8 + 512 / 128 x 4 B of scales + 64 bf16
  rope = 656 B. The trtllm backend keeps the raw 576-byte fp8 row. Which backend runs by default: fp8 flashmla_kv on
  every GPU in 0.5.8-0.5.9 (0.5.8 `server_args.py` L1175-1181, 656-byte rows: `mem_cache/memory_pool.py` L1699-1720;
  0.5.9 L1154-1163); from 0.5.10 fp8 on compute capability >= 10 trtllm, below flashmla_kv (0.5.10
  `_set_default_nsa_backends` L1445-1490; 0.5.23 `arg_groups/overrides.py` `_dsa_split_backend_resolution`
  L600-730); a GlmMoeDsaForCausalLM fp8 cache on capability 12 flashinfer_sparse_mla from 0.5.17 (overrides.py
  L1600-1605).
* --kv-cache-dtype auto: fp8_e4m3 on capability >= 10, else bfloat16 (0.5.10 `_set_default_nsa_kv_cache_dtype`
  L1417-1443; 0.5.23 `_dsa_kv_cache_dtype_default` L491-546); other dtypes refused ("DeepSeek DSA only supports
  bf16/bfloat16 or fp8_e4m3").
* What the pool is sized by (the cell `profile_max_num_token` divides the budget by): 0.5.8-0.5.16 count
  (kv_lora_rank + rope) x the dtype's bytes + 132 B a layer (0.5.8 `model_runner_kv_cache_mixin.py` L47-80; 0.5.10
  `get_cell_size_per_token` L75-108; 0.5.9's model runner not read, planned as the two around it), so under the
  656-byte row the pool allocates 80 B a layer a token more than it counted; from 0.5.17 the row as allocated
  (`_compute_cell_size` calls calculate_mla_kv_cache_dim: 0.5.17 `model_executor/pool_configurator.py` L183-243).
* IndexCache (GLM-5.2: layers that reuse an earlier layer's top-k): from 0.5.18 the pool gives such a layer a 0-row
  indexer buffer and the cell counts only the layers that run their indexer (`skip_topk_layers`,
  `_should_elide_dsa_index_k`; 0.5.23 `pool_configurator.py` L560-640). 0.5.17 and before count every layer:
  such a model is refused there.

0.5.8 on force DP attention only for context parallelism (0.5.8 `server_args.py` L1115-1135; 0.5.10 L1568-1574).
ROCm (AMD), read in the wheels and refused, as its page is not the command's to know: the default DSA backends are
ROCm's own (tilelang 0.5.10-0.5.14, 0.5.10 `server_args.py` L1459-1461; aiter / tilelang in 0.5.15, triton / aiter
0.5.16-0.5.18, tilelang 0.5.19, triton from 0.5.20, 0.5.23 `arg_groups/overrides.py` L709-713), and under each the
latent row is the raw one, 576 elements of the KV dtype without scales (0.5.10 `model_runner_kv_cache_mixin.py`
L261-266 tilelang; 0.5.14 L249 adds aiter; 0.5.20 `mem_cache/kv_cache_configurator.py` L2575 adds triton; 0.5.23
L3442-3448), so counted = allocated in every release. --kv-cache-dtype auto reads torch's capability, gfx942 /
gfx950 -> major 9: bfloat16. The indexer keys are 132 B a token as on CUDA (0.5.23 `mem_cache/index_key_cache.py`
L22-47). The page is ROCm's: 1 whatever --page-size says in 0.5.10-0.5.11 (0.5.10 `server_args.py` L1576-1579); from
0.5.12 1 on the legacy path, 64 only where aiter's preshuffled paged MQA runs (SGLANG_USE_AITER=1 and Triton >= 3.5
or AITER_ENABLE_AOT_GLUON_PA_MQA_LOGITS=1: 0.5.12 `server_args.py` L1856-1868; 0.5.23
`layers/attention/dsa/utils.py` L34-68, `arg_groups/model_overrides/deepseek_v2.py` L151-172); SGLANG_USE_AITER is
off by default (0.5.12 `environ.py` L326), but it is the environment's, and Triton's version the install's. The
attention backend is dsa (nsa), not aiter: no 0.85 cut. A plan of all this (page 1 assumed and said) changes the speed
corpus's held-out pricing, so it waits on its own round: it is not shipped.
Refused with the reason: releases before 0.5.8 (0.5.3-0.5.7 force DP attention, 0.5.3 also mem_fraction_static 0.8
and a cell without the indexer: 0.5.3 `server_args.py` L806-846, `model_runner.py` L1274-1279), ROCm (above; and
0.5.8-0.5.9 page 1 on ROCm, 0.5.8 `server_args.py` L1151-1155, but the fp8 row is 656 B only where the cache's torch
dtype is float8_e4m3fn, `mem_cache/memory_pool.py` L1356, which on ROCm follows the gfx target's fp8 format: not
read), NPU and XPU pools. From 0.5.10 the raw row holds whatever the fp8 format: the pool takes the configurator's
dim unless it differs from 576 (0.5.10 `memory_pool.py` L1467-1478, L1826-1827).
A config's `index_kpool` > 1 (pooled indexer keys,
page 64 x index_kpool) or `learnable_sink` (bf16 forced, 0.5.20 on) is refused by kvplan.readers.families.dsa.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.core.dtypes import KV_DTYPES
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version
from kvplan.hardware.facts import capability_of, vendor_of
from kvplan.model.layers import INDEXER_QUANT_BLOCK, IndexedMLA, has_dsa
from kvplan.planning.plan import KV_ENGINE_AUTO, PlanWarning

FROM = (0, 5, 8)  # the first release whose DSA pool kvplan plans (0.5.3-0.5.7 force DP attention)
RAW_FP8 = (0, 5, 10)  # fp8 on capability >= 10 runs trtllm's raw rows (0.5.8-0.5.9: flashmla_kv everywhere)
COUNTS_ROW = (0, 5, 17)  # the cell counts the latent row as allocated (before: 576 x the dtype's bytes)
ELIDES = (0, 5, 18)  # layers that reuse another's top-k hold no indexer keys, nor are counted
GLM_SM12 = (0, 5, 17)  # GlmMoeDsaForCausalLM's fp8 cache on capability 12: flashinfer_sparse_mla (scaled rows)
FP32 = 4


@dataclass(frozen=True)
class DsaPool:
    """What one plan's DSA pool reads: the release and whether an fp8 latent row is the raw 576-byte one."""

    version: tuple
    raw_fp8: bool

    def latent_bytes(self, layer, kv_dtype) -> int:
        """Bytes of one token's latent row as allocated (module docstring)."""
        dim = layer.kv_lora_rank + layer.qk_rope_head_dim
        if kv_dtype.block_bytes == 2 or self.raw_fp8:
            return dim * kv_dtype.block_bytes
        return layer.kv_lora_rank + layer.kv_lora_rank // INDEXER_QUANT_BLOCK * FP32 + 2 * layer.qk_rope_head_dim

    def indexer_bytes(self, layer) -> int:
        """The indexer's keys of one token in `layer`: 132 B where it runs its indexer (every layer before 0.5.18)."""
        owns = layer.index_head_dim or self.version < ELIDES
        dim = layer.index_head_dim or 128
        return dim + dim // INDEXER_QUANT_BLOCK * FP32 if owns else 0

    def allocated(self, layer, kv_dtype) -> int:
        return self.latent_bytes(layer, kv_dtype) + self.indexer_bytes(layer)

    def counted(self, layer, kv_dtype) -> int:
        """Bytes one token of `layer` counts in the cell SGLang divides its budget by."""
        if self.version >= COUNTS_ROW:
            return self.allocated(layer, kv_dtype)
        return (layer.kv_lora_rank + layer.qk_rope_head_dim) * kv_dtype.block_bytes + self.indexer_bytes(layer)


def pool(model, gpu, version: str, kv_dtype) -> DsaPool | None:
    """The DsaPool of a DSA model (None for any other), or a one-line refusal where kvplan has not read SGLang
    `version`'s pool on this GPU or for this config (module docstring)."""
    if not has_dsa(model.layers):
        return None
    check_release(version)
    _check_vendor(gpu, version)
    if kv_dtype.name not in ("bf16", "fp8"):
        raise KvplanError(f"SGLang runs DeepSeek Sparse Attention with a bfloat16 or fp8_e4m3 KV cache only "
                          f"(\"DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3\"), not {kv_dtype.name}",
                          EXIT_USAGE, param="kv_dtype", value=kv_dtype.name, allowed=("auto", "bf16", "fp8"))
    if any(isinstance(la, IndexedMLA) and la.index_head_dim not in (0, 128) for la in model.layers):
        raise KvplanError("SGLang's DeepSeek Sparse Attention pool runs index_head_dim 128 only (DSATokenToKVPool "
                          "asserts it)", EXIT_USAGE)
    v = parse_version(version)
    if v < ELIDES and any(isinstance(la, IndexedMLA) and not la.index_head_dim for la in model.layers):
        raise KvplanError(f"SGLang {version} gives every DeepSeek Sparse Attention layer indexer keys: kvplan reads "
                          "IndexCache's skipped layers (no keys, not counted) from 0.5.18 only; plan 0.5.18 or later",
                          EXIT_USAGE, param="engine_version", value=version)
    cap = capability_of(gpu)
    major = cap[0] if cap is not None else 0
    glm_sm12 = v >= GLM_SM12 and major == 12 and model.architecture == "GlmMoeDsaForCausalLM"
    return DsaPool(v, raw_fp8=v >= RAW_FP8 and major >= 10 and not glm_sm12)


def pool_or_reason(model, gpu, version: str, kv_dtype) -> tuple[DsaPool | None, tuple]:
    """(pool(...), ()) or (None, (message, param, value)) where it refuses: Settings keeps the reason, which `refuse`
    raises where the pool is sized, so the settings the pool does not read stay available."""
    try:
        return pool(model, gpu, version, kv_dtype), ()
    except KvplanError as err:
        return None, (err.message, err.param, err.value, err.allowed)


def refuse(st) -> None:
    """Raise the reason `st` (Settings) keeps for a DSA pool kvplan does not plan, if any."""
    if st.dsa_refused:
        message, param, value, allowed = st.dsa_refused
        raise KvplanError(message, EXIT_USAGE, param=param, value=value, allowed=allowed)


def _check_vendor(gpu, version: str) -> None:
    """Refuse the pools kvplan does not plan: ROCm's (its page follows the install, module docstring), NPU's, XPU's."""
    vendor = vendor_of(gpu)
    if vendor == "AMD":
        why = ("0.5.8-0.5.9 write 656-byte fp8 rows only where torch's fp8 is float8_e4m3fn, which follows the "
               "gfx target" if parse_version(version) < (0, 5, 10) else
               "raw 576-element rows + 132 B of indexer keys a layer, on pages of 1, or of 64 from 0.5.12 where "
               "aiter's preshuffled paged MQA runs (SGLANG_USE_AITER=1 and Triton >= 3.5), which the command does "
               "not say")
        raise KvplanError(f"SGLang {version}'s DeepSeek Sparse Attention pool on ROCm is not planned: {why}",
                          EXIT_USAGE, param="gpu")
    if vendor != "NVIDIA":
        raise KvplanError(f"SGLang's DeepSeek Sparse Attention pool on {vendor or 'this GPU'}: kvplan reads its CUDA "
                          "pool only (NPU and XPU run their own)", EXIT_USAGE, param="gpu")


def check_release(version: str) -> None:
    if parse_version(version) < FROM:
        raise KvplanError(f"SGLang {version}'s DeepSeek Sparse Attention pool is not planned: kvplan reads it from "
                          "0.5.8 (0.5.3-0.5.7 force DP attention, dp_size = tp_size; 0.5.3 also mem_fraction_static "
                          "0.8 and a cell without the indexer keys); plan 0.5.8 or later", EXIT_USAGE,
                          param="engine_version", value=version)


def served(model, gpu, version: str, req):
    """(`req`, plan warnings) with SGLang's --kv-cache-dtype auto for a DSA model: fp8_e4m3 on compute capability
    >= 10, where the model dtype (bf16) is kvplan's auto ("Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on
    SM10 device"); bfloat16 below, the model dtype. A dtype asked for by name is left as asked."""
    cap = capability_of(gpu)
    dsa = has_dsa(model.layers)
    if not (req.kv_auto and dsa and parse_version(version) >= FROM and cap is not None and cap[0] >= 10):
        return req, ()
    note_ = PlanWarning(f"KV cache fp8: SGLang {version}'s kv_cache_dtype auto is fp8_e4m3 for DeepSeek Sparse "
                        f"Attention on compute capability {cap[0]} (_dsa_kv_cache_dtype_default: >= 10)",
                        topic=KV_ENGINE_AUTO, note=True)  # the engine's own default: a note
    return dataclasses.replace(req, kv_dtype=KV_DTYPES["fp8"]), (note_,)


def note(pool_: DsaPool, model, kv_dtype) -> str:
    """The pool's rule in words, with the bytes a token counts and takes where they differ."""
    layers = [la for la in model.layers if isinstance(la, IndexedMLA)]
    counted = sum(pool_.counted(la, kv_dtype) for la in layers)
    taken = sum(pool_.allocated(la, kv_dtype) for la in layers)
    row = {True: "raw fp8 row (trtllm)", False: "fp8 row with scales (656 B)"}[pool_.raw_fp8] \
        if kv_dtype.block_bytes == 1 else "bf16 row"
    said = (f"DeepSeek Sparse Attention pool: latent as a {row} + 132 B of indexer keys a layer, "
            f"{taken:,} B a token over {len(layers)} layers")
    if counted != taken:
        said += (f"; this release sizes the pool by {counted:,} B a token (576 x the dtype's bytes + 132), so it "
                 f"allocates {taken - counted:,} B a token more than its budget")
    return said + f" (kvplan/engines/sglang/dsa.py; {arg('kv_dtype')} sets the row)"
