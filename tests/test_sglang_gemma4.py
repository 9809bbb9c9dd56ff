"""SGLang's pool and attention backend for Gemma 4 (kvplan.engines.sglang.attention GEMMA4_FROM, engine.capacity).

Read in the PyPI wheels (sglang/srt/...):
* Gemma 4 runs triton off compute capability 10.x, on ROCm too, so aiter's 0.85 cut of mem_fraction_static never
  applies: "default_attention_backend = "trtllm_mha" if is_sm100_supported() else "triton"" (0.5.16
  `arg_groups/overrides.py` L704-720; the aiter test reads the resolved backend, `server_args.py` L5041-5042;
  0.5.13.post1 `server_args.py` L2365-2386 before L3018-3020). 0.5.11 and 0.5.12 set triton everywhere
  (`server_args.py` L2087-2090, L2224-2227). From 0.5.13 a named backend outside trtllm_mha / triton / intel_xpu
  (/ ascend) is an assertion error ("Gemma4 only supports ...", 0.5.16 L4706-4714).
* The hybrid SWA pool (Gemma 4 is in `is_hybrid_swa_model`'s list, `configs/model_config.py` L1919-1921; no override
  turns it off): full layers' bytes per token num_key_value_heads x (head_dim + v_head_dim) x 2 B after SGLang swaps
  Gemma 4's names (global_head_dim 512 and num_global_key_value_heads 4 become head_dim and num_key_value_heads, the
  sliding layers' 256 and 16 become swa_*; `utils/hf_transformers/config.py` L159-187), so K = V layers still cache
  V: 4 x 1,024 x 2 = 8,192 B a full layer, 16 x 512 x 2 = 16,384 B a sliding one. gemma-4-31B-it has 10 full and 50
  sliding layers: 81,920 B full + 819,200 B SWA a token. cell = 81,920 + 0.8 x 819,200 = 737,280 B
  (swa_full_tokens_ratio 0.8, `server_args.py` L795-806); full tokens = budget // cell, SWA tokens = int(0.8 x full)
  (`model_executor/pool_configurator.py` L381-398, L423-425).
"""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import BF16
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.sglang.pool import capacity
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import engine_figures

MI300X, B200 = find_gpu("mi300x"), find_gpu("b200")
GEMMA4 = find_in_catalog("gemma-4-31b-it")


def _st(gpu, version, opts=(), context=9216):
    return resolve_engine("sglang", version, list(opts)).settings(GEMMA4, gpu, Deployment(1), Request(context=context))


@pytest.mark.parametrize("version", ["0.5.11", "0.5.13.post1", "0.5.16", "0.5.23"])
def test_gemma4_on_rocm_runs_triton_so_the_fraction_is_not_cut(version):
    # the cookbook's MI300X run: --mem-fraction-static 0.8 at 9,216 tokens stays 0.8 (kvplan had 0.8 x 0.85 = 0.68)
    st = _st(MI300X, version, ["mem_fraction_static=0.8"])
    assert st.aiter_factor == 1.0 and st.mem_fraction_static == pytest.approx(0.8, abs=1e-12)
    assert "triton on ROCm" in st.aiter_why and st.page_size == 1


def test_a_backend_gemma4_does_not_accept_is_refused_from_0_5_13():
    with pytest.raises(KvplanError, match="Gemma 4 under trtllm_mha or triton only"):
        _st(MI300X, "0.5.16", ["attention_backend=aiter"])
    # 0.5.12 has no assertion: a named aiter runs, and past 8,192 tokens cuts 0.8 to 0.68
    assert _st(MI300X, "0.5.12", ["attention_backend=aiter", "mem_fraction_static=0.8"]).mem_fraction_static == \
        pytest.approx(0.68, abs=1e-12)


def test_gemma4_on_capability_10_is_triton_before_0_5_13_and_trtllm_mha_from_it():
    # triton forces no page (1); trtllm_mha runs 64-token pages unless 16, 32 or 64 is given
    assert _st(B200, "0.5.12").page_size == 1
    assert _st(B200, "0.5.16").page_size == 64


def test_the_hybrid_swa_pool_splits_by_the_ratio():
    st = _st(MI300X, "0.5.16", ["mem_fraction_static=0.8"])
    cap = capacity(GEMMA4, Deployment(1), 7_372_800_000, 9216, 1, st, BF16)
    figures = engine_figures(cap)
    # 7,372,800,000 // 737,280 = 10,000 full tokens; int(0.8 x 10,000) = 8,000 SWA tokens
    assert figures["cell per token"] == (81_920, 819_200, 0.8)
    assert figures["max_total_num_tokens"] == 10_000 and figures["SWA pool tokens"] == 8_000
    # the full pool bounds 9,216-token requests: 10,000 / 9,216 = 1.085; the SWA pool holds a request's window + a
    # page (1,025) 8,000 / 1,025 = 7.8 times
    assert cap.max_concurrency == pytest.approx(10_000 / 9216)
