"""simulate's SGLang steps (issue 21): a prefill batch whenever one forms, decoding no one in it, else a decode step of
every running request (sglang 0.5.15 wheel, srt/managers/scheduler.py `get_next_batch_to_run` L2683-2709; mixed
only with --enable-mixed-chunk, `is_mixed_chunk` L1018-1021), against vLLM's mixed budget (vllm/v1/core/sched/
scheduler.py: running requests' decode tokens first in max_num_batched_tokens, prefill chunks beside them). Every
step takes the same time S (SimModel.fixed_step_s), so what is compared is the counting of steps, worked by hand."""

from dataclasses import replace

import pytest

from kvplan import api
from kvplan.bench.load import closed_loop
from kvplan.engines import resolve_engine
from kvplan.engines.sglang.layout import serve_flags
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.limits import scheduler_limits
from kvplan.simulator.workload import SimRequest
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.bench_load import Load
from kvplan.speed.load import combos, first_wave, value

S = 0.01  # seconds a step


def _model(isl, osl):
    model = sim_model(api.plan("llama-3.1-8b", "h100", context=isl + osl + 16), find_in_catalog("llama-3.1-8b"),
                      find_gpu("h100"))
    return replace(model, fixed_step_s=S)


def _cfg(prefill_first, seqs=256, chunk=1024, **kw):
    return EngineConfig(max_num_seqs=seqs, max_num_batched_tokens=chunk, prefix_caching=False,
                        prefill_first=prefill_first, check=True, **kw)


def _steps(values):
    return [round(v / S, 6) for v in values]


@pytest.mark.parametrize("admission", [None, "sglang"])
def test_four_requests_of_512_plus_4_at_a_1024_token_chunk(admission):
    # SGLang (prefill first): step 1 prefills requests 0 and 1 (2 x 512 = the 1,024-token chunk; their first tokens),
    # step 2 prefills 2 and 3 (a batch forms: they wait, and nobody decodes), steps 3-5 decode all four (each needs
    # 3 more tokens: output 4, the first from its prefill). TTFT 1, 1, 2, 2 steps; all finish at step 5; TPOT
    # (5 - 1) / 3 = 1.33 and (5 - 2) / 3 = 1 step; 5 steps in all.
    # vLLM (mixed): step 1 prefills 0 and 1; step 2 decodes 0 and 1 (2 tokens) and prefills 2 (512) and 510 tokens of
    # 3; step 3 decodes 0, 1, 2 and the last 2 tokens of 3; step 4 decodes all. TTFT 1, 1, 2, 3; E2E 4, 4, 5, 6.
    from kvplan.engines.admission import admission as rule
    adm = {} if admission is None else {"admission": rule(admission)}  # SGLang's new_token_ratio: all four fit
    reqs = [SimRequest(i, 0.0, 512, 4) for i in range(4)]
    pf = Engine(_model(512, 4), _cfg(True, **adm)).run(reqs)
    assert _steps(pf.first) == [1, 1, 2, 2]
    assert _steps(pf.finish) == [5, 5, 5, 5]
    assert pf.summary(1e9, 1e9)["time"]["steps"] == 5
    mixed = Engine(_model(512, 4), _cfg(False, **adm)).run(reqs)
    assert _steps(mixed.first) == [1, 1, 2, 3]
    assert _steps(mixed.finish) == [4, 4, 5, 6]


def test_a_decoding_request_waits_out_every_prefill_batch():
    # One request of 100 + 10 tokens at t = 0, then one of 2,048 tokens arriving after its third step; chunk 1,024.
    # Prefill first: step 1 prefills the first (token 1), steps 2-3 decode it (tokens 2, 3); the second arrives,
    # steps 4 and 5 prefill its two chunks (the first request waits), then steps 6-12 decode both: the first's last
    # 7 tokens end at step 12, the second's first token at step 5, its 9 more at steps 6-14.
    # Mixed: the first decodes in every step (1,023 prompt tokens beside it), finishing at step 10; the second's
    # prompt takes steps 4-6 (1,023 + 1,023 + 2), its first token at 6.
    reqs = [SimRequest(0, 0.0, 100, 10), SimRequest(1, 2.5 * S, 2048, 10)]
    pf = Engine(_model(2048, 10), _cfg(True)).run(reqs)
    assert _steps(pf.first) == [1, 5] and _steps(pf.finish) == [12, 14]
    mixed = Engine(_model(2048, 10), _cfg(False)).run(reqs)
    assert _steps(mixed.first) == [1, 6] and _steps(mixed.finish) == [10, 15]


