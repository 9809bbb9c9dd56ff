"""The simulator admits as each engine does (issue 21): TensorRT-LLM's GUARANTEED_NO_EVICT, SGLang's new_token_ratio.

Sources (kvplan/engines/admission.py cites file and line): TensorRT-LLM's GuaranteedNoEvictScheduler admits a pending
request only if getRemainingBlocksToCompletion, ceil((prompt + max new tokens) / tokens per block) for a request with
no block yet, fits in the free blocks less every in-progress request's remaining blocks (NVIDIA/TensorRT-LLM@02a10fed
capacityScheduler.cpp; @ca64fd93 scheduledBlocksManager.cpp; @b35ac1b6 kvCacheManager.cpp). SGLang's PrefillAdder
(sglang v0.5.9 schedule_policy.py L439-446, L744-752): a request is admitted while prompt + min(max_new, 4096) is below
free - sum over running of min(remaining output, 4096) x new_token_ratio; the ratio starts at 0.7 and falls by
(0.7 - 0.7 x 0.14) / 600 = 0.0010033 per decode step (scheduler.py L811-823, L2256-2260); a refused admission marks
the batch full until a request leaves (L2106-2113, L1990-1993, L2263); a retraction requeues the request with the
fewest output tokens at the back (schedule_batch.py L1858-1881, scheduler.py L1686).

Pools here hold one byte per token (Group(1)), so bytes are tokens; steps take exactly 10 ms.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.admission import admission
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.model import Group, SimModel, StageCost
from kvplan.simulator.workload import WORKLOADS, SimRequest, generate

DECAY = (0.7 - 0.7 * 0.14) / 600  # SGLang's new_token_ratio a decode step, from its defaults


def _pool(tokens: int, block: int) -> SimModel:
    return SimModel("t", kv_budget_bytes=tokens, block_size=block, groups=(Group(1),), max_model_len=1 << 20,
                    stages=(StageCost(dense_read_bytes=10**9, kv_bytes_per_token=1),), fixed_step_s=0.01)


def _run(model, reqs, engine=None, opts=None, prefix_caching=False):
    return Engine(model, EngineConfig(admission=admission(engine, opts), check=True,
                                      prefix_caching=prefix_caching)).run(reqs)


def test_no_evict_admits_whole_reservations_and_never_preempts():
    # 100 blocks of 32 tokens; 40 requests of prompt 200 and max_tokens 100, all at once.
    # GUARANTEED_NO_EVICT: ceil((200 + 100) / 32) = 10 blocks each -> floor(100 / 10) = 10 running, no preemption.
    # vLLM: the first chunk's pages, ceil(200 / 32) = 7 blocks -> floor(100 / 7) = 14 admitted, then preemptions.
    pool, reqs = _pool(100 * 32, 32), [SimRequest(i, 0.0, 200, 100) for i in range(40)]
    trt = _run(pool, reqs, "trtllm").summary(100.0, 1.0)
    assert trt["concurrency"]["max_running"] == 10 and trt["requests"]["preemptions"] == 0
    assert trt["requests"]["completed"] == 40
    vllm = _run(pool, reqs, "vllm").summary(100.0, 1.0)
    assert vllm["concurrency"]["max_running"] == 14 and vllm["requests"]["preemptions"] > 0
    # MAX_UTILIZATION takes blocks as tokens arrive and pauses the newest request: vLLM's run, step for step.
    assert _run(pool, reqs, "trtllm", {"capacity_scheduler_policy": "MAX_UTILIZATION"}).summary(100.0, 1.0) == vllm


def test_no_evict_on_a_workload_keeps_every_reservation_within_the_pool():
    # check=True recounts, after every step, the reservations and that pages stay within them (fastpath.check),
    # with and without shared prefixes (a shared block counted once, in the cache). The pool of 100,000 tokens
    # makes vLLM preempt; under GUARANTEED_NO_EVICT nothing is, and every request completes.
    reqs = generate(WORKLOADS["chat"], qps=20, duration=60, seed=1)
    for shared in (False, True):
        s = _run(_pool(100_000, 32), reqs, "trtllm", prefix_caching=shared).summary(2.0, 0.1)
        assert s["requests"]["preemptions"] == 0 and s["requests"]["completed"] == len(reqs)
        v = _run(_pool(100_000, 32), reqs, "vllm", prefix_caching=shared).summary(2.0, 0.1)
        assert v["requests"]["preemptions"] > 0 and v["requests"]["completed"] == len(reqs)
        assert s["concurrency"]["mean_running"] < v["concurrency"]["mean_running"]  # whole outputs reserved
        g = _run(_pool(100_000, 32), reqs, "sglang", prefix_caching=shared).summary(2.0, 0.1)
        assert g["requests"]["completed"] == len(reqs)


def test_sglang_first_wave_counts_running_requests_at_the_ratio():
    # A pool of 10,000 tokens (page 1, SGLang's default); prompt 200, output 1,000, one arrival a step, so each is
    # admitted alone. Before step s a request admitted at step a holds 200 + (s - a) tokens (its prompt, the tokens
    # decoded and this step's) and counts r(s) x (1,000 - (s - a)) more, r(s) = 0.7 - 0.0010033 x (s - 2) (decode
    # steps since step 2). Step 10: the nine running count 9 x 200 + 45 + 0.6920 x (9,000 - 45) = 8,042, room
    # 1,958 > 1,200: admitted; step 11: ten count 10 x 200 + 55 + 0.6910 x (10,000 - 55) = 8,927, room 1,073 < 1,200.
    # So 10 run; GUARANTEED_NO_EVICT: floor(10,000 / 1,200) = 8.
    pool = _pool(10_000, 1)
    reqs = [SimRequest(0, 0.0, 200, 1000)] + [SimRequest(i, 0.01 * i - 0.005, 200, 1000) for i in range(1, 30)]
    admitted = []
    for s in range(1, 30):  # the hand rule above, step by step
        r = 0.7 - DECAY * max(0, s - 2)
        if 200 + 1000 < 10_000 - sum(200 + (s - a) + r * (1000 - (s - a)) for a in admitted):
            admitted.append(s)
        else:
            break
    assert len(admitted) == 10
    assert _run(pool, reqs, "sglang").summary(100.0, 1.0)["concurrency"]["max_running"] == 10
    assert _run(pool, reqs, "trtllm").summary(100.0, 1.0)["concurrency"]["max_running"] == 8


def test_sglang_later_wave_sees_the_decayed_ratio():
    # Pool 10,000 tokens. r0: prompt 100, output 4,000 (admitted step 1); r1: 100 / 300 (step 2, done at step 301);
    # r2: 3,000 / 4,500 arrives for step 3: r0 counts 102 + 0.6990 x 3,998 = 2,897, r1 101 + 0.6990 x 299 = 310,
    # room 6,793 < 7,500: refused, and the batch is marked full until r1 leaves (step 301). Step 302: r0 holds
    # 100 + 301 = 401 and 300 decode steps have passed, r = 0.7 - 300 x 0.0010033 = 0.399, so it counts
    # 401 + 0.399 x 3,699 = 1,877: room 8,123 > 7,500, admitted, its first token at the end of step 302 (3.02 s).
    # (At the initial 0.7 it would count 401 + 0.7 x 3,699 = 2,990: room 7,010 < 7,500, refused.)
    # GUARANTEED_NO_EVICT: 7,500 beside r0's 4,100 is more than 10,000: r2 waits for r0's end (step 4,000), 40.01 s.
    pool = _pool(10_000, 1)
    reqs = [SimRequest(0, 0.0, 100, 4000), SimRequest(1, 0.005, 100, 300), SimRequest(2, 0.015, 3000, 4500)]
    assert abs(_run(pool, reqs, "sglang").first[2] - 3.02) < 1e-6
    assert abs(_run(pool, reqs, "trtllm").first[2] - 40.01) < 1e-6


def test_sglang_retracts_the_fewest_outputs_to_the_back_of_the_queue():
    # As above, and r3 (100 / 10) arrives at 35 s while the batch is full. Near step 3,600 r0 (100 + 3,600 tokens)
    # and r2 (3,000 + 3,299) fill the pool: SGLang retracts r2 (fewer output tokens) and queues it behind r3, which
    # is then admitted and done long before r0 ends (40.0 s). vLLM preempts the newest (r2 too) but puts it back at
    # the head of the queue, where it cannot fit again until r0 ends: r3 waits behind it.
    pool = _pool(10_000, 1)
    reqs = [SimRequest(0, 0.0, 100, 4000), SimRequest(1, 0.005, 100, 300), SimRequest(2, 0.015, 3000, 4500),
            SimRequest(3, 35.005, 100, 10)]
    sg = _run(pool, reqs, "sglang")
    assert list(sg.preemptions[:4]) == [0, 0, 1, 0] and sg.finish[3] < sg.finish[0]
    vl = _run(pool, reqs, "vllm")
    assert vl.preemptions[2] == 1 and vl.finish[3] > vl.finish[0]


def test_simulate_says_the_admission_rule_it_assumed(kvplan_home):
    runner = CliRunner()
    args = ["simulate", "qwen2-0.5b-instruct", "--gpu", "h100", "--qps", "20", "--duration", "5", "--json"]
    r = runner.invoke(app, [*args, "--engine", "trtllm"])
    assert r.exit_code == 0, r.output
    assert "GUARANTEED_NO_EVICT" in r.stderr and "nothing is preempted" in r.stderr
    assert json.loads(r.stdout)["meta"]["admission"]["rule"] == "reserve_output"
    r = runner.invoke(app, [*args, "--engine", "trtllm", "--engine-opt", "capacity_scheduler_policy=MAX_UTILIZATION"])
    assert r.exit_code == 0 and "MAX_UTILIZATION" in r.stderr
    assert json.loads(r.stdout)["meta"]["admission"]["rule"] == "on_demand"
    r = runner.invoke(app, [*args, "--engine", "sglang"])
    assert r.exit_code == 0 and "new_token_ratio" in r.stderr
    r = runner.invoke(app, [*args, "--engine", "trtllm", "--engine-opt", "capacity_scheduler_policy=greedy"])
    assert r.exit_code == 2 and "greedy" in r.output and "Traceback" not in r.output
    helped = runner.invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"}).output
    assert "stays vLLM's" not in helped and "GUARANTEED_NO_EVICT" in helped


def test_check_bench_simulates_the_policy_the_report_states(tmp_path):
    # trtllm-bench's text report prints "Scheduling Policy:      Guaranteed No Evict" (tests/fixtures/bench); the
    # run is simulated under that rule, and under MAX_UTILIZATION where the report says "Max Utilization".
    from pathlib import Path

    runner = CliRunner()
    text = (Path(__file__).parent / "fixtures" / "bench" / "trtllm-bench-llama31-8b-fp8.txt").read_text()
    said = {}
    for printed in ("Guaranteed No Evict", "Max Utilization"):
        f = tmp_path / f"{printed[:3]}.txt"
        f.write_text(text.replace("Guaranteed No Evict", printed))
        r = runner.invoke(app, ["check-bench", str(f), "--gpu", "h100", "--json"])
        assert r.exit_code == 0, r.output
        said[printed] = next(line for line in json.loads(r.stdout)["runs"][0]["assumed"] if "admission" in line)
    assert ("GUARANTEED_NO_EVICT" in said["Guaranteed No Evict"]
            and "nothing is preempted" in said["Guaranteed No Evict"])
    assert "MAX_UTILIZATION" in said["Max Utilization"] and "paused" in said["Max Utilization"]


def test_pool_accounting_holds_under_every_rule():
    # The invariant models of tests/test_simulate.py (windows, recurrent states, a tight pool with shared prefixes):
    # check=True recounts the pool after every step under each engine's rule; every request ends or is rejected.
    from test_simulate import _model

    reqs = generate(WORKLOADS["chat"], qps=6, duration=60, seed=1)
    for model in (_model(budget=300 * 160 * 1024 * 16),
                  _model(groups=(Group(64 * 1024), Group(96 * 1024, 512)), budget=200 * 160 * 1024 * 16),
                  _model(groups=(Group(32 * 1024),), state=3 * 2**20, budget=2**30)):
        for engine in ("trtllm", "sglang"):
            s = Engine(model, EngineConfig(admission=admission(engine), check=True)).run(reqs).summary(2.0, 0.1)
            assert s["requests"]["completed"] + sum(s["requests"]["rejected"].values()) == len(reqs)
            assert engine != "trtllm" or s["requests"]["preemptions"] == 0


def test_no_evict_needs_the_whole_total_for_a_request_that_would_reuse_blocks():
    # TensorRT-LLM's pending request has no sequence yet, so getRemainingBlocksToCompletion gives it its whole
    # total, the blocks it would reuse from a running request included (kvCacheManager.cpp @b35ac1b6: numAlloc = 0
    # where mSequences holds no entry). 16-token blocks, a pool of 600 tokens. r0: a shared prefix of 320 tokens
    # (20 blocks, published to the cache once computed) and 100 new tokens -> ceil(420 / 16) = 27 blocks = 432
    # tokens, 320 of them in the cache, so 112 still its own. r1 at 0.5 s (r0 decoding until about 1.0 s): the same
    # prefix + 16 tokens of its own and 100 new -> ceil(436 / 16) = 28 blocks = 448. Free less r0's remaining:
    # 600 - 320 - 112 = 168 < 448, so r1 waits for r0 to end (counting the reused 320 once, 448 - 320 = 128 <= 168,
    # it would not). vLLM takes r1's first chunk, one block of its own, and runs both.
    pool = _pool(600, 16)
    reqs = [SimRequest(0, 0.0, 320, 100, (("sys", 320),)), SimRequest(1, 0.5, 336, 100, (("sys", 320),))]
    trt = _run(pool, reqs, "trtllm", prefix_caching=True)
    assert sum(trt.preemptions) == 0 and trt.finish[1] > trt.finish[0] + 0.9
    assert _run(pool, reqs, "trtllm", prefix_caching=True).summary(1.0, 0.1)["concurrency"]["max_running"] == 1
    assert _run(pool, reqs, "vllm", prefix_caching=True).summary(1.0, 0.1)["concurrency"]["max_running"] == 2


def test_static_batch_admits_only_while_nothing_generates():
    # capacityScheduler.cpp @02a10fed: StaticBatchScheduler is GuaranteedNoEvictScheduler::impl<true>, which tries
    # pending requests only if the in-progress pass scheduled none ("scheduledRequests.size() == 0"). r0 (100 / 100)
    # decodes from 0.01 s to about 1.0 s; r1 (100 / 10) arrives at 0.5 s into a nearly empty pool. GUARANTEED_NO_EVICT
    # admits it at once (done near 0.6 s, before r0); STATIC_BATCH only once r0 has finished.
    pool, reqs = _pool(10_000, 16), [SimRequest(0, 0.0, 100, 100), SimRequest(1, 0.5, 100, 10)]
    no_evict = _run(pool, reqs, "trtllm")
    assert no_evict.finish[1] < no_evict.finish[0]
    static = _run(pool, reqs, "trtllm", {"capacity_scheduler_policy": "static_batch"})
    assert static.finish[1] > static.finish[0] and sum(static.preemptions) == 0
    assert "STATIC_BATCH" in admission("trtllm", {"capacity_scheduler_policy": "static"}).said


def test_policy_is_named_as_tensorrt_llm_names_it():
    # The assumption line names the policy as TensorRT-LLM's CapacitySchedulerPolicy enum does (GUARANTEED_NO_EVICT,
    # MAX_UTILIZATION, STATIC_BATCH), whatever spelling the option used; an empty value is the default.
    def said(policy):
        return admission("trtllm", {"capacity_scheduler_policy": policy}).said

    assert "policy MAX_UTILIZATION:" in said("max-util") and "policy MAX_UTILIZATION:" in said("Max_Utilization")
    assert "policy GUARANTEED_NO_EVICT:" in said("CapacitySchedulerPolicy.GUARANTEED_NO_EVICT")
    assert "policy GUARANTEED_NO_EVICT (its default):" in said("")


def test_sglang_counts_a_readmitted_requests_whole_max_new_tokens_in_its_batch():
    # SGLang's PrefillAdder books a request it adds to the prefill batch at its prompt plus min(max_new_tokens, 4096)
    # (schedule_policy.py v0.5.9 L793-797, _update_prefill_budget), not its remaining output: a request retracted
    # after 50 of its 100 tokens and admitted again adds min(100, 4096) = 100 tokens (1 byte each here), not 50.
    from kvplan.simulator import admit
    from kvplan.simulator.engine import Seq

    engine = Engine(_pool(10_000, 1), EngineConfig(admission=admission("sglang")))
    seq = Seq(SimRequest(0, 0.0, 200, 100), 100)
    seq.generated, seq.target = 50, 250
    admit.admitted(engine, seq, 0, 0, 250)
    assert engine.ad.batch_offset == 100
