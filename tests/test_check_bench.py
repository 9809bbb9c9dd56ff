"""`kvplan check-bench`: the benchmark parsers on real published outputs, hostile variants, the load and the
efficiency arithmetic by hand, and the command end to end.

Fixtures (tests/fixtures/bench/SOURCES.md): each file is a tool's own output as published (trimmed). The
figures asserted below are read off those files by eye, with the unit conversion written out; none comes
from kvplan's code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.bench import compare, detect, load
from kvplan.bench.result import BenchRun, Settings, Stat
from kvplan.cli.main import whole_app
from kvplan.core.errors import KvplanError
from kvplan.simulator.engine import EngineConfig
from kvplan.simulator.model import Group, SimModel, StageCost

FIX = Path(__file__).parent / "fixtures" / "bench"
runner = CliRunner()


def same(stat: Stat, mean, median, p99) -> bool:
    """Stat equal to the figures within float rounding (None where the file gives none)."""
    got, want = (stat.mean, stat.median, stat.p99), (mean, median, p99)
    return all((g is None) == (w is None) and (g is None or g == pytest.approx(w, rel=1e-12))
               for g, w in zip(got, want))


def runs_of(name: str):
    return detect.read_runs((FIX / name).read_text(), name)


# ---- parsers on published outputs ---------------------------------------------------------------------
def test_vllm_save_result_json():
    (run,) = runs_of("vllm-l40s-llama32-3b-10qps.json")
    s, m = run.settings, run.metrics
    assert run.tool == "vllm-json" and s.model == "meta-llama/Llama-3.2-3B-Instruct" and s.engine == "vllm"
    # total_input_tokens 299700 / completed 300 = 999; total_output_tokens 81050 / 300 = 270.17 -> 270
    assert (s.isl, s.osl, s.num_prompts, s.request_rate, s.concurrency) == (999, 270, 300, 10.0, None)
    assert s.gpu_name == "4xNVIDIA_L40S"  # the user's --metadata gpu=...
    assert (m["ttft"].mean == pytest.approx(54.577085783294024e-3)
            and m["tpot"].p99 == pytest.approx(17.652194109258673e-3))
    assert m["output_throughput"].mean == pytest.approx(2249.247363167692)


def test_vllm_printed_report_with_its_command():
    (run,) = runs_of("vllm-report-gemma3-27b.txt")
    s, m = run.settings, run.metrics
    assert run.tool == "vllm-report" and s.model == "google/gemma-3-27b-it"
    assert (s.isl, s.osl, s.num_prompts) == (1024, 350, 16)  # --random-input-len 1024 --random-output-len 350
    assert same(m["ttft"], 2.63355, 2.64865, 4.61048)  # 2633.55 / 2648.65 / 4610.48 ms
    assert m["itl"].p99 == pytest.approx(0.25831) and m["request_throughput"].mean == 0.77


def test_sglang_printed_report():
    (run,) = runs_of("sglang-report-gpt-oss-20b-h100.txt")
    s, m = run.settings, run.metrics
    assert run.tool == "sglang-report" and s.engine == "sglang"  # Backend: sglang-oai
    # 10240 input / 20 requests = 512; 20480 generated / 20 = 1024; Max request concurrency: 4; rate inf
    assert (s.isl, s.osl, s.concurrency, s.request_rate, s.num_prompts) == (512, 1024, 4, math.inf, 20)
    assert same(m["e2el"], 8.43223, 8.5603, None) and m["total_throughput"].mean == 722.93


def test_sglang_jsonl_under_llm_optimizer():
    (run,) = runs_of("sglang-llm-optimizer-80k.jsonl")
    s, m = run.settings, run.metrics
    assert run.tool == "sglang-jsonl" and s.engine == "vllm"  # the server bench_serving drove
    assert (s.tp, s.kv_dtype, s.max_batch, s.max_tokens, s.concurrency) == (4, "fp8_e5m2", 8, 16384, 8)
    # random_range_ratio null: lengths are the run's means: 23531562 / 599 = 39284.7 -> 39285; 1260603 / 599 -> 2105
    assert (s.isl, s.osl, s.lengths) == (39285, 2105, "mean of the run")
    assert m["ttft"].mean == pytest.approx(3.987636057498285) and m["e2el"].p99 == pytest.approx(186.89872136908583)


def test_aiperf_json_and_csv():
    (j,) = runs_of("aiperf-gpt-oss-20b.json")
    assert j.settings.model == "openai/gpt-oss-20b" and j.settings.concurrency == 100
    assert (j.settings.isl, j.settings.osl) == (550, 100)  # total_isl 110000 / 200 requests; --osl 100
    assert j.settings.gpu_name == "NVIDIA RTX 6000 Ada Generation"
    assert same(j.metrics["ttft"], 1.588797775365, 0.7875439584999999, None)
    (c,) = runs_of("aiperf-gpt-oss-20b.csv")
    assert same(c.metrics["itl"], 0.05176, 0.05198, 0.05587) and c.metrics["output_throughput"].mean == 1274.63


def test_genai_perf_flat_input_config():
    # genai-perf keeps its settings under its CLI's names (no fixture of ours has one: the AIPerf file, flattened)
    doc = json.loads((FIX / "aiperf-gpt-oss-20b.json").read_text())
    doc["input_config"] = {"model": ["openai/gpt-oss-20b"], "concurrency": 8, "synthetic_input_tokens_mean": 128,
                           "output_tokens_mean": 64}
    (run,) = detect.read_runs(json.dumps(doc))
    assert (run.settings.model, run.settings.concurrency, run.settings.isl, run.settings.osl) == \
        ("openai/gpt-oss-20b", 8, 128, 64)


def test_llama_bench_json_csv_md():
    pp, tg = runs_of("llama-bench-qwen25-7b-rtx4080.json")
    assert (pp.label, pp.settings.isl, pp.metrics["pp_tok_s"].mean) == ("pp512", 512, 7100.002165)
    assert (tg.label, tg.settings.osl, tg.metrics["tg_tok_s"].mean) == ("tg128", 128, 118.881588)
    assert tg.settings.gpu_name == "NVIDIA GeForce RTX 4080" and tg.settings.engine == "llama.cpp"
    pp, tg = runs_of("llama-bench-qwen25-7b-rtx4080.csv")
    assert pp.metrics["pp_tok_s"].mean == 7285.676949 and tg.metrics["tg_tok_s"].mean == 119.915244
    # every column read by its name, the settings in the middle too: the rows' "-1" (auto), -ub 512 at -b 2048
    # (min 512) and "f16", as the JSON example of the same README states them
    assert [(r.settings.flash_attn, r.settings.max_tokens, r.settings.kv_dtype) for r in (pp, tg)] == \
        [("-1", 512, "f16")] * 2
    labels = [(r.label, r.settings.depth, next(iter(r.metrics.values())).mean)
              for r in runs_of("llama-bench-qwen2-7b-depth.md")]
    assert labels == [("pp512", 0, 7340.20), ("tg128", 0, 120.60), ("pp512 @ d512", 512, 6425.91),
                      ("tg128 @ d512", 512, 116.71)]


def test_a_llama_bench_csv_row_not_as_wide_as_its_header_is_refused():
    # llama.cpp's README (ggml-org/llama.cpp@08d0baac tools/llama-bench/README.md, "CSV") names `repack` between
    # no_host and fit_target in its header and gives its rows no value for it (42 names, 41 values; its JSON example
    # has "repack": true there). llama-bench writes one list for both, so such a file was edited: the fixture holds
    # the header llama-bench writes (SOURCES.md); read under the README's header its values cannot be placed.
    text = (FIX / "llama-bench-qwen25-7b-rtx4080.csv").read_text().replace(",no_host,", ",no_host,repack,", 1)
    with pytest.raises(KvplanError, match=r"^llama-bench CSV row 1: 41 values under a header of 42 columns; "):
        detect.read_runs(text)


def test_llama_bench_jsonl_is_the_json_a_line_each():
    rows = json.loads((FIX / "llama-bench-qwen25-7b-rtx4080.json").read_text())
    runs = detect.read_runs("\n".join(json.dumps(r) for r in rows))
    assert [(r.label, next(iter(r.metrics.values())).mean) for r in runs] == [("pp512", 7100.002165),
                                                                              ("tg128", 118.881588)]


def test_tpot_from_e2e_when_the_file_prints_none():
    (run,) = runs_of("sglang-llm-optimizer-80k.jsonl")
    # (89713.76 ms mean E2E - 3987.64 ms mean TTFT) / (2105 - 1) tokens = 40.74 ms
    assert compare._tpot_from_e2e(run) == pytest.approx((89.71375561636081 - 3.987636057498285) / 2104)


def test_trtllm_bench_report():
    (run,) = runs_of("trtllm-bench-llama31-8b-fp8.txt")
    s, m = run.settings, run.metrics
    assert (s.model, s.engine, s.engine_version, s.tp, s.weight_dtype, s.kv_dtype) == \
        ("meta-llama/Llama-3.1-8B", "trtllm", "0.17.0", 1, "fp8", None)
    assert (s.isl, s.osl, s.num_prompts, s.max_batch, s.max_tokens) == (128, 128, 3000, 2048, 4096)
    # 0.17's "Token Throughput" is output tokens/s: 3000 x 128 tokens / 18.5636825 s = 20685.55
    assert m["output_throughput"].mean == pytest.approx(3000 * 128 / 18.5636825, rel=1e-6)
    assert m["request_throughput"].mean == 161.6059


def test_trtllm_bench_report_json():
    # --report_json's shape (reporting.py get_statistics_dict); no published file of ours: the 0.17 report's figures
    doc = {"engine": {"model": "meta-llama/Llama-3.1-8B", "version": "0.17.0", "quantization": "FP8",
                      "kv_cache_dtype": None},
           "machine": {"name": "NVIDIA H100 80GB HBM3"},
           "world_info": {"tp_size": 1, "max_batch_size": 2048, "max_num_tokens": 4096},
           "request_info": {"num_requests": 3000, "avg_input_length": 128.0, "avg_output_length": 128.0},
           "performance": {"request_throughput_req_s": 161.6059, "system_output_throughput_tok_s": 20685.5510,
                           "avg_request_latency_ms": 9000.0,
                           "request_latency_percentiles_ms": {"p50": 9100.0, "p99": 18000.0}},
           "streaming_metrics": {"avg_ttft_ms": 500.0, "avg_tpot_ms": 70.0, "tpot_percentiles": {"p99": 90.0}}}
    (run,) = detect.read_runs(json.dumps(doc))
    s, m = run.settings, run.metrics
    assert (s.gpu_name, s.weight_dtype, s.isl, s.num_prompts, s.max_tokens) == ("NVIDIA H100 80GB HBM3", "fp8", 128,
                                                                                3000, 4096)
    assert same(m["e2el"], 9.0, 9.1, 18.0) and same(m["tpot"], 0.07, None, 0.09) and same(m["ttft"], 0.5, None, None)


# ---- hostile input ------------------------------------------------------------------------------------
BASE = json.loads((FIX / "vllm-l40s-llama32-3b-10qps.json").read_text())


@pytest.mark.parametrize("bad", [float("nan"), -5, "fast", 1e300, True, None, [1], {"a": 1}, "1e999"])
def test_a_bad_figure_is_dropped_not_trusted(bad):
    doc = dict(BASE, mean_ttft_ms=bad, num_prompts=bad)
    (run,) = detect.read_runs(json.dumps(doc))
    assert run.metrics["ttft"].mean is None and run.metrics["ttft"].median == pytest.approx(52.999333499883505e-3)
    assert run.settings.num_prompts == 300  # falls back to `completed`


def test_check_bench_says_which_values_it_left_out(tmp_path):
    # mean_ttft_ms NaN and mean_tpot_ms -5: neither is a measurement, so both are left out of the comparison (above),
    # and the command says so on stderr, with the values as the file gave them; the clean file gets no such note.
    (tmp_path / "bad.json").write_text(json.dumps(dict(BASE, mean_ttft_ms=float("nan"), mean_tpot_ms=-5)))
    r = runner.invoke(whole_app(), ["check-bench", str(tmp_path / "bad.json"), "--json"])
    assert r.exit_code == 0, r.output
    note = next(line for line in r.stderr.splitlines() if "left out" in line)
    assert note.startswith("note: 2 value(s) in the file") and "nan" in note and "-5" in note
    (run,) = json.loads(r.stdout)["runs"]
    assert not any(x["metric"] in ("ttft", "tpot") and x["stat"] == "mean" for x in run["rows"])
    clean = runner.invoke(whole_app(), ["check-bench", str(FIX / "vllm-l40s-llama32-3b-10qps.json"), "--json"])
    assert clean.exit_code == 0 and "left out" not in clean.stderr


def test_every_figure_bad_is_one_error():
    doc = {k: ("x" if k.endswith(("_ms", "throughput")) else v) for k, v in BASE.items()}
    with pytest.raises(KvplanError, match="no figure kvplan can read"):
        detect.read_runs(json.dumps(doc))


@pytest.mark.parametrize("text", ["", "hello", "{}", "[]", "[" * 100_000, '{"a": ' * 50_000, "\x00\xff" * 100,
                                  "| a | b |\n|---|---|\n| 1 | 2 |", "Metric,Value\nfoo,1"])
def test_unknown_or_broken_files_are_refused_in_one_line(text):
    with pytest.raises(KvplanError) as e:
        detect.read_runs(text)
    assert "\n" not in e.value.message


def test_size_cap(monkeypatch):
    monkeypatch.setattr(detect, "MAX_BYTES", 100)
    with pytest.raises(KvplanError, match="larger than"):
        detect.read_runs(json.dumps(BASE))


def test_long_lines_parse_fast():
    import time
    t = time.process_time()  # this process's CPU time: other jobs on a shared box do not stretch it
    text = (FIX / "vllm-report-gemma3-27b.txt").read_text().replace("Mean TTFT (ms):",
                                                                    "Mean TTFT (ms):" + " " * 200_000)
    detect.read_runs("--model " + "a" * 300_000 + "\n" + text)
    assert time.process_time() - t < 2.0


# ---- the load and the arithmetic by hand ----------------------------------------------------------------
def _toy(step_s: float = 0.01) -> SimModel:
    return SimModel("toy", kv_budget_bytes=1 << 30, block_size=16, groups=(Group(64),), fixed_step_s=step_s,
                    stages=(StageCost(dense_read_bytes=1000, kv_bytes_per_token=10, flops_per_token=100.0,
                                      attn_flops_per_pair=4.0),))


def test_closed_loop_keeps_the_concurrency():
    from kvplan.simulator.engine import Engine
    reqs = load.requests(100, 20, 12, None)
    assert Engine(_toy(), EngineConfig()).run(reqs).max_running == 12  # all at once: all run together
    looped = load.closed_loop(_toy(), EngineConfig(), reqs, 3)
    rec = Engine(_toy(), EngineConfig()).run(looped)
    assert rec.max_running == 3 and [r.rid for r in looped] == list(range(12))
    # the 4th request is sent when the first finishes: 1 prefill step + 19 decode steps of 10 ms = 0.2 s
    assert looped[3].arrival == pytest.approx(0.2)


def test_closed_loop_waves_from_the_first_pass():
    """20 equal requests at concurrency 4: five waves 0.2 s apart (1 prefill + 19 decode steps of 10 ms), never
    more than 4 running (three uncapped passes left 8 running at once here)."""
    from kvplan.simulator.engine import Engine
    looped = load.closed_loop(_toy(), EngineConfig(), load.requests(100, 20, 20, None), 4)
    assert sorted({round(r.arrival, 6) for r in looped}) == [0.0, 0.2, 0.4, 0.6, 0.8]
    assert Engine(_toy(), EngineConfig()).run(looped).max_running == 4


def test_requests_at_a_rate_are_poisson_and_seeded():
    a, b = load.requests(10, 10, 2000, 4.0), load.requests(10, 10, 2000, 4.0)
    assert a == b and (a[-1].arrival / 2000) == pytest.approx(0.25, rel=0.1)  # mean gap 1/4 s
    assert all(r.arrival == 0 for r in load.requests(10, 10, 5, math.inf))


def test_step_bytes_and_prefill_flops_by_hand():
    m = _toy()
    assert compare.step_read_bytes(m, 2, 50) == 1000 + 10 * 2 * 50  # weights + KV of 2 x 50 tokens
    moe = SimModel("moe", 1 << 30, 16, (Group(64),), stages=(StageCost(dense_read_bytes=0, expert_bytes=800,
                                                                         num_experts=8, top_k=2),))
    assert compare.step_read_bytes(moe, 1, 0) == pytest.approx(800 * 2 / 8)  # one token touches 2 of 8 experts
    assert compare.prefill_flops(m, 3) == 100 * 3 + 4 * 6  # 3 tokens; causal pairs 1 + 2 + 3
    assert compare.prefill_flops(m, 2, depth=5) == 100 * 2 + 4 * (2 * 5 + 3)


def test_decode_batch_by_littles_law():
    (run,) = runs_of("vllm-l40s-llama32-3b-10qps.json")
    # 8.3254 req/s x 270 tokens x 13.578 ms (mean TPOT) = 30.5 sequences decoding, over 4 replicas = 7.63
    assert compare.decode_batch(run, 4) == pytest.approx(8.325406649602808 * 270 * 13.577995860227945e-3 / 4)
    assert compare.decode_batch(BenchRun("x", "", Settings(concurrency=16))) == 16


def test_error_sign_says_which_side():
    rows = compare.rows({"tpot": Stat(mean=0.02), "output_throughput": Stat(mean=100.0)},
                        {"tpot": Stat(mean=0.01), "output_throughput": Stat(mean=150.0)})
    assert [(r.metric, r.error_pct, r.optimistic) for r in rows] == [("tpot", -50.0, True),
                                                                     ("output_throughput", 50.0, True)]


# ---- the command --------------------------------------------------------------------------------------
CASES = [
    ("vllm-l40s-llama32-3b-10qps.json", []),
    ("vllm-report-gemma3-27b.txt", ["--gpu", "h100"]),
    ("sglang-report-gpt-oss-20b-h100.txt", ["--model", "gpt-oss-20b", "--gpu", "h100"]),
    ("trtllm-bench-llama31-8b-fp8.txt", ["--gpu", "h100"]),
    ("llama-bench-qwen25-7b-rtx4080.csv", ["--gpu", "rtx-4090"]),
    ("aiperf-gpt-oss-20b.csv",
     ["--model", "gpt-oss-20b", "--gpu", "l40s", "--input-len", "550", "--output-len", "100"]),
    ("aiperf-gpt-oss-20b.json", []),  # model and GPU (the device name AIPerf's telemetry printed) from the file
]


@pytest.mark.parametrize("name,flags", CASES)
def test_check_bench_runs_and_fits_80_columns(name, flags):
    r = runner.invoke(whole_app(), ["check-bench", str(FIX / name), *flags], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "measured" in out and "kvplan" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_every_metric_has_a_label_and_a_unit():
    from kvplan.bench.result import METRICS
    from kvplan.cli.check_bench import LABELS, UNITS
    assert set(LABELS) == set(UNITS) == set(METRICS)


def test_check_bench_json_and_what_it_assumed():
    r = runner.invoke(whole_app(), ["check-bench", str(FIX / "vllm-l40s-llama32-3b-10qps.json"), "--json"])
    assert r.exit_code == 0, r.output
    (run,) = json.loads(r.stdout)["runs"]
    assert (run["gpu"], run["replicas"], run["tp"], run["model"]) == ("l40s", 4, 1, "llama-3.2-3b-instruct")
    assert any("tp 1 (the file states none" in a for a in run["assumed"])
    ttft = next(x for x in run["rows"] if x["metric"] == "ttft" and x["stat"] == "mean")
    assert (ttft["unit"] == "s"
            and ttft["error_pct"] == pytest.approx(100 * (ttft["predicted"] - ttft["measured"]) / ttft["measured"]))
    assert {e["term"].split(" (")[0] for e in run["efficiency"]} == {"decode bandwidth", "prefill FLOP/s"}
    # beside the datasheet, the L40S profile's measured bandwidth: FluidX3D's 3,788 MLUPs/s x 153 B = 579.564 GB/s
    bw = next(e for e in run["efficiency"] if e["term"] == "decode bandwidth")
    assert bw["benchmark"] == 579_564_000_000 and bw["datasheet"] == 864_000_000_000
    assert bw["pct_of_benchmark"] == pytest.approx(100 * bw["achieved"] / 579.564e9)
    # and its measured matmul rate: torch.mm BF16 269.15 TFLOPS (zzc0721/torch-performance-test-data @9d828276)
    assert next(e for e in run["efficiency"] if e["term"] != "decode bandwidth")["benchmark"] == 269.15e12


def test_the_files_release_picks_the_speed_era():
    # The trtllm-bench report says "TensorRT-LLM Version: 0.17.0": releases before 1.0 have their own
    # coefficient set (kvplan/speed/corpus.py ERAS), whatever release the KV pool's rules are taken from.
    r = runner.invoke(whole_app(),
                      ["check-bench", str(FIX / "trtllm-bench-llama31-8b-fp8.txt"), "--gpu", "h100", "--json"])
    assert r.exit_code == 0, r.output
    (run,) = json.loads(r.stdout)["runs"]
    assert any(a.startswith("step times: calibrated (trtllm<1.0 coefficients") for a in run["assumed"]), run["assumed"]


@pytest.mark.parametrize("name,flags,message", [
    ("sglang-report-gpt-oss-20b-h100.txt", ["--gpu", "h100"], "names no model; pass --model"),
    ("aiperf-gpt-oss-20b.csv", ["--model", "gpt-oss-20b", "--gpu", "l40s"], "pass --input-len and --output-len"),
])
def test_missing_settings_are_one_line_errors(name, flags, message):
    r = runner.invoke(whole_app(), ["check-bench", str(FIX / name), *flags])
    assert r.exit_code == 2 and message in r.output and len(r.output.strip().splitlines()) == 1


def test_a_gpu_without_a_profile_is_a_one_line_error(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(dict(BASE, gpu="2xNVIDIA Imaginary X9")))
    r = runner.invoke(whole_app(), ["check-bench", str(tmp_path / "r.json")])
    assert r.exit_code == 2 and "'2xNVIDIA Imaginary X9' has no kvplan profile; pass --gpu" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_prediction_is_simulates_own(tmp_path):
    """The same 16 requests (1024 in, 350 out, all at t = 0) through `kvplan simulate --trace` give the TPOT
    check-bench printed: check-bench predicts with simulate's own step-time model."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,input_tokens,output_tokens\n" + "0,1024,350\n" * 16)
    sim = runner.invoke(whole_app(), ["simulate", "gemma-3-27b-it", "--gpu", "h100", "--trace", str(trace), "--json"])
    bench = runner.invoke(whole_app(),
                          ["check-bench", str(FIX / "vllm-report-gemma3-27b.txt"), "--gpu", "h100", "--json"])
    assert sim.exit_code == 0 and bench.exit_code == 0, sim.output + bench.output
    simulated = json.loads(sim.stdout)["runs"]["paged"]["summary"]["latency_s"]["tpot"]["mean"]
    row = next(x for x in json.loads(bench.stdout)["runs"][0]["rows"] if x["metric"] == "tpot" and x["stat"] == "mean")
    assert row["predicted"] == pytest.approx(simulated, rel=1e-9)