def test_a_closed_loop_of_equal_lengths_runs_in_the_waves_the_load_model_reads():
    # c = 4 = the running cap, 1,024 in / 64 out, chunk 1,024: one prompt a prefill step. Prefill first, every wave:
    # 4 prefill steps (first tokens at 1, 2, 3, 4: mean 2.5 steps), then 63 decode steps of all four: the wave ends
    # at step 67, the next 4 arrive together and the next wave is the same. kvplan.speed.load's `waves` reading
    # (t_wave = K = 4 steps, t_dec = 1 step): TTFT (B + 1) / 2B x t_wave = 5 / 8 x 4 = 2.5 steps; E2E c x T =
    # 4 x (4 + 64) / 4 = 68 steps (its T counts osl decode steps; the simulated wave 63 + its 4 prefills = 67);
    # TPOT (68 - 2.5) / 63 = 1.040 steps, simulated (67 - 2.5) / 63 = 1.024.
    isl, osl, c, chunk, n = 1024, 64, 4, 1024, 40
    model = _model(isl, osl)
    reqs = [SimRequest(i, 0.0, isl, osl) for i in range(n)]

    def simulated(pf):
        cfg = _cfg(pf, seqs=c, chunk=chunk)
        lat = Engine(model, cfg).run(closed_loop(model, cfg, reqs, c)).summary(1e9, 1e9)["latency_s"]
        return {m: lat[m]["mean"] / S for m in ("ttft", "tpot", "e2e")}

    _, _, cm = combos(Load(isl, osl, concurrency=c, num_prompts=n, cap=c, chunk=chunk, fixed=True, waves=True))
    waves = {m: value(cm[k], 4 * S, S) / S for m, k in (("ttft", "ttft"), ("tpot", "tpot"), ("e2e", "e2el"))}
    assert waves == pytest.approx({"ttft": 2.5, "tpot": 65.5 / 63, "e2e": 68.0})
    sim = simulated(True)
    assert sim == pytest.approx({"ttft": 2.5, "tpot": 64.5 / 63, "e2e": 67.0})
    assert all(abs(sim[m] / waves[m] - 1) < 0.02 for m in sim)
    # vLLM's mixed budget staggers the loop: a finished request's successor shares its prefill step with 3 decode
    # tokens (1,021 + 3 prompt tokens over two steps), not the waves' figures
    assert simulated(False)["ttft"] < 2.2


def test_prompts_that_share_a_prefill_step_get_their_first_tokens_at_its_end():
    # The loop above with a 2,048-token chunk: two 1,024-token prompts a prefill step, so each wave's K = 2 prefill
    # steps return first tokens at steps 1, 1, 2, 2 (mean 1.5 steps), not 1, 2, 3, 4; then 63 decode steps of all
    # four: a wave ends at step 2 + 63 = 65 and the next four arrive together. kvplan.speed.load's `first_wave` prices
    # the wave's mean first token alike: q = 2 prompts a step over K = 2 steps, (1 - 2 x 1 / 8) x t_wave = 0.75 x 2
    # = 1.5 steps (before round 32 (B + 1) / 2B x t_wave = 1.25 steps, one prompt a step).
    isl, osl, c, chunk, n = 1024, 64, 4, 2048, 40
    model = _model(isl, osl)
    cfg = _cfg(True, seqs=c, chunk=chunk)
    lat = Engine(model, cfg).run(closed_loop(model, cfg, [SimRequest(i, 0.0, isl, osl) for i in range(n)],
                                             c)).summary(1e9, 1e9)["latency_s"]
    assert lat["ttft"]["mean"] / S == pytest.approx(1.5)
    assert lat["e2e"]["mean"] / S == pytest.approx(65.0)
    assert first_wave(Load(isl, osl, chunk=chunk), c)[0] * 2 == pytest.approx(1.5)  # the load model's, t_wave = 2 steps


