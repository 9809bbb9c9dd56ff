"""A served burst's wait in the engine's front end (kvplan.speed.frontend: `ingress_queue`, `ingress_rate`; the
`ingress` term of kvplan.speed.terms): N requests sent at once each cross the API server, a process apart from the
engine's steps, before the engine sees them, so the burst's TTFT and E2E carry N x ingress and its run is N x ingress
longer. Hand arithmetic on the load; the fit's rows stay linear in the coefficients; the corpus tells served runs from
in-process ones (an in-process harness has no front end)."""

import math
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.bench.running import running
from kvplan.speed.fit import build_all, predict, rows_for
from kvplan.readers.chat_format import chat_format
from kvplan.speed.frontend import endpoint_of, native_chat
from kvplan.speed.frontend import ingress_queue, ingress_rate
from kvplan.speed.bench_load import Load
from kvplan.speed.model import coefficients
from kvplan.speed.terms import TERMS
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def test_only_a_served_burst_queues_in_the_front_end():
    # vllm bench serve's default: --num-prompts 1000 at --request-rate inf, all sent at once: the mean request waits
    # behind the burst's 1,000 in the front end, and each of 2 busy replicas' requests carries 2 x ingress of the run
    burst = Load(220, 200, rate=float("inf"), num_prompts=1000, cap=256, dp=2)
    assert ingress_queue(burst) == 1000.0
    assert ingress_rate(burst) == 2.0
    # a closed loop, an open loop at a finite rate, a throughput run of untold length: each request crosses alone,
    # once (its own pass), and no replica waits for it
    for load in (replace(burst, concurrency=64.0), replace(burst, rate=10.0), replace(burst, num_prompts=None)):
        assert ingress_queue(load) == 1.0 and ingress_rate(load) == 0.0
    # an in-process harness, llama-bench: no front end at all
    for load in (replace(burst, served=False), replace(burst, concurrency=1.0, served=False), Load(512, 0, bench="pp")):
        assert ingress_queue(load) == 0.0 and ingress_rate(load) == 0.0


def test_a_spread_request_waits_for_its_own_crossing(corpus):
    # GPUStack's Qwen3-8B latency page, one H100, vLLM 0.11.0, `vllm bench serve --backend openai-chat` at
    # --max-concurrency 1: the client times TTFT from its POST to the first chunk with choices (`st =
    # time.perf_counter()` before `session.post`, `output.ttft = timestamp - st`: vllm-project/vllm@02cfb534df5674737558
    # 730b10f23d1b7aef9b7c:vllm/benchmarks/lib/endpoint_request_func.py, a later release's client), and the API server
    # renders the chat template and tokenises the prompt (`_preprocess_chat`, vllm-project/vllm@99c5632fc2d252a6f25afa
    # 76347df392eb898c42:vllm/entrypoints/openai/serving_chat.py) before the engine sees the request.
    # Hand arithmetic: at x seconds a request in the front end, TTFT and E2E rise by 1 x x (not the burst's N x x),
    # TPOT by (1 x - 1 x) / (osl - 1) = 0, the output rate not at all (its divisor, a request's time on the replica,
    # carries no crossing of a spread request). The page measured 59.01 ms mean TTFT where vLLM's step terms alone
    # give about 24 ms; SGLang 0.5.3 with the same client 27.70 ms at concurrency 4.
    (built,), _ = build_all([corpus[("gpustack-perflab-qwen3-8b-h100-latency", "L617-vllm-c1")]], running)
    assert built.load.concurrency == 1 and ingress_queue(built.load) == 1.0 and ingress_rate(built.load) == 0.0
    more = _with_ingress(0.01)
    a, b = predict(built, _with_ingress(0.0)), predict(built, more)
    assert math.isclose(b["ttft"] - a["ttft"], 0.01) and math.isclose(b["e2el"] - a["e2el"], 0.01)
    assert math.isclose(b["tpot"], a["tpot"]) and math.isclose(b["output_throughput"], a["output_throughput"])


def _with_ingress(seconds: float) -> list:
    """vLLM's shipped coefficients with the `ingress` term set to `seconds`."""
    coef = list(coefficients("vllm"))
    coef[TERMS.index("ingress")] = seconds
    return coef


@pytest.fixture(scope="module")
def corpus():
    cases, _ = speed_cases()
    return {(c.source, c.id): c for c in cases}