def test_markup_in_the_files_names_is_shown_literally(tmp_path):
    doc = dict(BASE, model_id="[bold]x[/]", gpu="[red]")
    (tmp_path / "r.json").write_text(json.dumps(doc))
    r = runner.invoke(whole_app(), ["check-bench", str(tmp_path / "r.json")])
    assert r.exit_code == 2 and "[bold]x[/]" in r.output and "Traceback" not in r.output


def test_itl_is_priced_as_the_pooled_gap_and_its_percentiles_are_not():
    # A benchmark's mean ITL pools every gap between tokens; its median is one step's time (SGLang's bursts in the
    # speed corpus: median ITL 0.50 x the mean). The simulator keeps no per-token gaps, so check-bench predicts the
    # ITL mean as all requests' decode time over all their gaps, and leaves the median and p99 unpredicted, saying so.
    r = runner.invoke(whole_app(), ["check-bench", str(FIX / "vllm-report-gemma3-27b.txt"), "--gpu", "h100", "--json"])
    assert r.exit_code == 0, r.output
    (run,) = json.loads(r.stdout)["runs"]
    itl = {x["stat"]: x for x in run["rows"] if x["metric"] == "itl"}
    assert itl["mean"]["predicted"] is not None
    assert all(itl[s]["predicted"] is None for s in itl if s != "mean"), itl
    assert any(a.startswith("ITL: the mean is predicted") for a in run["assumed"])


