"""SGLang's DeepSeek Sparse Attention pool (kvplan.engines.sglang.dsa): DeepSeek-V3.2 and GLM-5 by release and GPU.

Expected bytes are written out from the SGLang wheels (sglang/srt/...), not from kvplan:
  * latent row, `calculate_mla_kv_cache_dim` (0.5.10 model_runner_kv_cache_mixin.py L240-285; 0.5.23
    mem_cache/kv_cache_configurator.py L3412-3473): 512 + 64 = 576 elements of the KV dtype (bf16 1,152 B); an fp8
    cache under a scaled backend 512 + 512 / 128 x 4 + 64 x 2 = 656 B; under trtllm the raw 576 B;
  * indexer keys (DSATokenToKVPool, 0.5.23 mem_cache/memory_pool.py L5279-5380, index_key_cache.py L22-47):
    128 + 128 / 128 x 4 = 132 uint8 a token a layer, replicated over tp;
  * backends (0.5.23 arg_groups/overrides.py L600-730): fp8 on capability >= 10 trtllm (from 0.5.10; 0.5.8-0.5.9
    flashmla_kv everywhere), on 9.0 flashmla_kv;
    GlmMoeDsaForCausalLM fp8 on capability 12 flashinfer_sparse_mla; auto is fp8_e4m3 on >= 10, bf16 below
    (L491-546);
  * cell: 0.5.8-0.5.16 (576 x the dtype's bytes + 132) a layer (0.5.10 get_cell_size_per_token L75-108); from 0.5.17
    the row as allocated (0.5.17 pool_configurator.py L183-243); from 0.5.18 only layers running their indexer
    (0.5.23 pool_configurator.py L560-640).
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

GIB = 2**30
H200, B200, PRO6000, MI355X = (find_gpu(g) for g in ("h200-sxm", "b200", "rtx-pro-6000-server", "mi355x"))
V32, GLM5, GLM52 = (find_in_catalog(m) for m in ("deepseek-v3.2", "glm-5", "glm-5.2"))
BF16, FP8 = canonical_kv_dtype("bf16"), canonical_kv_dtype("fp8")
DEP = Deployment(8)


def _result(model, gpu, version="0.5.23", kv="auto", opts=()):
    req = Request(context=32768, kv_dtype=None if kv == "auto" else canonical_kv_dtype(kv), kv_auto=kv == "auto")
    return resolve_engine("sglang", version, list(opts)).result(model, gpu, DEP, req)


@pytest.mark.parametrize("model, gpu, version, kv, cell", [
    # H200 (9.0): auto is bfloat16: 61 x (1,152 + 132) = 78,324
    (V32, H200, "0.5.23", "auto", 61 * (1152 + 132)),
    # B200 (10.0): auto is fp8_e4m3 under trtllm, the raw row: 61 x (576 + 132) = 43,188
    (V32, B200, "0.5.23", "auto", 61 * (576 + 132)),
    # H200 fp8 (flashmla_kv): 61 x (656 + 132) = 48,068 counted and allocated from 0.5.17
    (V32, H200, "0.5.23", "fp8", 61 * (656 + 132)),
    # 0.5.14 counts 576 x 1 B + 132 a layer though it allocates 656 + 132: 61 x 708 = 43,188
    (V32, H200, "0.5.14", "fp8", 61 * (576 + 132)),
    # GLM-5 fp8 on capability 12 (flashinfer_sparse_mla from 0.5.17): 78 x (656 + 132) = 61,464; DeepSeek-V3.2 there
    # runs trtllm's raw row: 61 x 708
    (GLM5, PRO6000, "0.5.23", "fp8", 78 * (656 + 132)),
    (V32, PRO6000, "0.5.23", "fp8", 61 * (576 + 132)),
    (GLM5, PRO6000, "0.5.16", "fp8", 78 * (576 + 132)),  # before 0.5.17 capability 12 is trtllm's too
    # 0.5.8 (server_args.py L1175-1181): fp8 runs flashmla_kv on every GPU, 656-byte rows, counted as 576 + 132
    (V32, B200, "0.5.8", "auto", 61 * (576 + 132)),
    (V32, H200, "0.5.8", "auto", 61 * (1152 + 132)),
    # GLM-5.2's IndexCache: indexers on 21 of 78 layers (tests/test_dsa.py): 78 x 1,152 + 21 x 132 = 92,628
    (GLM52, H200, "0.5.23", "auto", 78 * 1152 + 21 * 132),
])
def test_the_cell_sglang_divides_its_budget_by(model, gpu, version, kv, cell):
    res = _result(model, gpu, version, kv)
    fig = engine_figures(res)
    assert fig["cell per token"] == cell
    # the pool: budget // cell, rounded down to the 64-token page DSA runs on CUDA
    assert fig["max_total_num_tokens"] == fig["KV budget per GPU (rest)"] // cell // 64 * 64
    assert res.capacity.block_size == 64


def test_b200_auto_is_fp8_and_said():
    res = _result(V32, B200)
    assert any("fp8_e4m3 for DeepSeek Sparse Attention" in w.message for w in res.plan.warnings)
    assert res.plan.kv_bytes_per_token == 8 * 61 * (576 + 132)  # fp8 rows on all 8 ranks
    h200 = _result(V32, H200)
    assert h200.plan.kv_bytes_per_token == 8 * 61 * (1152 + 132)  # bf16
    assert not any("Sparse Attention" in w.message for w in h200.plan.warnings)


def test_the_plan_prices_a_token_as_sglang_allocates_it():
    # the plan's per-token bytes are the rows allocated: on B200 the raw fp8 row, not vLLM's 656-byte fp8_ds_mla
    assert _result(V32, B200, kv="fp8").plan.kv_bytes_per_token == 8 * 61 * (576 + 132)
    # 0.5.14 allocates 656 + 132 while it counts 576 + 132, and says so: 61 x 80 = 4,880 B a token over its budget
    old = _result(V32, H200, "0.5.14", "fp8")
    assert old.plan.kv_bytes_per_token == 8 * 61 * (656 + 132)
    assert any("4,880 B a token more than its budget" in n for n in old.capacity.notes)
    # 0.5.8 on B200: auto fp8 in flashmla_kv's 656-byte rows (no trtllm default before 0.5.10)
    assert _result(V32, B200, "0.5.8").plan.kv_bytes_per_token == 8 * 61 * (656 + 132)


def test_kv_size_matches_sglang_pr_11309_log():
    # sgl-project/sglang#11309 (trevor-m, 2025-10-07), DeepSeek-V3.2-Exp at tp 8 on 8 x B200, fp8 cache under the
    # flashmla backend of that build (0.5.3's server_args.py L833-838 set nsa flashmla_decode for fp8; 656-byte
    # rows): "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB". The same scaled rows are what 0.5.23 runs
    # for an fp8 cache on an H200 (flashmla_kv): latent (975,424 + 64) x 656 B and indexer (975,424 + 64 + 1) // 64
    # pages x 64 x 132 B, a layer; 61 layers: 975,488 x 61 x 788 = 46,889,757,184 B = 43.67 GiB ("GB" in the log).
    engine = resolve_engine("sglang", "0.5.23", [])
    st = engine.settings(V32, H200, DEP, Request(context=4096, kv_dtype=FP8))
    assert f"{engine.k_size_gib(V32, DEP, st, 975_424, FP8):.2f}" == "43.67"


def test_page_is_64_whatever_is_given():
    res = _result(V32, H200, opts=["page_size=1"])
    assert res.capacity.block_size == 64
    assert any("page_size 64" in n and "(1)" in n for n in res.capacity.notes)


@pytest.mark.parametrize("model, gpu, version, kv, needle", [
    (V32, H200, "0.5.7", "auto", "from 0.5.8"),  # 0.5.3-0.5.7 force DP attention
    (GLM5, MI355X, "0.5.23", "auto", "on ROCm is not planned"),  # page 1 or 64 by env (test_sglang_dsa_rocm.py)
    (GLM52, H200, "0.5.17", "auto", "from 0.5.18"),  # 0.5.17 gives IndexCache's sharers indexer keys too
    (V32, H200, "0.5.23", "fp16", "bfloat16 or fp8_e4m3"),
])
def test_what_kvplan_has_not_read_is_refused(model, gpu, version, kv, needle):
    with pytest.raises(KvplanError, match=needle):
        _result(model, gpu, version, kv)


def test_explain_shows_sglangs_rows():
    # B200 at 0.5.23: trtllm's raw fp8 row (576 B), not vLLM's 656-byte fp8_ds_mla; 61 x 708 = 43,188 B a token
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", "deepseek-v3.2", "--engine", "sglang", "--gpu", "b200", "--tp", "8",
                                 "--ctx", "32k", "--explain"])
    assert r.exit_code == 0, r.output
    assert "61 MLA layers × (576 B latent + 132 B indexer keys)" in r.stdout and "= 43,188 B/token" in r.stdout


@pytest.mark.parametrize("version, name, ok", [
    # 0.5.23: "dsa" and its deprecated alias "nsa" (arg_groups/choices.py L74-75); "bogus" is outside the choices
    # argparse takes (fields/exec_.py L211); flashinfer is a choice SGLang keeps, but the DSA pool under it is not read
    ("0.5.23", "dsa", True), ("0.5.23", "nsa", True), ("0.5.23", "bogus", False), ("0.5.23", "flashinfer", False),
    ("0.5.23", "", False),
    # 0.5.12's choices have "nsa" only (server_args.py L152); "dsa" arrives in 0.5.13 (L175)
    ("0.5.12", "nsa", True), ("0.5.12", "dsa", False), ("0.5.13", "dsa", True),
])
def test_named_backend_checked_for_dsa(version, name, ok):
    opts = [f"attention_backend={name}"]
    if ok:
        assert _result(V32, H200, version, opts=opts).plan.fits is not None
        return
    with pytest.raises(KvplanError, match=f"attention_backend={name}: kvplan plans SGLang {version}'s DeepSeek") as e:
        _result(V32, H200, version, opts=opts)
    assert "\n" not in e.value.message
