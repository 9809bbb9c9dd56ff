"""SGLang's DSA pool on ROCm (kvplan.engines.sglang.dsa): refused for DeepSeek-V3.2 and GLM-5 on MI300X and MI355X.

The reasons are SGLang's wheels (sglang/srt/...), kvplan.engines.sglang.dsa's docstring has the lines:
  * from 0.5.10 the latent row is raw under ROCm's tilelang / triton / aiter backends (0.5.23
    mem_cache/kv_cache_configurator.py L3442-3448), but the page is 1, or 64 from 0.5.12 where aiter's preshuffled
    paged MQA runs (SGLANG_USE_AITER=1 and Triton >= 3.5: 0.5.23 arg_groups/model_overrides/deepseek_v2.py
    L151-172), which a kvplan command does not carry;
  * 0.5.8-0.5.9 write the 656-byte fp8 row only where the cache's torch dtype is float8_e4m3fn (0.5.8
    mem_cache/memory_pool.py L1356), which on ROCm follows the gfx target.
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
from conftest import engine_figures

MI300X, MI355X, H200 = (find_gpu(g) for g in ("mi300x", "mi355x", "h200-sxm"))
V32, GLM5 = (find_in_catalog(m) for m in ("deepseek-v3.2", "glm-5"))


def _result(model, gpu, version, kv="auto"):
    req = Request(context=32768, kv_dtype=None if kv == "auto" else canonical_kv_dtype(kv), kv_auto=kv == "auto")
    return resolve_engine("sglang", version, []).result(model, gpu, Deployment(8), req)


@pytest.mark.parametrize("model, gpu, version, kv, needle", [
    (GLM5, MI355X, "0.5.23", "auto", "SGLANG_USE_AITER=1 and Triton >= 3.5"),
    (V32, MI300X, "0.5.12", "fp8", "pages of 1, or of 64 from 0.5.12"),
    (V32, MI300X, "0.5.10", "auto", "raw 576-element rows"),
    (GLM5, MI355X, "0.5.8", "fp8", "only where torch's fp8 is float8_e4m3fn"),
])
def test_rocm_dsa_pool_is_refused_with_sglangs_reason(model, gpu, version, kv, needle):
    with pytest.raises(KvplanError, match="Sparse Attention pool on ROCm is not planned") as err:
        _result(model, gpu, version, kv)
    assert needle in err.value.message


def test_the_same_model_on_cuda_is_planned():
    # the refusal is ROCm's alone: GLM-5 on H200 at 0.5.23, bf16: 78 x (1,152 + 132) = 100,152 B a cell
    res = _result(GLM5, H200, "0.5.23")
    assert engine_figures(res)["cell per token"] == 78 * (1152 + 132)