def test_the_pooled_gap_weighs_tokens_not_requests():
    # two requests, 3 and 11 tokens: decode times 1.0 s and 2.0 s; 2 + 10 gaps pool to 3.0 / 12 = 0.25 s a gap, where
    # their TPOTs (0.5 s and 0.2 s) average 0.35 s
    from types import SimpleNamespace

    from kvplan.simulator.results import Recorder

    rec = SimpleNamespace(output=[3, 11], first=[1.0, 1.0], finish=[2.0, 3.0])
    assert Recorder._itl(rec, [0, 1])["mean"] == pytest.approx(0.25)
    assert Recorder._itl(rec, [0, 1])["p50"] is None


def test_a_file_of_no_known_format_is_one_short_line(tmp_path):
    # an unrecognised non-empty file: one line naming the formats by tool (it listed FORMATS' eight descriptions,
    # ~420 columns, before), exit 2 (usage), nothing on stdout
    f = tmp_path / "x.txt"
    f.write_text("hello world\n")
    r = runner.invoke(whole_app(), ["check-bench", str(f)])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and r.stdout == "" and len(lines) == 1, (r.exit_code, r.stdout, r.stderr)
    assert "not a benchmark result kvplan reads" in lines[0] and "see check-bench's help" in lines[0]
    assert len(lines[0]) - len(str(f)) <= 120
