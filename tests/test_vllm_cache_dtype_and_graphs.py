"""Two vLLM facts read from its source: MiMo-V2-Flash caches K/V in the model dtype whatever
--kv-cache-dtype says, and the release from which the CUDA-graph estimate is subtracted from the budget."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.catalog import find_in_catalog
from kvplan.deploy import Deployment
from kvplan.dtypes import canonical_kv_dtype
from kvplan.engines import resolve_engine
from kvplan.engines.vllm import settings as vllm_settings
from kvplan.hardware import find_gpu
from kvplan.plan import Request

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"


def test_mimo_v2_flash_kv_is_cached_in_bf16_under_vllm_whatever_the_kv_dtype():
    # vllm/model_executor/models/mimo_v2_flash.py (commits 01ed47b4 and 91cf2f13): MiMoV2FlashDecoderLayer builds
    # MiMoV2Attention without cache_config, so Attention(cache_config=None) caches in the model dtype (bf16).
    # MiMo-V2-Flash at tp 8: 48 layers (39 sliding, 9 full), KV heads 8 and 4 -> max(1, heads // 8) = 1 per rank,
    # K 192 + V 128 = 320 values a head: 48 x 320 x 2 B = 30,720 B per token per rank in bf16, 15,360 in fp8.
    model, gpu, dep = find_in_catalog("mimo-v2-flash"), find_gpu("h200"), Deployment(8, 1)
    fp8 = Request(context=32768, kv_dtype=canonical_kv_dtype("fp8"))
    res = resolve_engine("vllm").result(model, gpu, dep, fp8)
    assert res.capacity.bytes_per_token == 48 * 320 * 2
    assert res.plan.request.kv_dtype is None  # the model's own dtype
    assert any("whatever --kv-cache-dtype says" in n for n in res.capacity.notes)
    # kvplan's own rules size the dtype asked for
    neutral = resolve_engine(None).result(model, gpu, dep, fp8)
    assert neutral.plan.request.kv_dtype.name == "fp8"
    # a model vLLM builds with the cache config keeps the fp8 asked for: Llama 3.1 8B at tp 1,
    # 32 layers x 8 KV heads x (128 + 128) x 1 B = 65,536 B per token
    llama = resolve_engine("vllm").result(find_in_catalog("llama-3.1-8b-instruct"), gpu, Deployment(1, 1), fp8)
    assert llama.capacity.bytes_per_token == 32 * 8 * 256


def test_cuda_graph_estimate_is_subtracted_from_vllm_0_20_0():
    # vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "1" in the 0.20.0 wheel (L1724-1726),
    # 0.20.1 (L1737) and 0.21.0 (L1769); v0.19.1 L1655 defaults to "0". gpu_worker.py v0.20.0 L399-403 subtracts
    # the estimate when it is set (L420-425). The log line "CUDA graph memory profiling is enabled (default since
    # v0.21.0)" is already in the 0.20.0 wheel's gpu_worker.py (L455-462): its text names 0.21.0, the code
    # ships it on in 0.20.0, so logs carrying it say nothing about 0.20.x being off.
    model = find_in_catalog("llama-3.1-8b-instruct")
    gpu, req = find_gpu("h100"), Request(context=8192)
    on = {v: vllm_settings(model, gpu, Deployment(), req, v).cudagraphs for v in ("0.19.1", "0.20.0", "0.20.1", "0.22.0")}
    assert on == {"0.19.1": False, "0.20.0": True, "0.20.1": True, "0.22.0": True}
    assert not vllm_settings(model, gpu, Deployment(), req, "0.20.0", {"enforce_eager": "true"}).cudagraphs


def test_vllm_0_19_prediction_leaves_the_cuda_graph_estimate_in_the_kv_budget():
    # llm-d-planner's v0.19.0 Llama-3.1-8B log (H100 79.19 GiB, gmu 0.95, tp 1) prints each term:
    #   0.95 x 79.19 = 75.23 GiB - weights 14.99 - activation peak 1.89 - non-torch 0.25 = 58.10 GiB
    #   (58.11 printed, from the unrounded terms), and "Estimated CUDA graph memory: 0.84 GiB", which is
    #   therefore not subtracted (with it the budget would be 57.27).
    # kvplan's 0.19.0 prediction must land on the log's side: within half the estimate (0.42 GiB) of 58.11,
    # while kvplan does estimate the graphs (its own ~0.7 GiB would put it ~0.7 GiB below if subtracted).
    from typer.testing import CliRunner

    from kvplan.cli import app

    log = CORPUS / "llmd-meta-llama-llama-3-1-8b-h100-80gb-tp1pp1dp1-8192.log"
    r = CliRunner().invoke(app, ["check-log", str(log), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["version"] == "0.19.0"
    rows = {row["quantity"]: row for row in out["rows"]}
    available = rows["available KV memory (gmu 0.95)"]
    graphs = rows["CUDA graphs (vLLM's estimate)"]
    assert available["reported"] == "58.11 GiB" and graphs["reported"] == "0.84 GiB"
    predicted = float(available["predicted"].split()[0])
    estimate = float(graphs["predicted"].split()[0])
    assert abs(predicted - 58.11) < 0.84 / 2
    assert estimate > 0.84 / 2 and abs(predicted - estimate - 58.11) > 0.84 / 2
