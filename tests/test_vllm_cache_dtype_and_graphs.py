"""Two vLLM facts read from its source: MiMo-V2-Flash caches K/V in the model dtype whatever
--kv-cache-dtype says, and the release from which the CUDA-graph estimate is subtracted from the budget."""

from __future__ import annotations

from pathlib import Path

from kvplan.catalog import find_in_catalog
from kvplan.deploy import Deployment
from kvplan.dtypes import canonical_kv_dtype
from kvplan.engines import resolve_engine
from kvplan.engines.vllm import settings as vllm_settings
from kvplan.hardware import find_gpu
from kvplan.logs.parse import parse_log
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


def test_vllm_0_19_log_does_not_subtract_its_cuda_graph_estimate():
    # llm-d-planner's v0.19.0 Llama-3.1-8B log (gmu 0.95, H100 79.19 GiB): non-KV 17.12 GiB, estimate 0.84 GiB,
    # available 58.11 GiB = 0.95 x 79.19 - 17.12 = 58.11 (with the estimate subtracted it would be 57.27)
    log = parse_log((CORPUS / "llmd-meta-llama-llama-3-1-8b-h100-80gb-tp1pp1dp1-8192.log").read_text())
    r = log.reported
    assert r["cudagraph_estimate_gib"].value == 0.84
    assert abs(0.95 * r["total_gpu_memory_gib"].value - r["non_kv_gib"].value - r["available_kv_gib"].value) < 0.01