def test_the_engine_options_choose_the_steps():
    # SGLang prefill first unless --enable-mixed-chunk (off by default, server_args.py L791-794); every other engine
    # mixed; no DP attention here, so no lockstep
    gpu, spec = find_gpu("h100"), find_in_catalog("llama-3.1-8b")
    for name, opts, first in (("sglang", (), True), ("sglang", ("enable_mixed_chunk=true",), False),
                              ("vllm", (), False), ("trtllm", (), False)):
        eng = resolve_engine(name, None, opts)
        held = scheduler_limits(eng, eng.result(spec, gpu, Deployment(1, 1), Request(context=8192)))
        assert held.prefill_first is first and held.config().prefill_first is first
        assert held.lockstep == 1 and held.meta()["scheduler"]["prefill_first"] is first
        assert any(line.startswith("steps ") for line in held.notes())
    assert serve_flags({"enable_mixed_chunk": "true"}) == ["--enable-mixed-chunk"] and not serve_flags({})


def test_attention_dp_workers_lockstep_is_said_not_simulated():
    # DeepSeek-V3 on 8 x H200 as SGLang DP attention (dp 8, ep 8): its 8 workers exchange their batches before every
    # forward (0.5.15 dp_attn.py `prepare_mlp_sync_batch_raw` L143-255), so one worker's prefill paces the others;
    # the simulator runs one worker, and the notes say the lockstep is left out
    eng = resolve_engine("sglang")
    res = eng.result(find_in_catalog("deepseek-v3"), find_gpu("h200"), Deployment(tp=1, dp=8, ep=8),
                     Request(context=8192))
    held = scheduler_limits(eng, res)
    assert held.lockstep == 8 and held.meta()["scheduler"]["lockstep_workers"] == 8
    assert any("8 attention-DP workers" in line and "not simulated" in line for line in held.notes())
    # The worker simulated is SGLang's under DP attention: --schedule-conservativeness x 0.3 and chunked_prefill_size
    # // dp_size (0.4.6.post5 server_args.py L327-334; 0.5.15 L4899-4902; 0.5.23 arg_groups/parallel_hook.py
    # L314-332), so new_token_ratio starts at 0.7 x 0.3 = 0.21 (floor 0.21 x 0.14 = 0.0294) and a worker's prefill
    # batch holds the chunk over 8: the H200's 8,192-token default chunk (defaults.default_chunked) / 8 = 1,024.
    assert res.settings["chunked_prefill_size"] == 8192
    assert held.max_num_batched_tokens == 1024
    assert held.admission.init_ratio == pytest.approx(0.21) and held.admission.min_ratio == pytest.approx(0.0294)
    one = scheduler_limits(eng, eng.result(find_in_catalog("deepseek-v3"), find_gpu("h200"), Deployment(tp=8),
                                           Request(context=8192)))
    assert (one.max_num_batched_tokens, one.admission.init_ratio) == (8192, pytest.approx(0.7))  # no DP attention


def test_a_prompt_that_cannot_grow_gives_way_to_a_decode_step():
    # A pool of 8 pages of 16 tokens. Request 0: 64 + 40 tokens (4 pages, 7 at its end); request 1 arrives at step 5,
    # 100 + 2 tokens (7 pages), chunks of 32 (vLLM's rule, prefill first: admitted on its first chunk). With request 0
    # at 5 pages, 3 are free: the first chunk (2 pages) is admitted, the second (2 more) cannot be taken, and request
    # 1 preempts itself. Readmitting it at once would prefill its first chunk again and again and never decode
    # request 0 (the loop never ended); a decode step follows instead, so request 0 finishes and request 1 then runs.
    import signal

    def _hung(*_):
        raise TimeoutError("the simulation did not end")

    model = _model(100, 40)
    model = replace(model, kv_budget_bytes=8 * model.block_bytes())
    reqs = [SimRequest(0, 0.0, 64, 40), SimRequest(1, 4.5 * S, 100, 2)]
    old = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(30)
    try:
        rec = Engine(model, _cfg(True, chunk=32)).run(reqs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert rec.summary(1e9, 1e9)["requests"]["completed"] == 2
    assert rec.first[1] > rec.finish[0] and rec.summary(1e9, 1e9)["requests"]["preemptions"] >= 1
