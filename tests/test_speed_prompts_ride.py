"""An open loop's prompts on TensorRT-LLM priced inside the decode steps they join (kvplan.speed.fit `rides`,
kvplan.engines.scheduler.prompts_ride): its micro-batch scheduler chunks an arriving prompt into the budget the
decodes leave, in the same forward, so the prompt pays its tokens' costs and not a forward's own (the weights read,
the per-step and per-layer costs, the all-reduce latency). A burst's wave fills whole prefill steps and keeps them;
vLLM and TensorRT-LLM before 1.0, which mix alike, keep their own prefill steps (their training CV was worse so
priced: the rule's scope is the CV's, docs/speed-history.md round 33)."""

from kvplan.bench.running import running
from kvplan.engines.scheduler import prompts_ride
from kvplan.speed.corpus import case_of
from kvplan.speed.fit import FORWARD_TERMS, Built, prompt_features, rides
from kvplan.speed.model import prefill_features
from kvplan.speed.terms import TERMS


def _built(engine: str, version: str, rate) -> Built:
    point = {"engine": engine, "gpu": "h100-sxm", "version": version, "isl": 1000, "osl": 200, "request_rate": rate,
             "arrival": "poisson", "num_prompts": 2000, "kvplan_model": "llama-3.1-8b-instruct", "gpus": 1, "dp": 1,
             "tp": 1, "metrics": {"ttft_ms": 100}}
    if rate == "inf":
        point.pop("arrival")
    c, why = case_of(point, "test", "")
    assert c is not None, why
    return Built(c, running)


def test_trtllm_open_loop_prompts_ride_and_drop_only_a_forwards_own_costs():
    b = _built("trtllm", "1.0.0", 4.0)
    assert b.load.ride and rides(b.load)
    full = prefill_features(b.shape, b.load.isl, batch=8, chunk=b.load.chunk)
    rode = prompt_features(b.shape, b.load, 8, True)
    for i, name in enumerate(TERMS):
        if i in FORWARD_TERMS:
            assert rode[i] == 0.0, name
        else:
            assert rode[i] == full[i], name
    # the weights read and a step's count are what a separate prefill step pays: 8 prompts of 1,000 tokens in
    # ceil(8,000 / chunk) chunk steps, each reading the dense weights once
    assert full[TERMS.index("step")] >= 1 and full[TERMS.index("weights")] > 0
    assert rode[TERMS.index("gemm")] > 0  # the prompt tokens' GEMM stays


def test_a_burst_and_vllm_keep_their_prefill_steps():
    burst = _built("trtllm", "1.0.0", "inf")
    assert burst.load.ride and not rides(burst.load)  # the engine mixes, but all at once fills whole prefill steps
    vllm = _built("vllm", "0.19.0", 4.0)
    assert not vllm.load.ride and not rides(vllm.load)
    fp, _, fg, _ = vllm.parts(None)
    assert fp == prefill_features(vllm.shape, vllm.load.isl, batch=1, chunk=vllm.load.chunk)


def test_trtllm_open_loop_parts_price_the_wave_without_the_forward():
    b = _built("trtllm", "1.0.0", 4.0)
    fp, _, fg, _ = b.parts(None)
    for f in (fp, fg):
        assert all(f[i] == 0.0 for i in FORWARD_TERMS)
    roof_fp, _, _, _ = b.parts(None, roof=True)  # the roofline's bound keeps every term
    assert roof_fp[TERMS.index("weights")] > 0


def test_the_rule_is_tensorrt_llms_from_1_0():
    assert prompts_ride("trtllm") and prompts_ride("trtllm", "1.0.0") and prompts_ride("trtllm", "1.2.0rc6.post2")
    assert not prompts_ride("trtllm", "0.14.0") and not prompts_ride("trtllm", "0.17")
    assert not prompts_ride("vllm", "0.19.0") and not prompts_ride("sglang", "0.5.16") and not prompts_ride(None)
    old = _built("trtllm", "0.14.0", 4.0)  # the Triton backend's 0.14 online rows
    assert not old.load.ride and not rides(old.load)