def test_the_corpus_tells_served_runs_from_in_process_ones(corpus):
    # GPUStack's perf lab: vllm bench serve against `vllm serve` (its page's benchmark script)
    assert corpus[("gpustack-perflab-qwen3-14b-h100", "L89-vllm")].load.served
    # trtllm-bench drives the executor in its own process; harness_kind inprocess likewise
    bench = [c for c in corpus.values() if c.harness == "trtllm-bench"]
    inproc = [c for c in corpus.values() if c.era == "vllm-inprocess"]
    assert bench and inproc
    assert not any(c.load.served for c in bench + inproc)


def test_the_ingress_term_moves_a_bursts_latencies_by_n_and_its_throughput_by_d(corpus):
    # GPUStack's Qwen3-14B on one H100 under vLLM 0.11.0: ShareGPT, 1,000 prompts at once, one replica (d = 1).
    # At x seconds a request in the front end: TTFT and E2E + 1,000 x, TPOT unchanged, and an output rate
    # osl / T becomes osl / (T + x)
    (built,), _ = build_all([corpus[("gpustack-perflab-qwen3-14b-h100", "L89-vllm")]], running)
    more = _with_ingress(0.01)
    a, b = predict(built, _with_ingress(0.0)), predict(built, more)
    assert math.isclose(b["ttft"] - a["ttft"], 10.0) and math.isclose(b["e2el"] - a["e2el"], 10.0)
    assert math.isclose(b["tpot"], a["tpot"])
    osl = built.load.osl
    assert math.isclose(osl / b["output_throughput"] - osl / a["output_throughput"], 0.01)
    # the fit's rows are the same predictions, linear in the coefficients: row . coef = predicted / measured
    for row, metric in rows_for(built, None):
        y = built.case.targets[metric]
        got = sum(r * c for r, c in zip(row, more))
        pred = predict(built, more)[metric]
        assert math.isclose(got, pred / y if metric in ("ttft", "e2el", "tpot") else y / pred, rel_tol=1e-9)


def test_a_chat_request_vllm_renders_through_harmony_skips_the_front_ends_template():
    # vllm-project/vllm@99c5632fc2d252a6f25afa76347df392eb898c42:vllm/entrypoints/openai/serving_chat.py: a gpt_oss
    # model's chat request is rendered to token ids by openai_harmony (`_make_request_with_harmony`), not through the
    # Jinja chat template and tokenizer (`_preprocess_chat`) the ingress term prices; /v1/completions and other models
    # keep it, as does an endpoint not stated, and another engine's front end (SGLang's) is not read here
    assert chat_format("gpt_oss") == "harmony" and chat_format("qwen3") == "template"
    assert native_chat("vllm", "harmony", "chat")
    assert not native_chat("vllm", "harmony", "completions")
    assert not native_chat("vllm", "harmony", None)
    assert not native_chat("vllm", "template", "chat")
    assert not native_chat("sglang", "harmony", "chat")
    burst = Load(220, 200, rate=float("inf"), num_prompts=1000, cap=256, endpoint="chat")
    assert ingress_queue(burst) == 1000.0
    assert (ingress_queue(replace(burst, templated=False)) == 0.0
            and ingress_rate(replace(burst, templated=False)) == 0.0)


def test_gpustacks_gpt_oss_pages_state_the_chat_endpoint_and_the_fit_reads_it(corpus):
    # every block of GPUStack's pages ran `vllm bench serve --backend openai-chat --endpoint /v1/chat/completions`
    # (the points' notes); vLLM's burst of 1,000 ShareGPT prompts on a gpt-oss page queues nothing in the front end,
    # the same page's SGLang burst and GPUStack's Qwen3-14B vLLM burst (a chat request rendered through the model's
    # Jinja template) 1,000 requests
    vllm_oss = corpus[("gpustack-perflab-gpt-oss-120b-h100", "L88-vllm")]
    assert vllm_oss.load.endpoint == "chat"
    assert corpus[("gpustack-perflab-qwen3-14b-h100", "L89-vllm")].load.endpoint == "chat"
    built, _ = build_all([vllm_oss, corpus[("gpustack-perflab-gpt-oss-120b-h100", "L119-sglang")],
                          corpus[("gpustack-perflab-qwen3-14b-h100", "L89-vllm")]], running)
    assert [ingress_queue(b.load) for b in built] == [0.0, 1000.0, 1000.0]


def test_an_endpoint_outside_chat_and_completions_is_refused():
    with pytest.raises(ValueError, match="endpoint"):
        endpoint_of({"endpoint": "responses"})
