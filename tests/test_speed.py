"""The calibrated step-time model (kvplan.speed): each term by hand, the fit, and the shipped coefficients (the corpus's
split and reading, the train CV's guard and the CLI's speed surfaces: tests/test_speed_surfaces.py).

Hand arithmetic comes from the datasheets the GPU profiles cite (H100 SXM: 989 TFLOP/s dense BF16,
1,978 FP8, 3.35 TB/s, NVLink 450 GB/s per direction) and from NCCL's latency table
(NVIDIA/nccl src/graph/tuning.cc: baseLat Ring/LL 6.6 us, hwLat NVLink Ring/LL 0.6 us).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed import model as speed
from kvplan.speed.corpus import in_training
from kvplan.speed.eras import unused_terms
from kvplan.speed.nnls import nnls
from kvplan.speed.shape import model_terms
from kvplan.speed.allreduce import link, ring_allreduce_seconds
from kvplan.speed.terms import TERMS, Shape, experts_touched, features, gemm_rate, roofline

CORPUS = Path(__file__).parent / "fixtures" / "speed"
H100 = find_gpu("h100-sxm")


def test_fp8_weights_run_at_the_fp8_rate_of_the_profile():
    # H100 SXM datasheet, dense: BF16 989 TFLOP/s, FP8 1,978 TFLOP/s (twice).
    assert gemm_rate(H100, "fp8") == (1_978e12, "fp8")
    assert gemm_rate(H100, "bf16") == (989e12, "bf16")
    assert gemm_rate(H100, None) == (989e12, "bf16")
    # the A100 has no FP8 math: FP8 weights run through weight-only kernels at its BF16 rate (312 T)
    assert gemm_rate(find_gpu("a100-sxm-80"), "fp8") == (312e12, "bf16")
    # A GEMM term: 1,000 tokens x 2 x 8e9 parameters = 1.6e13 FLOPs; at FP8 1.6e13 / 1.978e15 = 8.09 ms,
    # half the BF16 time (16.18 ms).
    s = Shape(dense_bytes=0, flops_per_token=16e9, gemm_rate=gemm_rate(H100, "fp8")[0], bf16_rate=989e12,
              bandwidth=3.35e12)
    f = features(s, 1000, 1, 0, 0)
    assert f[TERMS.index("gemm")] == pytest.approx(1.6e13 / 1.978e15)
    assert f[TERMS.index("gemm")] * 2 == pytest.approx(1.6e13 / 989e12)


def test_ring_all_reduce_over_nvlink():
    # 8 H100s on NVSwitch: 450 GB/s per direction; NCCL ring LL latency 6.6 + 2 x 7 x 0.6 = 15.0 us.
    bw, lat = link(H100, 8)
    assert bw == 450e9
    assert lat == pytest.approx(15.0e-6)
    # 16 MiB: 2 x 7/8 x 16,777,216 / 450e9 = 65.24 us, plus 15.0 us = 80.24 us
    assert ring_allreduce_seconds(16 * 2**20, 8, bw, lat) == pytest.approx(2 * 7 / 8 * 16 * 2**20 / 450e9 + 15.0e-6)
    assert ring_allreduce_seconds(16 * 2**20, 1, bw, lat) == 0.0
    assert link(H100, 1) == (0.0, 0.0)


def test_tp_collectives_in_a_step():
    # tp 2, 10 layers, hidden 4096, 8 tokens: 2 all-reduces a layer of 8 x 4096 x 2 bytes = 65,536 B;
    # bandwidth part 20 x 2 x 1/2 x 65,536 / 450e9; 20 calls x 7.8 us (6.6 + 2 x 1 x 0.6).
    bw, lat = link(H100, 2)
    s = Shape(dense_bytes=0, layers=10, hidden=4096, tp=2, bandwidth=3.35e12, link_bandwidth=bw, link_latency_s=lat)
    f = features(s, 8, 8, 0, 0)
    assert f[TERMS.index("comm")] == pytest.approx(20 * 65_536 / 450e9)
    assert f[TERMS.index("latency")] == pytest.approx(20 * 7.8e-6)


def test_experts_touched():
    # E = 8, k = 2: one token reaches 2 experts; two tokens 8 x (1 - (3/4)^2) = 3.5; many tokens all 8.
    assert experts_touched(8, 2, 1) == pytest.approx(2.0)
    assert experts_touched(8, 2, 2) == pytest.approx(3.5)
    assert experts_touched(8, 2, 10_000) == pytest.approx(8.0)
    # the expert term reads that share of the rank's expert bytes: 3.5 / 8 x 8 GB / 2 TB/s = 1.75 ms
    s = Shape(dense_bytes=0, expert_bytes=8_000_000_000, num_experts=8, top_k=2, expert_params=1e9,
              bandwidth=2e12, gemm_rate=1e15, bf16_rate=1e15)
    f = features(s, 2, 2, 0, 0)
    assert f[TERMS.index("experts")] == pytest.approx(1.75e-3)
    # grouped GEMM at low occupancy: 3.5 experts x 2 x 1e9 parameters / 1e15 = 7 us per token-per-expert
    assert f[TERMS.index("grouped")] == pytest.approx(3.5 * 2e9 / 1e15)


def test_moe_shape_routed_experts_apart_and_shared_expert_read_every_step():
    # Qwen3.5-35B-A3B's config.json (ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce:
    # aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3.5-35B-A3B_config.json, as bundled): hidden 2,048,
    # 40 layers all MoE, 256 routed experts top-8 of moe_intermediate_size 512, one shared expert of 512 with a
    # sigmoid gate (2,048). One routed expert (gate, up, down) = 3 x 2,048 x 512 = 3,145,728 parameters a layer,
    # 125,829,120 over 40 layers; all 256 in bf16: 256 x 125,829,120 x 2 = 64,424,509,440 bytes.
    spec = find_in_catalog("qwen3.5-35b-a3b")
    t = model_terms(spec)
    assert (t["num_experts"], t["top_k"], t["moe_layers"]) == (256, 8, 40)
    assert t["expert_params"] == 3 * 2048 * 512 * 40 == 125_829_120
    assert t["expert_bytes"] == 256 * 125_829_120 * 2 == 64_424_509_440
    # the shared expert, (3 x 2,048 x 512 + 2,048) x 40 = 125,911,040 parameters, is dense: read every step
    p = spec.params
    assert p.shared_experts == (3 * 2048 * 512 + 2048) * 40 == 125_911_040
    unshared = model_terms(replace(spec, params=replace(p, shared_experts=0)))
    assert t["dense_bytes"] - unshared["dense_bytes"] == 2 * 125_911_040
    # a decode step of 16 tokens: 256 x (1 - (248/256)^16) = 256 x (1 - 0.601710) = 101.96 experts a layer touched,
    # so 101.96 / 256 of the expert bytes read: 101.96 x 125,829,120 x 2 B / 4.8 TB/s = 5.346 ms
    s = Shape(**t, bandwidth=4.8e12, gemm_rate=1e15, bf16_rate=1e15)
    f = features(s, 16, 16, 0, 0)
    assert experts_touched(256, 8, 16) == pytest.approx(101.962, abs=1e-3)
    assert f[TERMS.index("experts")] == pytest.approx(101.962 * 125_829_120 * 2 / 4.8e12, rel=1e-5)
    assert f[TERMS.index("weights")] == pytest.approx(t["dense_bytes"] / 4.8e12)


def test_experts_serve_every_replica_under_expert_parallelism():
    # DEP4 (attention data parallel x 4, experts over the same 4 GPUs): a rank's 64 of 256 experts serve the
    # tokens of all 4 replicas. One replica's decode step of 16 sequences puts 4 x 16 = 64 tokens through its
    # experts: 256 x (1 - (1 - 8/256)^64) = 256 x (1 - 0.131084) = 222.44 touched, against 101.96 for 16 tokens.
    assert experts_touched(256, 8, 64) == pytest.approx(222.442, abs=1e-3)
    base = dict(dense_bytes=0, expert_bytes=64_000_000_000, num_experts=256, top_k=8, expert_params=1e9, ep=4,
                bandwidth=4e12, gemm_rate=1e15, bf16_rate=1e15)
    alone, shared = Shape(**base), Shape(**base, ep_replicas=4)
    # read: 222.44 / 256 x 64 GB / 4 TB/s = 13.903 ms; alone 101.96 / 256 x 64 GB / 4 TB/s = 6.373 ms
    assert features(shared, 16, 16, 0, 0)[TERMS.index("experts")] == pytest.approx(222.442 / 256 * 16e-3, rel=1e-5)
    assert features(alone, 16, 16, 0, 0)[TERMS.index("experts")] == pytest.approx(101.962 / 256 * 16e-3, rel=1e-5)
    # the shape sets it from the layout: dp replicas where ep > 1, none otherwise (dp alone: independent copies)
    spec = find_in_catalog("qwen3.5-35b-a3b")
    assert model_terms(spec, tp=1, ep=4, dp=4)["ep_replicas"] == 4
    assert model_terms(spec, tp=1, ep=1, dp=4)["ep_replicas"] == 1
    assert model_terms(find_in_catalog("llama-3.1-8b"), tp=1, ep=1, dp=4)["ep_replicas"] == 1


def test_fixed_costs_per_step_layer_sequence_and_request():
    s = Shape(dense_bytes=0, layers=32, bandwidth=1e12)
    f = dict(zip(TERMS, speed.decode_features(s, 4, 100)))
    assert (f["step"], f["layer"], f["seq"], f["request"]) == (1, 32, 4, 0)
    # a prefill of 20,000 tokens in chunks of 8,192: 3 steps, 96 layer passes, one request
    f = dict(zip(TERMS, speed.prefill_features(s, 20_000)))
    assert (f["step"], f["layer"], f["request"]) == (3, 96, 1)


def test_a_prefill_batch_is_priced_once_however_many_requests_it_holds():
    # SGLang's wave of 256 prompts of 1,000 tokens in prefill batches of 16,384 tokens: 256,000 / 16,384 = 15.6,
    # so 16 prefill batches (pstep 16) and 256 requests; a decode step is no prefill batch (pstep 0).
    s = Shape(dense_bytes=0, layers=32, bandwidth=1e12)
    f = dict(zip(TERMS, speed.prefill_features(s, 1000, chunk=16_384, batch=256)))
    assert (f["pstep"], f["step"], f["request"]) == (16, 16, 256)
    # and its cost by layer (TensorRT-LLM's eager prefill): 16 batches x 32 layers = 512 layer passes
    assert f["player"] == 512
    assert dict(zip(TERMS, speed.decode_features(s, 256, 1000)))["pstep"] == 0
    assert dict(zip(TERMS, speed.decode_features(s, 256, 1000)))["player"] == 0
    # the simulator's step adds it where the step carries prompt tokens (more tokens than sequences)
    coef = [0.0] * len(TERMS)
    coef[TERMS.index("pstep")] = 0.05
    sm = speed.StepModel(s, tuple(coef))
    assert sm.step(1_008, 9, 8_000, 8_008, 1) == pytest.approx(0.05)
    assert sm.step(8, 8, 8_000, 8_008) == 0.0
    # 1 ms a layer: 32 layers, 0.032 s a prefill step, none a decode step
    coef[TERMS.index("pstep")], coef[TERMS.index("player")] = 0.0, 0.001
    sm = speed.StepModel(s, tuple(coef))
    assert sm.step(1_008, 9, 8_000, 8_008, 1) == pytest.approx(0.032)
    assert sm.step(8, 8, 8_000, 8_008) == 0.0


def test_only_sglangs_and_trtllm_pytorch_sets_fit_the_prefill_batch_cost():
    # the batch's cost is SGLang's, its cost by layer TensorRT-LLM's PyTorch backend's (kvplan.speed.eras.ENGINE_TERMS):
    # every other shipped set leaves them at 0, trtllm-engine too though it shares its other terms with trtllm's
    # (kvplan.speed.fit._fit). trtllm's cost by layer is in its fit but may come out 0 (forty-seventh round: with the
    # overlap scheduler's step of fetch lag priced, kvplan.engines.scheduler.fetch_lag_steps, the fit takes it to 0)
    sets = json.loads((Path(speed.__file__).with_name("coefficients.json")).read_text())["engines"]
    assert "player" not in unused_terms("trtllm") and "player" in unused_terms("trtllm-engine")
    for key, entry in sets.items():
        fitted, by_layer = entry["coefficients"]["pstep"], entry["coefficients"]["player"]
        assert (fitted > 0) if key.startswith("sglang") else (fitted == 0.0), key
        assert by_layer >= 0.0 if key == "trtllm" else (by_layer == 0.0), key
        by_moe = entry["coefficients"]["pmoe"]  # a cost per MoE layer of a prefill step: SGLang's and trtllm's sets
        assert (by_moe > 0) if key.startswith("sglang") or key == "trtllm" else (by_moe == 0.0), key


def test_nnls_keeps_coefficients_non_negative():
    # rows (1, 0), (0, 1), (1, 1) against (1, -1, 0): least squares gives (1, -1); with x >= 0 the
    # second is 0 and the first minimises (x - 1)^2 + x^2: x = 1/2.
    x = nnls([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [1.0, -1.0, 0.0])
    assert x == pytest.approx([0.5, 0.0], abs=1e-9)
    # an exact non-negative solution is found
    assert nnls([[1.0, 2.0], [3.0, 1.0], [1.0, 1.0]], [5.0, 5.0, 3.0]) == pytest.approx([1.0, 2.0])


def test_the_calibrated_step_is_never_faster_than_the_roofline():
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.speed.shape import shape_for

    # bf16 weights: the old roofline (FLOPs at the bf16 rate) is a lower bound of every engine's step
    s = shape_for(find_in_catalog("llama-3.1-8b"), H100)
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp"):
        for batch, ctx in ((1, 100), (64, 4000), (512, 1000)):
            cal = speed.decode_seconds(s, engine, batch, ctx)
            assert cal >= roofline(s, batch, batch, batch * ctx, batch * (ctx + 1)) > 0
        assert speed.prefill_seconds(s, engine, 4096) >= speed.prefill_seconds(s, engine, 4096, speed="roofline")
    # fp8 weights: faster than that roofline in a compute-bound prefill (the FP8 rate), never faster than
    # the roofline at the FP8 rate (the terms at coefficient 1: reads, and GEMM + attention FLOPs)
    s8 = shape_for(find_in_catalog("llama-3.1-8b"), H100, weight_dtype="fp8")
    f = dict(zip(TERMS, speed.prefill_features(s8, 4096)))
    bound = max(f["weights"] + f["kv"] + f["experts"], f["gemm"] + f["attn"])
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp"):
        assert speed.prefill_seconds(s8, engine, 4096) >= bound


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the speed corpus (tests/fixtures/speed) is absent")
def test_refitting_the_training_split_reproduces_the_shipped_coefficients():
    from kvplan.bench.ship import fit_all

    shipped = json.loads(speed.DATA.read_text())
    fresh = fit_all(CORPUS)
    assert fresh["split"] == shipped["split"]
    assert fresh["corpus"]["train_sources"] == shipped["corpus"]["train_sources"]
    assert set(fresh["engines"]) == set(shipped["engines"]) == {"vllm", "vllm-inprocess", "sglang", "sglang<0.5.14",
                                                                "trtllm", "trtllm-engine", "trtllm<1.0", "llama.cpp"}
    for engine, entry in shipped["engines"].items():
        for term, value in entry["coefficients"].items():
            assert math.isclose(fresh["engines"][engine]["coefficients"][term], value, rel_tol=1e-6, abs_tol=1e-12), \
                (engine, term)
    # each set's held-out band ships apart (bands.json), so a diff of the coefficients shows no held-out figure
    bands = json.loads(speed.BANDS.read_text())["engines"]
    assert set(bands) == set(shipped["engines"])
    for engine, entry in shipped["engines"].items():
        assert "held_out" not in entry
        assert bands[engine] == fresh["engines"][engine]["held_out"], engine
    # no held-out source trained
    assert not set(shipped["corpus"]["train_sources"]) & set(shipped["corpus"]["held_out_sources"])
    assert all(not in_training(s) for s in shipped["corpus"]["held_out_sources"])


def test_the_simulator_step_model_equals_the_terms():
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.speed.model import StepModel, coefficients, priced
    from kvplan.speed.shape import shape_for

    # gpt-oss-120b: routed experts and sliding-window layers, both off the linear path
    s = shape_for(find_in_catalog("gpt-oss-120b"), H100, tp=2)
    assert s.num_experts and s.kv_windows
    sm = StepModel(s, coefficients("vllm"))
    for tokens, seqs, ctx, pairs, new in ((300, 20, 50_000, 1e6, 2), (8, 8, 8_000, 8_008, 0), (1, 1, 10, 11, 0)):
        want = priced(sm.coef, features(s, tokens, seqs, ctx, pairs, request=new))
        assert sm.step(tokens, seqs, ctx, pairs, new) == pytest.approx(want, rel=1e-12)
    dense = shape_for(find_in_catalog("llama-3.1-8b"), H100)
    sd = StepModel(dense, coefficients("sglang"))
    assert sd.decode(8)(8_000) == pytest.approx(sd.step(8, 8, 8_000, 8_008))
    # falcon-mamba-7b: no token cache, only a recurrent state per sequence, read and written back each step
    mamba = shape_for(find_in_catalog("falcon-mamba-7b"), H100)
    assert mamba.kv_bytes_per_token == 0 and mamba.state_bytes_per_seq > 0
    sm = StepModel(mamba, coefficients("vllm"))
    assert sm.step(8, 8, 8_000, 8_008) == pytest.approx(priced(sm.coef, features(mamba, 8, 8, 8_000, 8_008)), rel=1e-12)


def test_a_recurrent_state_is_read_and_written_back_each_step():
    # A sequence's fixed state of S bytes costs 2 x S per step (read, then written back): 4 sequences of a
    # made-up 1 MiB state on a 1 TB/s link add 4 x 2 x 1,048,576 / 1e12 s = 8.388608e-06 s to the KV term.
    base = Shape(dense_bytes=0, kv_bytes_per_token=0, bandwidth=1e12)
    with_state = Shape(dense_bytes=0, kv_bytes_per_token=0, state_bytes_per_seq=1 << 20, bandwidth=1e12)
    kv = TERMS.index("kv")
    got = features(with_state, 4, 4, 0, 0)[kv] - features(base, 4, 4, 0, 0)[kv]
    assert got == pytest.approx(8.388608e-06, rel=1e-12)
