"""SGLang's deployment options as they change what a rank holds, and its token pool under pp.

Expected bytes are SGLang's placement (kvplan/engines/sglang/layout.py, docs/engines.md 9.2, read in the
0.5.3 / 0.5.13 / 0.5.23 wheels) applied by hand to DeepSeek-V3's published config: the parts below are
the sums in tests/test_layouts.py (dense MLPs 1,189,085,184 B, shared experts 2,554,331,136 B, LM head
and embedding 1,853,358,080 B each; FP8 with block scales). Weights are checked within 0.01 %.
"""

from __future__ import annotations

import json

import pytest

from kvplan.planning.deploy import Deployment
from kvplan.engines import resolve_engine
from kvplan.core.errors import KvplanError
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model

GIB = 2**30
H200, MI300X = find_gpu("h200"), find_gpu("mi300x")
DPA8 = Deployment(tp=1, dp=8, ep=8)  # --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8
DENSE, SHARED, TABLE = 1_189_085_184, 2_554_331_136, 1_853_358_080
BASE = 95_937_789_952  # tests/test_layouts.py: DP attention 8, dense / shared / head over all 8 ranks


def _weights(gpu, dep=DPA8, version=None, **opts) -> int:
    engine = resolve_engine("sglang", version, [f"{k}={v}" for k, v in opts.items()])
    spec = resolve_model("deepseek-v3").spec
    res = engine.result(spec, gpu, dep, Request(32768, overhead_bytes=2 * GIB))
    # the placement's bytes: the plan's weights are as loaded, with the RoPE tables SGLang builds (sglang/loaded.py)
    return res.plan.weight_bytes_per_gpu - res.settings["loaded_extra"]


def close(value: int, expected: int, rel: float = 1e-4) -> bool:
    return abs(value - expected) <= rel * expected


@pytest.mark.parametrize("gpu,opts,expected", [
    # defaults on H200: fusion is off under expert parallelism on NVIDIA ("Only Deepseek V3/R1 on AMD-platform
    # with capability >= gfx942(MI30x) can use shared experts fusion optimization under expert parallelism")
    (H200, {}, BASE),
    # --moe-dense-tp-size 1: the 3 dense MLPs whole on every rank, + 7/8 x 1,189,085,184 = 1,040,449,536
    (H200, {"moe_dense_tp_size": 1}, BASE + 1_040_449_536),
    # --moe-dense-tp-size 8 (= --tp-size) is the default placement
    (H200, {"moe_dense_tp_size": 8}, BASE),
    # --enable-dp-lm-head: the head over the attention-TP group of 1, whole: + 7/8 x 1,853,358,080 = 1,621,688,320
    (H200, {"enable_dp_lm_head": "true"}, BASE + 1_621_688_320),
    # MI300X (gfx942): the shared expert is fused into the routed experts; each rank's MoE holds 256 / 8 + 1
    # experts at width 2048 / (8 / 8): the whole shared expert, + 7/8 x 2,554,331,136 = 2,235,039,744
    (MI300X, {}, BASE + 2_235_039_744),
    (MI300X, {"disable_shared_experts_fusion": "true"}, BASE),
    # --enforce-shared-experts-fusion skips the platform checks (H200 then fuses as MI300X does)
    (H200, {"enforce_shared_experts_fusion": "true"}, BASE + 2_235_039_744),
])
def test_sglang_options_move_per_rank_weights(gpu, opts, expected):
    assert close(_weights(gpu, **opts), expected)


def test_sglang_embedding_under_dp_attention_by_release():
    # --tp-size 8 --dp-size 4 --enable-dp-attention: attention TP 2. 0.5.3 replicates the embedding under
    # DP attention (enable_tp=not is_dp_attention_enabled()); 0.5.23 splits it over the attention-TP group
    # (get_embedding_tp_kwargs): 1,853,358,080 - 1,853,358,080 / 2 = 926,679,040 B less per rank.
    dep = Deployment(tp=2, dp=4, ep=8)
    old, new = _weights(H200, dep, "0.5.3"), _weights(H200, dep, "0.5.23")
    assert close(old - new, 926_679_040, rel=1e-3)


@pytest.mark.parametrize("dep,opts,needle", [
    (DPA8, {"moe_dense_tp_size": 2}, "only supports None, 1, or tp_size"),
    (Deployment(tp=8), {"enable_dp_lm_head": "true"}, "requires DP attention"),
    (DPA8, {"enforce_shared_experts_fusion": "true", "version": "0.5.3"}, "not in SGLang 0.5.3"),
])
def test_sglang_option_refusals(dep, opts, needle):
    version = opts.pop("version", None)
    with pytest.raises(KvplanError, match=needle):
        _weights(H200, dep, version, **opts)


def test_sglang_pool_under_pp_is_sized_from_the_stage_layers():
    # Llama-3.1-8B: 32 layers, 8 KV heads x 128, bf16: 8 x 256 x 2 = 4,096 B per token per layer. SGLang sizes
    # each stage's cell from its own layers (num_effective_layers = end_layer - start_layer): pp 2 -> 16 x 4,096 =
    # 65,536 B; pp 3 (11 / 11 / 10 layers) -> the largest stage, 11 x 4,096 = 45,056 B; pp 1 -> 131,072 B.
    engine = resolve_engine("sglang")
    spec = resolve_model("llama-3.1-8b").spec
    for pp, cell in ((1, 131_072), (2, 65_536), (3, 45_056)):
        # a given 40 GiB per rank, so the token count is checked against a budget kvplan did not compute:
        # 42,949,672,960 // 131,072 = 327,680; // 65,536 = 655,360; // 45,056 = 953,250 (page 1)
        req = Request(8192, kv_cache_memory_bytes=40 * GIB)
        cap = engine.result(spec, H200, Deployment(tp=1, pp=pp), req).capacity
        assert cap.bytes_per_token == cell
        assert cap.tokens == 40 * GIB // cell


def test_fit_emit_sglang_layout_options():
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["fit", "deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k",
                                   "--engine", "sglang", "--engine-opt", "moe_dense_tp_size=1",
                                   "--engine-opt", "enable_dp_lm_head=true", "--emit", "sglang", "--json"])
    assert res.exit_code == 0, res.output
    args = json.loads(res.stdout)["emit"].split()
    assert args[args.index("--moe-dense-tp-size") + 1] == "1" and "--enable-dp-lm-head" in args
