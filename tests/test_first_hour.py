"""A new user's first hour (issues 21/22, rounds 38 and 39): figures one output gave that contradicted each other, a
table line past 80 columns, notes that quoted figures the README no longer shows, and flags the README promised that
did nothing, each found by running the README's commands and every subcommand from a fresh clone, and pinned here by
the command a user runs."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from conftest import REPO, engine_figures, speed_cases


def _run(*args: str, env: dict | None = None):
    from kvplan.cli import app

    r = CliRunner().invoke(app, list(args), env=env)
    assert r.exit_code == 0, r.output
    return r


def test_sglang_emit_margin_counts_the_tokens_a_hybrids_state_slots_leave():
    # Qwen3.5-27B on an H200 under SGLang 0.5.23, bf16 states. Its config.json: 64 layers, every 4th full attention
    # (16) with 4 KV heads of 256, so a token is 16 x 4 x 256 x 2 (K, V) x 2 B = 65,536 B; the 48 others Gated
    # DeltaNet, 16 key heads and 48 value heads of 128, conv kernel 4: a state slot holds per layer a conv state of
    # (2 x 16 x 128 + 48 x 128) x (4 - 1) = 30,720 and a recurrent state of 48 x 128 x 128 = 786,432 elements,
    # (30,720 + 786,432) x 2 B x 48 layers = 78,446,592 B. From the KV budget ("rest") SGLang 0.5.23 takes
    # slots = int((rest x 0.9 / 1.9 - slot) / slot) (mamba_full_memory_ratio 0.9, the padding slot paid for:
    # kv_cache_configurator.py L3229-3410, kvplan.engines.sglang.mamba), rest -= (slots + 1) x slot, and the token
    # pool is what is left // 65,536: the table's max_total_num_tokens. The margin note divided the whole budget.
    r = _run("fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang", "--ctx", "32k", "--engine-opt",
             "mamba_ssm_dtype=bfloat16", "--emit", "sglang", "--json")
    doc = json.loads(r.stdout)
    plan = doc["plans"][doc["recommended"]]
    kv, states, slot = plan["kv_memory_bytes_per_gpu"], plan["state_pool_bytes_per_gpu"], 78_446_592
    assert 16 * 4 * 256 * 2 * 2 == 65_536 == plan["kv_bytes_per_token_per_gpu"]
    assert (30_720 + 786_432) * 2 * 48 == slot and states == (int((kv * 0.9 / 1.9 - slot) / slot) + 1) * slot
    tokens = plan["kv_cache_tokens"]
    assert tokens == (kv - states) // 65_536 < kv // 65_536
    margin = doc["emit_margin"]  # the stderr line `fit --emit sglang` prints without --json
    assert f"kvplan expects about {tokens:,} tokens in the pool" in margin, margin
    # the lowest fraction keeps 10% over 32,768 tokens after the slots, int(32,768 x 1.1) = 36,044 tokens, and the
    # fraction 0.01 below it does not (the slots scale with the budget under the ratio rule). Checked on the one-GPU
    # plan's own table at each fraction given (fit's pool, not the margin's linear search)
    low = float(re.search(r"the lowest value that keeps 10% is ([0-9.]+)", margin)[1])
    assert 0.3 < low < 0.5 and "in force" not in margin  # the flag is the fraction in force (no VLM scale)

    def one_gpu_pool(fraction: float) -> int:
        out = json.loads(_run("fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang", "--ctx", "32k",
                              "--engine-opt", "mamba_ssm_dtype=bfloat16", "--engine-opt",
                              f"mem_fraction_static={fraction:g}", "--json").stdout)
        (one,) = [p for p in out.get("plans", [out]) if p["gpus"] == 1]
        return one["kv_cache_tokens"]

    assert one_gpu_pool(low) >= int(32_768 * 1.1) > one_gpu_pool(round(low - 0.01, 2))


def test_explain_under_pipeline_stages_works_each_stages_own_quotient():
    # DeepSeek-V3 on 8 x H200 at tp 1 x pp 2 x dp 4, fp8 cache, 131,072 tokens: an MLA layer caches 512 + 64 values
    # of 1 B a token, so the 31-layer stage (layers 0-30) holds 31 x 576 x 131,072 = 2,340,421,632 B a request and
    # the 30-layer one 30 x 576 x 131,072 = 2,264,924,160 B. Each stage's GPU has its own KV room; the answer is
    # the fewest requests over the stages, x 4 dp ranks. --explain divided the least room (the second stage's,
    # heavier in weights) by the largest sequence (the first stage's): 16 x 4 = 64 beside an answer of 68.
    flags = ("fit", "deepseek-v3", "--gpu", "h200", "--tp", "1", "--pp", "2", "--dp", "4", "--ep", "4",
             "--ctx", "128k", "--kv-dtype", "fp8")
    answer = json.loads(_run(*flags, "--json").stdout)["max_concurrency"]
    text = _run(*flags, "--explain").stdout
    stages = re.findall(r"layers (\d+)-(\d+): floor\(([\d,]+) / ([\d,]+)\) = (\d+)", text)
    assert [(a, b) for a, b, *_ in stages] == [("0", "30"), ("31", "60")]
    seqs = [int(s.replace(",", "")) for *_, s, _ in stages]
    assert seqs == [31 * 576 * 131_072, 30 * 576 * 131_072] == [2_340_421_632, 2_264_924_160]
    held = [int(kv.replace(",", "")) // seq for (_, _, kv, _, _), seq in zip(stages, seqs)]
    assert held == [int(n) for *_, n in stages]
    assert f"= {min(held)} × 4 = {answer}" in text and min(held) * 4 == answer
    assert all(len(line) <= 80 for line in text.splitlines())


def test_explain_under_pipeline_stages_describes_the_binding_stages_gpu():
    # Same deployment. The memory table shows the binding stage (layers 31-60), but --explain's layer lines and its
    # "One sequence" line were the first stage's (31 x 576 x 131,072 = 2,340,421,632 B) beside the least room: two
    # stages' figures on one GPU's lines. They now name the binding stage and use its own: 30 MLA layers x (512 +
    # 64) x 1 B = 17,280 B/token; 17,280 x 131,072 = 2,264,924,160 B a sequence; its room = --json's
    # binding_stage.kv_memory_bytes_per_gpu, budget - its weights - overhead.
    flags = ("fit", "deepseek-v3", "--gpu", "h200", "--tp", "1", "--pp", "2", "--dp", "4", "--ep", "4",
             "--ctx", "128k", "--kv-dtype", "fp8")
    doc = json.loads(_run(*flags, "--json").stdout)
    stage, gib = doc["binding_stage"], 2**30
    text = _run(*flags, "--explain", env={"COLUMNS": "80"}).stdout
    explain = " ".join(text[text.index("KV cache of "):].split())
    assert "per GPU of layers 31-60, the stage that binds," in explain
    assert "30 MLA layers × (512 latent + 64 rope) × 1 B (fp8) = 17,280 B/token" in explain
    assert 30 * 576 == 17_280 and 17_280 * 131_072 == 2_264_924_160 == stage["kv_used_bytes_per_gpu"]
    assert "One sequence of 131,072 tokens: 2,264,924,160 B (2.11 GiB) per GPU of layers 31-60" in explain
    assert "2,340,421,632 B (" not in explain  # the other stage's sequence only in its own quotient line
    # its room line adds up (each figure to two decimals): the H200 profile's 150,108,897,280 B = 139.80 GiB x 0.9,
    # less that stage's weights and the overhead; and that room over the 2.11 GiB sequence is the answer's 68 / 4
    room = re.search(r"KV memory per GPU of layers 31-60 = ([\d.]+) GiB × 0\.9 − weights ([\d.]+) GiB − overhead "
                     r"([\d.]+) GiB = ([\d.]+) GiB", explain)
    usable, weights, overhead, kv = (float(x) for x in room.groups())
    assert usable == round(150_108_897_280 / gib, 2) == 139.80
    assert abs(usable * 0.9 - weights - overhead - kv) <= 0.015
    assert int(kv * gib // 2_264_924_160) * 4 == doc["max_concurrency"] == 68
    assert all(len(line) <= 80 for line in text.splitlines())


def test_check_log_wraps_a_label_longer_than_the_terminal_between_its_words():
    # The README's TensorRT-LLM example (TensorRT-LLM#6294's log, a training record): the concurrency row's label,
    # "max concurrency at max_seq_len 157 (kvplan's blocks / 5); printed: the engine's request limit", is 93
    # characters; stacked above its figures it was printed whole, past an 80-column terminal. It now wraps between
    # words, and the figures beside it stay whole. The log's own pool: "Allocated 52.51 GiB for max tokens in paged
    # KV cache (860320)" in blocks of 32 ("Number of tokens per block: 32."): 860,320 / 32 = 26,885 blocks; a
    # request of max_seq_len 157 takes ceil(157 / 32) = 5, so 26,885 // 5 = 5,377 at once.
    log = REPO / "tests" / "fixtures" / "logs" / "corpus" / "trtllm-6294-llama31-8b-fp8-h100.log"
    out = _run("check-log", str(log), "--model", "llama-3.1-8b-instruct", "--engine-version", "0.20.0",
               env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "max concurrency at max_seq_len 157 (kvplan's blocks / 5); printed: the engine's request limit" \
        in " ".join(out.split())
    assert "860,320" in out and "5,377.00x" in out and "(26,885 blocks of 32)" in out


def test_vllm_emit_margin_quotes_the_readmes_held_out_budget_figure():
    # `fit --emit vllm` states how far kvplan's budget can be trusted: it said "within 5% of vLLM's on 27 of 28
    # held-out logs" while the README's held-out summary (benchmarks/budget_corpus.py --markdown) reads 31/32.
    from kvplan.engines.vllm import boot

    readme = (REPO / "README.md").read_text()
    row = re.search(r"^\| available kv \| (\d+) \|.*\| (\d+)/(\d+) within 5% \|", readme, re.M)
    assert row and row[1] == row[3]
    assert (boot.HELD_OUT_WITHIN, boot.HELD_OUT_RECORDS) == (int(row[2]), int(row[3]))
    doc = json.loads(_run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", "--emit", "vllm", "--json").stdout)
    assert doc["emit_margin"].endswith(f"(kvplan's budget is within 5% of vLLM's on {row[2]} of {row[3]} held-out "
                                       "logs)")


def test_readme_qwen35_state_pool_sentence_is_what_fit_prints():
    # README "Hybrids' state pool under SGLang": Qwen3.5-27B at 256k on an H200 (SGLang 0.5.23, its default fit). It
    # quoted 65.69 / 31.11 / 34.58 / 18.58 GiB, a budget since moved (the sentence's own arithmetic held, the figures
    # no longer matched the command). Now: KV cache - state pool = token pool; token pool - 262,144 x 65,536 B
    # (16.00 GiB) = free; the budget less the batch alone would be the "not" figure.
    flat = " ".join((REPO / "README.md").read_text().split())
    m = re.search(r"Qwen3\.5-27B at 256k on an H200 reads ([\d.]+) GiB KV cache − ([\d.]+) GiB state pool = "
                  r"([\d.]+) GiB "
                  r"token pool − 16\.00 GiB = ([\d.]+) GiB free \(not ([\d.]+) GiB\), and a request holds 16 GiB of "
                  r"tokens \+ its 3 state slots \(its own and 2 tracking\) = ([\d.]+) GiB", flat)
    assert m, "the README's Qwen3.5-27B state-pool sentence moved"
    doc = json.loads(_run("fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang", "--json").stdout)
    p = doc["plans"][0] if "plans" in doc else doc
    gib = 2**30
    assert p["context"] == 262_144 and p["kv_used_bytes_per_gpu"] == 262_144 * 65_536 == 16 * gib
    got = [p["kv_memory_bytes_per_gpu"], p["state_pool_bytes_per_gpu"], p["token_pool_bytes_per_gpu"],
           p["free_bytes_per_gpu"], p["kv_memory_bytes_per_gpu"] - p["kv_used_bytes_per_gpu"],
           p["kv_bytes_per_sequence_per_gpu"]]
    assert [f"{b / gib:.2f}" for b in got] == list(m.groups())
    # a state slot: per layer 30,720 conv elements in bf16 and 786,432 recurrent ones in fp32 (SGLang's default
    # mamba_ssm_dtype), (30,720 x 2 + 786,432 x 4) B x 48 layers = 153,944,064 B; a running request holds 3
    assert (30_720 * 2 + 786_432 * 4) * 48 == 153_944_064
    assert p["kv_bytes_per_sequence_per_gpu"] == 16 * gib + 3 * 153_944_064


def test_readme_front_end_figures_are_the_shipped_ingress():
    # README's front-end paragraph quoted vLLM 10.6 ms, SGLang 2.1, TensorRT-LLM 24.0 (the twenty-fourth round's),
    # "about 94 requests a second" and a burst of 1,000 waiting 11.0 s; `simulate` prints the shipped fit's ingress
    # (vLLM 6.0 ms): 1 / 0.006021 = 166 requests a second, 1,000 x 6.021 ms = 6.0 s.
    coef = json.loads((REPO / "kvplan" / "speed" / "coefficients.json").read_text())["engines"]
    ingress = {e: coef[e]["coefficients"]["ingress"] for e in ("vllm", "sglang", "trtllm")}
    flat = " ".join((REPO / "README.md").read_text().split())
    m = re.search(r"\(vLLM ([\d.]+) ms, SGLang ([\d.]+), TensorRT-LLM ([\d.]+) in the shipped fit", flat)
    assert m and [float(x) for x in m.groups()] == [round(ingress[e] * 1e3, 1) for e in ("vllm", "sglang", "trtllm")]
    assert f"1 / ingress (about {int(1 / ingress['vllm'])} requests a second on vLLM)" in flat
    assert f"1,000 prompts has the {1000 * ingress['vllm']:.1f} s its requests wait" in flat
    assert f"check-bench's lacked the {1000 * ingress['vllm']:.1f} s" in flat
    # and the GPUStack burst the sentence quotes, as tests/test_frontend_queue.py computes it (a training point)
    import math
    from pathlib import Path

    import test_frontend_queue as fq
    from kvplan.bench.running import running
    from kvplan.speed.fit import build_all, settle

    cases, _ = speed_cases()
    case = next(c for c in cases if (c.source, c.id) == ("gpustack-perflab-deepseek-r1-h200", "L379-vllm"))
    (built,), _ = build_all([case], running)
    corpus = settle(built, fq.coefficients(case.era))["ttft"]
    run = fq.BenchRun("vllm-json", "the run", fq.Settings(model="deepseek-r1", engine="vllm", engine_version="0.11.0",
                                                         tp=8, isl=128, osl=4, request_rate=math.inf, num_prompts=1000))
    simulated = fq._predicted(run, "h200")[0]["ttft"].mean
    assert f"check-bench's TTFT {simulated:.2f} s, the corpus model's {corpus:.2f} s" in flat


def test_pool_tokens_under_dp_show_one_engines_pool_beside_the_sum():
    # DeepSeek-V3 at dp 8 + ep 8 on H200s, vLLM (--emit vllm): each dp rank is an engine printing its own "GPU KV
    # cache size", its blocks x 64 tokens (FlashMLA's block); the answers' "KV pool tokens (as engines count)" read
    # the 8 pools summed, which no engine prints. The cell now says the sum (8 × one engine's). A block id holds 64
    # tokens of 61 MLA layers x (512 + 64) x 2 B (its config.json, bf16) = 4,497,408 B, and vLLM's blocks are the
    # budget // that (kv_cache_utils.get_num_blocks).
    flags = ("fit", "deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k", "--emit", "vllm")
    fig = engine_figures(json.loads(_run(*flags, "--json").stdout))
    assert fig["bytes per block id"] == 64 * 61 * 576 * 2 == 4_497_408
    blocks = fig["num_gpu_blocks"]
    assert blocks == fig["KV budget per GPU"] // 4_497_408 and fig["GPU KV cache size"] == blocks * 64
    r = _run(*flags, env={"COLUMNS": "80"})
    one = blocks * 64
    assert re.search(rf"KV pool tokens \(as engines count\) │ +{8 * one:,} \(8 × {one:,}\)", r.stdout), r.stdout
    assert re.search(rf"GPU KV cache size +│ +{one:,} tokens", r.stdout)
    one = _run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", env={"COLUMNS": "80"}).stdout
    assert re.search(r"KV pool tokens \(as engines count\) │ +[\d,]+ $", one, re.M)  # no dp: the pool alone


def test_disagg_says_why_a_pools_command_names_another_utilisation():
    # The README's first disagg example: the decode pool is planned at vLLM's 0.92 (its default from 0.20.0,
    # kvplan.engines.vllm.defaults) to hold N requests of 9,216 tokens, and its command asks
    # --gpu-memory-utilization 0.95 with no word why. `fit --emit vllm` says why on a margin line; disagg now says it
    # for each pool: N x 9,216 tokens x 40,960 B a token on a tp-8 rank (its config.json: 80 layers x K and V x
    # 8 KV heads / 8 x 128 x 2 B), plus 5%.
    r = _run("disagg", "llama-3.1-70b", "--gpu", "h100", "--isl", "8192", "--osl", "1024", "--prefill-tp", "4",
             "--decode-tp", "8")
    n = int(re.search(r"holds ([\d,]+) requests of 9,216 tokens", r.stdout)[1].replace(",", ""))
    assert "--gpu-memory-utilization 0.95" in r.stdout
    note = next(line for line in r.stderr.splitlines() if line.startswith("decode command: margin:"))
    need = n * 9_216 * (80 * 2 * 8 // 8 * 128 * 2) / 2**30
    assert "at --gpu-memory-utilization 0.95 (raised from 0.92" in note and f"{n} x 9,216 tokens need {need:.2f} GiB" \
        in note
    assert any(line.startswith("prefill command: margin:") for line in r.stderr.splitlines())


def test_simulate_json_carries_the_load_line_the_table_shows():
    # The README's simulate example, shortened: 70B at tp 4 on H100s, chat at 20 req/s for 20 s. The table says
    # "load │ overloaded: A req/s arrived, S req/s served"; --json had no such field. Now summary["load"] holds
    # the same two rates and the verdict. By hand: 400 requests arriving over 20 s are 20 req/s; a run that lasts
    # 40 s (half of it past the last arrival) serving 8 req/s, under 0.9 x 20 = 18, is overloaded.
    from kvplan.simulator.results import load_of

    assert load_of(400, 20.0, 40.0, 8.0) == {"overloaded": True, "arrived_per_s": 20.0, "served_per_s": 8.0}
    args = ("simulate", "llama-3.1-70b", "--gpu", "h100", "--gpus", "4", "--workload", "chat", "--qps", "20",
            "--duration", "20")
    summary = next(iter(json.loads(_run(*args, "--json").stdout)["runs"].values()))["summary"]
    load = summary["load"]
    assert abs(load["arrived_per_s"] - 20) < 3  # --qps 20 of Poisson arrivals: ~400 in 20 s, a few % either way
    assert load["overloaded"] and load["served_per_s"] < 0.9 * load["arrived_per_s"]
    text = " ".join(_run(*args, env={"COLUMNS": "80"}).stdout.split())
    assert f"overloaded: {load['arrived_per_s']:,.2f} req/s arrived, {load['served_per_s']:,.2f} req/s served" in text


def test_a_layer_kind_refusal_names_the_engines_that_plan_it():
    # Qwen3.5-27B (Gated DeltaNet states) under TensorRT-LLM is refused, and the refusal said only "plan it with the
    # default engine", while `fit qwen3.5-27b --engine sglang` (the README's own example) and `--engine vllm` plan it
    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", "qwen3.5-27b", "--gpu", "h100", "--engine", "trtllm"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "--engine sglang" in r.stderr and "--engine vllm" in r.stderr and "--engine trtllm" not in r.stderr
    for engine in ("sglang", "vllm"):
        _run("fit", "qwen3.5-27b", "--gpu", "h100", "--engine", engine)


def test_gpu_counts_read_as_words_not_gpu_s():
    # fit's column title for a stated layout said "1 GPU(s)" / "2 GPU(s)": a count with its noun, singular for one
    one = _run("fit", "llama-3.1-8b", "--gpu", "h100", "--tp", "1").stdout
    two = _run("fit", "llama-3.1-8b", "--gpu", "h100", "--tp", "2").stdout
    assert "GPU(s)" not in one + two
    assert re.search(r"┃\s+1 GPU\s*$", one, re.M) and re.search(r"┃\s+2 GPUs\s*$", two, re.M)


def test_memory_table_under_pipeline_stages_is_one_stages_gpu():
    # DeepSeek-V3 on 8 x H200 at tp 1 x pp 2 x dp 4, fp8 cache, 131,072 tokens (the command above): a request takes
    # 31 x 576 x 131,072 = 2,340,421,632 B of the first stage (layers 0-30) and 30 x 576 x 131,072 = 2,264,924,160 B
    # of the second (31-60), whose GPU holds more weights and so less KV room. The table took each row's worst stage
    # (the second's room less the first's request: 36.80 - 2.18 = "free" 34.62 GiB, matching neither stage). It now
    # shows the stage that binds (the fewest requests by exact division), its rows adding up as one GPU: KV room -
    # 2,264,924,160 B = free, and --json's used / free and binding_stage in step.
    flags = ("fit", "deepseek-v3", "--gpu", "h200", "--tp", "1", "--pp", "2", "--dp", "4", "--ep", "4",
             "--ctx", "128k", "--kv-dtype", "fp8")
    doc = json.loads(_run(*flags, "--json").stdout)
    stage = doc["binding_stage"]
    assert stage["layers"] == [31, 60] and stage["kv_used_bytes_per_gpu"] == 30 * 576 * 131_072 == 2_264_924_160
    assert doc["kv_used_bytes_per_gpu"] == stage["kv_used_bytes_per_gpu"]
    assert doc["free_bytes_per_gpu"] == stage["free_bytes_per_gpu"] == stage["kv_memory_bytes_per_gpu"] - 2_264_924_160
    assert stage["kv_memory_bytes_per_gpu"] // 2_264_924_160 * 4 == doc["max_concurrency"]  # x 4 dp ranks
    assert (doc["budget_bytes_per_gpu"] - stage["weight_bytes_per_gpu"] - doc["overhead_bytes_per_gpu"]
            == stage["kv_memory_bytes_per_gpu"])
    text = _run(*flags).stdout
    rows = {line.split("│")[0].strip(): line.split("│")[1].strip()
            for line in text.split("Answers per deployment")[0].splitlines() if "│" in line}
    gib = 2**30
    assert rows["− batch × context"] == f"{2_264_924_160 / gib:.2f} GiB" == "2.11 GiB"
    # the rows add up as one GPU's (each to two decimals): 139.80 x 0.9 = 125.82, less weights and overhead is the
    # KV cache, less the binding stage's 2.11 GiB request is what is free
    g = {k: float(v.split()[0]) for k, v in rows.items() if v.endswith(" GiB") and "→" not in v}
    assert rows["× utilisation"] == "0.9 → 125.82 GiB" and round(g["usable memory"] * 0.9, 2) == 125.82
    assert abs(125.82 - g["− weights"] - g["− overhead (est.)"] - g["= KV cache"]) <= 0.015
    assert abs(g["= KV cache"] - 2.11 - g["= free"]) <= 0.015
    assert rows["stage shown (binds)"] == "layers 31-60"
    assert all(len(line) <= 80 for line in text.splitlines())


def test_check_bench_names_every_missing_input_at_once():
    # An AIPerf CSV (tests/fixtures/bench/aiperf-gpt-oss-20b.csv) states no model, no GPU and no lengths: the user
    # was told to pass --model, then on the next try --gpu, then the lengths. One error now names all four flags.
    from kvplan.cli import app

    path = str(REPO / "tests" / "fixtures" / "bench" / "aiperf-gpt-oss-20b.csv")
    r = CliRunner().invoke(app, ["check-bench", path])
    assert r.exit_code == 2 and "Traceback" not in r.output
    (line,) = r.output.strip().splitlines()
    assert line == "Error: inputs missing; pass --model, --gpu, --input-len and --output-len" and len(line) <= 80
    r = CliRunner().invoke(app, ["check-bench", path, "--gpu", "l40s"])
    assert r.exit_code == 2 and r.output.strip() == "Error: inputs missing; pass --model, --input-len and --output-len"


def test_gpus_reads_one_line_a_gpu_at_80_columns_and_json_keeps_every_alias():
    # `kvplan gpus` at 80 columns wrapped each GPU's aliases and name onto 2-7 lines (a100-sxm-80's six aliases:
    # 7 lines). The table now counts the aliases (each in --json, as `--gpu` takes it) and leaves the name out where
    # it would wrap, saying so: one line a GPU, its figures whole.
    out = _run("gpus", env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if "│" in line]
    import yaml

    # the bundled profiles as written: each file's key and its aliases list
    files = [yaml.safe_load(f.read_text()) for f in sorted((REPO / "kvplan" / "hardware" / "profiles").glob("*.yaml"))]
    aliases = {d["key"]: d.get("aliases") or [] for d in files}
    assert len(rows) == len(aliases)  # one line a GPU: no continuation lines
    doc = {g["key"]: g for g in json.loads(_run("gpus", "--json").stdout)}
    for row in rows:
        key, *_, count = (cell.strip() for cell in row.split("│"))
        assert int(count) == len(aliases[key]) and doc[key]["aliases"] == aliases[key]
    assert len(doc["a100-sxm-80"]["aliases"]) == 6 and "a100-sxm4-80gb" in doc["a100-sxm-80"]["aliases"]
    assert "name left out at 80 columns" in " ".join(out.split())
    wide = _run("gpus", env={"COLUMNS": "200"}).stdout
    assert "NVIDIA GB300 (one Blackwell Ultra GPU of a Grace Blackwell superchip)" in wide  # whole where it fits


def test_models_list_kv_per_token_is_fits_and_the_windowed_figure_is_named():
    # Gemma 3 27B (google/gemma-3-27b-it's config: 62 layers, 16 KV heads x head_dim 128, every 6th layer global, the
    # others a 1,024-token window), bf16: 2 x 16 x 128 x 2 = 8,192 B a layer and token. While the windows hold a
    # token it costs 62 x 8,192 = 507,904 B (496 KiB); past them only the 10 global layers grow: 81,920 B (80 KiB).
    # `models list` showed 496 KiB under "KV/token" while fit's "KV per token" and --json's kv_bytes_per_token said
    # 80 KiB. Its KV/token is now fit's figure, the windowed one is headed "in windows", and the caption says which.
    out = _run("models", "list", env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    header = next(line for line in out.splitlines() if "┃" in line)
    cols = [c.strip() for c in header.split("┃")]
    row = next(line for line in out.splitlines() if line.startswith("gemma-3-27b-it "))
    cells = dict(zip(cols, (c.strip() for c in row.split("│"))))
    fit = json.loads(_run("fit", "gemma-3-27b-it", "--gpu", "h100", "--ctx", "32k", "--json").stdout)["plans"][0]
    assert fit["kv_bytes_per_token"] == 10 * 8_192 == 81_920
    assert cells["KV/token"] == "80.00 KiB" and cells["in windows"] == "496.00 KiB"  # 507,904 / 1,024
    assert "KV/token: what a token adds at long context" in " ".join(out.split())
    doc = {m["name"]: m for m in json.loads(_run("models", "list", "--json").stdout)}
    assert doc["gemma-3-27b-it"]["kv_bytes_per_token_within_windows"] == 62 * 8_192


def test_llamacpp_says_its_pool_is_the_batchs_and_what_memory_would_hold():
    # Qwen3-32B at Q4_K_M on 2 x RTX 4090 (layers split 32 / 32), 16,384-token requests, f16 cache: 64 layers x 8 KV
    # heads x 128 x 2 (K, V) x 2 B = 262,144 B a token, so -c 16,384 -np 1 is 16,384 x 262,144 = 4 GiB (4,096 MiB,
    # llama.cpp's "KV cache size"). The Answers table said "KV pool tokens 16,384" beside "tokens requests can use
    # 98,304" and "max concurrency 6" with nothing saying why: llama-server allocates -c cells for -np slots whatever
    # memory is left, so the pool is the batch's, and 6 is what -np 6 -c 98,304 would hold. A note now says so, and
    # the engine table's caption what its cells count; --batch 6 then fits with that pool, 7 does not.
    flags = ("fit", "qwen3-32b", "--gpu", "rtx-4090", "--gpus", "2", "--ctx", "16k", "--engine", "llama.cpp",
             "--weight-dtype", "q4_k_m")
    r = _run(*flags, env={"COLUMNS": "80"})
    assert "4096.00 MiB" in r.stdout and "16,384 cells (1 stream of 16,384)" in r.stdout  # 16,384 x 262,144 B
    assert "cells and MiB: the whole cache (every layer, all its GPUs)" in " ".join(r.stdout.split())
    plan = json.loads(_run(*flags, "--json").stdout)
    assert plan["kv_cache_tokens"] == 16_384 and plan["max_concurrency"] == 6
    assert ("note: 2 GPUs: llama-server allocates -c 16,384 for -np 1 (the batch) whatever memory is left; memory "
            "holds 6 slots of 16,384: -c 98,304 -np 6 (--batch 6)") in r.stderr
    six = json.loads(_run(*flags, "--batch", "6", "--json").stdout)
    assert six["fits"] and six["kv_cache_tokens"] == 6 * 16_384 == 98_304
    assert "llama-server allocates" not in _run(*flags, "--batch", "6").stderr  # the pool is what memory holds
    assert not json.loads(_run(*flags, "--batch", "7", "--json").stdout)["fits"]


def test_sweep_counts_read_as_words():
    # sweep's summary said "of 1 model(s) × 2 GPU(s) × ... × 2 context(s)", as fit's titles said "GPU(s)" to round 38
    r = _run("sweep", "-m", "llama-3.1-8b", "-g", "h100,a100-80", "-c", "8k,32k", "--gpu-counts", "1,2", "--top", "4")
    assert "(s)" not in r.stderr
    assert "8 plans (8 fit) of 1 model × 2 GPUs × GPU counts 1,2 × 2 contexts × KV auto; batch 1" in r.stderr


def test_cheapest_workload_tries_copies_with_replicas():
    # Llama-3.1-8B on L40S, chat at 10 requests/s: one GPU's memory holds the 8k target, so cheapest made no copies
    # (they came only from a concurrency one copy misses) and --replicas 4 changed nothing: every L40S count failed
    # the SLA, 64 GPUs of tp 8 x pp 8 the "closest miss", though the README says a workload is tried on copies. Each
    # deployment that holds the target is now also tried as 2 .. 4 copies, fewest GPUs first, within --max-gpus.
    from kvplan.cli import app

    flags = ["cheapest", "llama-3.1-8b", "--ctx", "8k", "--workload", "chat", "--qps", "10", "--gpu", "l40s",
             "--duration", "30", "--json"]
    alone = CliRunner().invoke(app, flags)
    assert alone.exit_code == 6 and not json.loads(alone.stdout)["meets"]
    doc = json.loads(_run(*flags, "--replicas", "4").stdout)
    best = doc["meets"][0]
    assert (best["replicas"], best["tp"], best["gpus_total"]) == (3, 1, 3)
    # the one-copy deployments and each's 2 .. 4 copies up to 64 GPUs were judged: 1 x 2 GPUs failed before 3 met
    tried = {(c["replicas"], c["gpus"]): c["why"] for c in doc["fails"]}
    assert "misses the SLA" in tried[(2, 1)] and "misses the SLA" in tried[(1, 2)]
    assert all(c["gpus"] * c.get("replicas", 1) <= 64 for c in doc["meets"] + doc["fails"])


def test_a_negative_size_is_called_negative_not_a_non_size():
    # `--overhead -1GiB` said "'-1GiB' is not a size (try 80GiB, 80GB or a number of bytes)": it is one, negated
    from kvplan.cli import app

    for flag, value in (("--overhead", "-1GiB"), ("--kv-cache-memory", "-20GiB"), ("--overhead", "-2")):
        r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", f"{flag}={value}"])
        assert r.exit_code == 2 and r.output.strip() == f"Error: {flag} must not be negative, got '{value}'"
    r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--overhead=-x"])
    assert r.exit_code == 2 and "'-x' is not a size" in r.output


def test_layout_table_says_its_per_gpu_columns_are_the_largest_stages():
    # DeepSeek-V3 on 8 x H200, 128k, fp8 cache: the best layout, tp 1 x pp 2 x dp 4, showed "KV/req/GPU 2.18 GiB"
    # (layers 0-30: 31 x 576 x 131,072 = 2,340,421,632 B) while the memory table under it said 2.11 GiB (layers
    # 31-60, the stage that binds: 30 x 576 x 131,072 = 2,264,924,160 B), with nothing saying which stage each was.
    out = _run("fit", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--ctx", "128k", "--kv-dtype", "fp8",
               env={"COLUMNS": "80"}).stdout
    first = next(line for line in out.splitlines() if line.startswith("1 │"))
    assert "tp 1 × pp 2 × dp 4, ep 4" in first and first.rstrip().endswith(f"{2_340_421_632 / 2**30:.2f} GiB")
    assert f"− batch × context │ {2_264_924_160 / 2**30:.2f} GiB" in " ".join(out.split())
    flat = " ".join(out.split())
    assert ("weights/GPU and KV/req/GPU: the most any GPU holds (under pipeline stages, each its largest stage's; "
            "the memory table shows the stage that binds)") in flat


def test_readme_points_check_bench_at_files_to_try():
    # check-bench's README commands name bench-result.json, a file a new user does not have (docs/examples holds
    # only a trace): the README now names the published files in tests/fixtures/bench, and the one it says needs
    # no flags runs without any.
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`tests/fixtures/bench/` holds published files of each kind it reads" in readme
    name = re.search(r"`(vllm-[\w.-]+\.json)` is a `vllm bench serve` result and names its model and GPUs", readme)[1]
    bench = REPO / "tests" / "fixtures" / "bench"
    assert (bench / "SOURCES.md").is_file() and name in (bench / "SOURCES.md").read_text()
    assert "TTFT" in _run("check-bench", str(bench / name), env={"COLUMNS": "80"}).stdout


def test_disagg_prefill_margin_is_judged_at_the_prompts_it_holds_at_once():
    # disagg's prefill replica holds "in flight + staged" prompts at once (a step's worth being prefilled and those
    # waiting for their transfer), but its command's margin line was judged on one prompt ("1 x 4,096 need 4,096;
    # the lowest value that keeps 10% is 0.2"), a fraction below which the replica could not hold what it must. The
    # margin is now the plan at that count, as the decode command's is at its batch.
    r = _run("disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512", "--engine", "sglang",
             "--speed", "roofline")
    held = int(re.search(r"holds \d+ prompts of 4,096; in flight \+ staged (\d+)", r.stdout)[1])
    assert held > 1
    margin = next(line for line in r.stderr.splitlines() if line.startswith("prefill command: margin"))
    assert f"; {held} x 4,096 need {held * 4096:,};" in margin
    r = _run("disagg", "llama-3.1-70b", "--gpu", "h100", "--isl", "8192", "--osl", "1024", "--prefill-tp", "4",
             "--decode-tp", "8")
    held = int(re.search(r"holds \d+ prompts of 8,192; in flight \+ staged (\d+)", r.stdout)[1])
    margin = next(line for line in r.stderr.splitlines() if line.startswith("prefill command: margin"))
    assert f"; {held} x 8,192 tokens need " in margin


def test_fit_json_leaves_the_calibrated_speed_of_a_plan_that_does_not_fit_empty():
    # Round 40: 16 requests of 32k on one H100 do not fit (16 x 4 GiB of Llama-3.1-8B's cache against ~55 GiB), and
    # fit's table shows "–" for that plan's calibrated step, sweep's row leaves it empty and the README's column
    # table says "empty for a plan that does not fit"; fit --json still gave the 1-GPU plan a calibrated step and
    # tokens/s. The roofline's figures stay (a bound, said in the README).
    r = _run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", "--batch", "16", "--json")
    one, two = json.loads(r.stdout)["plans"]
    assert (one["gpus"], one["fits"], two["fits"]) == (1, False, True)
    assert one["decode_step_seconds_calibrated"] is None and one["decode_tokens_per_second_calibrated"] is None
    assert one["decode_step_seconds"] > 0 and two["decode_step_seconds_calibrated"] > two["decode_step_seconds"]
    table = _run("fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", "--batch", "16", env={"COLUMNS": "80"})
    assert re.search(r"decode step \(calibrated\)\s+│\s+–\s+│", table.stdout)


def test_sweep_html_leaves_a_context_past_the_models_limit_out_of_the_concurrency_chart(tmp_path):
    # Round 40, the README's sweep in a browser: Qwen3-32B's limit is 40,960 tokens (its config's
    # max_position_embeddings), so at 128k every deployment's line fell to 0 requests, as if memory ran out; the
    # row says binds "context limit". The chart now has no point there (a gap), as the decode chart has none.
    out = tmp_path / "plan.html"
    _run("sweep", "-m", "qwen3-32b", "-g", "h100", "-c", "8k,128k", "--gpu-counts", "1,2", "-o", str(out))
    figs = json.loads(re.search(r'id="kvplan-figures">(.*?)</script>', out.read_text(), re.S)[1])
    traces = [t for k, f in figs.items() if k.startswith("concurrency") for t in f["data"]]
    assert len(traces) == 2 and all(t["x"] == ["8k", "128k"] for t in traces)
    assert all(t["y"][0] > 0 and t["y"][1] is None for t in traces)
