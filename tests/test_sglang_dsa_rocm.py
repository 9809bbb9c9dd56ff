"""SGLang's DSA pool on ROCm (kvplan.engines.sglang.dsa): DeepSeek-V3.2 and GLM-5 on MI300X and MI355X.

Expected bytes are written out from the SGLang wheels (sglang/srt/...), not from kvplan:
  * backends on HIP: tilelang 0.5.10-0.5.14 (0.5.10 server_args.py L1459-1461), triton from 0.5.20 (0.5.23
    arg_groups/overrides.py L709-713); under tilelang / triton / aiter the latent row is raw, 512 + 64 = 576 elements
    of the KV dtype with no scales (0.5.10 model_runner_kv_cache_mixin.py L261-266; 0.5.23
    mem_cache/kv_cache_configurator.py L3442-3448): bf16 1,152 B, fp8 576 B; the cell counts the same;
  * indexer keys: 128 + 128 / 128 x 4 = 132 B a token a layer (0.5.23 mem_cache/index_key_cache.py L22-47);
  * auto dtype: torch's capability on gfx942 / gfx950 has major 9, below 10: bfloat16 (0.5.23 overrides.py L491-546);
  * page: 1 on ROCm whatever --page-size says in 0.5.10 (server_args.py L1576-1579); from 0.5.12 also 1 unless
    SGLANG_USE_AITER=1 (default False, 0.5.12 environ.py L326) and Triton >= 3.5 (0.5.23 deepseek_v2.py L151-172).
"""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

MI300X, MI355X = (find_gpu(g) for g in ("mi300x", "mi355x"))
V32, GLM5 = (find_in_catalog(m) for m in ("deepseek-v3.2", "glm-5"))
DEP = Deployment(8)


def _result(model, gpu, version="0.5.23", kv="auto", opts=()):
    req = Request(context=32768, kv_dtype=None if kv == "auto" else canonical_kv_dtype(kv), kv_auto=kv == "auto")
    return resolve_engine("sglang", version, list(opts)).result(model, gpu, DEP, req)


def _figures(res) -> dict:
    return {f.label: f.value for f in res.capacity.lines}


@pytest.mark.parametrize("model, gpu, version, kv, cell", [
    # GLM-5 on MI355X, auto = bfloat16 (major 9): 78 x (1,152 + 132) = 100,152
    (GLM5, MI355X, "0.5.23", "auto", 78 * (1152 + 132)),
    # DeepSeek-V3.2 on MI300X, auto bf16: 61 x (1,152 + 132) = 78,324
    (V32, MI300X, "0.5.10", "auto", 61 * (1152 + 132)),
    # fp8 under triton (0.5.23) or tilelang (0.5.10-0.5.16): the raw 576-byte row, not the 656-byte scaled one CUDA's
    # flashmla_kv takes: 61 x (576 + 132) = 43,188, counted as allocated in every release (0.5.14 too)
    (V32, MI300X, "0.5.23", "fp8", 61 * (576 + 132)),
    (V32, MI300X, "0.5.14", "fp8", 61 * (576 + 132)),
    (GLM5, MI355X, "0.5.16", "fp8", 78 * (576 + 132)),  # 78 x 708 = 55,224
])
def test_rocm_cell_is_the_raw_row_plus_the_indexer(model, gpu, version, kv, cell):
    res = _result(model, gpu, version, kv)
    fig = _figures(res)
    assert fig["cell per token"] == cell
    assert res.plan.kv_bytes_per_token == 8 * cell  # allocated = counted, on all 8 ranks
    # page 1: the pool is the budget over the cell, not rounded to 64
    assert fig["max_total_num_tokens"] == fig["KV budget per GPU (rest)"] // cell
    assert res.capacity.block_size == 1
    assert not any("more than its budget" in n for n in res.capacity.notes)
    assert not any("Sparse Attention" in w.message for w in res.plan.warnings)  # no fp8 auto below major 10


def test_rocm_page_is_1_and_the_preshuffled_path_is_said():
    # 0.5.10: page 1 unconditionally on ROCm, whatever page_size is given
    old = _result(V32, MI300X, "0.5.10", opts=["page_size=64"])
    assert old.capacity.block_size == 1
    assert any("page_size 1" in n and "(64)" in n for n in old.capacity.notes)
    assert not any("SGLANG_USE_AITER" in n for n in old.capacity.notes)
    # 0.5.12 on: 64 under aiter's preshuffled paged MQA, which kvplan does not assume, and says so
    new = _result(GLM5, MI355X, "0.5.23")
    assert any("SGLANG_USE_AITER=1" in n and "64-token pages" in n for n in new.capacity.notes)


def test_rocm_dsa_takes_no_aiter_cut():
    # the attention backend is dsa (0.5.23 deepseek_v2.py L99-104), not aiter: mem_fraction_static is not scaled by
    # 0.85 past 8,192 tokens of context; GLM-5's context is 202,752
    res = _result(GLM5, MI355X, "0.5.23")
    assert not any("0.85" in n for n in res.capacity.notes)


@pytest.mark.parametrize("version", ["0.5.8", "0.5.9"])
def test_rocm_before_0_5_10_is_refused(version):
    with pytest.raises(KvplanError, match="on ROCm is not planned: kvplan reads it from 0.5.10"):
        _result(GLM5, MI355X, version)
