"""Procurement reports: `kvplan sweep` (CSV, JSON, HTML), prices, `kvplan cheapest`, atomic writes.

Hand arithmetic is in the comments; the rest checks that the files say exactly what the planner
says (the CSV read back with the csv module equals the JSON, the sweep equals plan() call by call).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.sources.catalog import find_in_catalog, spec_to_dict
from conftest import one_line_error
from kvplan.cli import app
from kvplan.core.dtypes import BF16, FP8
from kvplan.core.errors import KvplanError
from kvplan.core.files import atomic_write
from kvplan.report.export import CSV_COLUMNS, GIB_BESIDE, ROW_KEYS, plan_row, sweep_rows, write_csv
from kvplan.hardware.gpus import find_gpu, load_gpus
from kvplan.planning.deploy import Deployment
from kvplan.engines import resolve_engine
from kvplan.planning.plan import Request
from kvplan.hardware.prices import load_prices
from kvplan.compare.sweep import parse_counts, rank_key, sweep

plan, plan_grid = resolve_engine().plan, resolve_engine().grid

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def spec(name: str):
    s = find_in_catalog(name)
    assert s is not None, name
    return s


# --- the sweep's numbers are the planner's ---------------------------------------------------------

def test_plan_grid_equals_plan_call_by_call():
    gpus = [find_gpu(n) for n in ("h100", "mi300x", "l40s")]
    reqs = [Request(context=c, kv_dtype=d, batch=b) for b in (1, 3) for d in (BF16, FP8, None) for c in (1000, 32768)]
    reqs.append(Request(context=5000, kv_cache_memory_bytes=8 * 2**30, gpu_memory_utilization=0.8))
    for name, dep in [("llama-3.1-70b", Deployment(4)), ("gemma-2-9b", Deployment(2, 3)),  # sliding windows, pp
                      ("nemotron-h-56b-base-8k", Deployment(8)), ("deepseek-v3", Deployment(8, 2))]:  # states, MLA
        m = spec(name)
        assert plan_grid(m, gpus, dep, reqs) == [plan(m, g, dep, r) for g in gpus for r in reqs]


def test_cached_profiles_equal_fresh_ones():
    m = spec("gemma-2-9b")
    p = plan(m, find_gpu("h100"), Deployment(2, 3), Request(context=9000, batch=2))
    # a profile served from the cache equals one grouped afresh, memo and all
    from kvplan.planning.profile import kv_profile

    for stage in p.stages:
        a, b = stage.layers
        fresh = kv_profile(m.layers[a:b], 2, BF16, BF16, 16)
        assert fresh == stage.profile
        for n in (1, 4095, 4096, 4097, 9000, 10**6):
            assert fresh.sequence_bytes(n) == stage.profile.sequence_bytes(n)


def test_sweep_skips_and_counts_invalid_deployments():
    # gpt2: 12 attention heads and 12 layers. 8 GPUs: tp 8 does not divide the heads, so the one
    # layout rule takes tp 4 x pp 2. 13 GPUs (prime): only tp 1 x pp 13, more stages than layers.
    gpus = [find_gpu("h100"), find_gpu("a100-80"), find_gpu("l4")]
    done = []
    r = sweep([spec("gpt2")], gpus, [1, 2, 4, 8, 13], [512, 1024], ["bf16"], progress=done.append)
    assert sum(done) == 5 * 3 * 2  # the progress bar reaches every combination, skipped ones included
    assert len(r.plans) == 4 * 3 * 2  # 4 valid counts x 3 GPUs x 2 contexts
    assert {(p.deployment.tp, p.deployment.pp) for p in r.plans} == {(1, 1), (2, 1), (4, 1), (4, 2)}
    assert len(r.skipped) == 1 and r.skipped[0].gpus == 13 and "no tp x pp split of 13 GPUs" in r.skipped[0].reason
    assert r.skipped_plans == 3 * 2  # 3 GPUs x 2 contexts never planned
    for p in r.plans:  # every plan is plan()'s own
        assert p == plan(spec("gpt2"), find_gpu(p.gpu), p.deployment, p.request)


def test_sweep_ranking_and_dtype_dedup():
    prices = {"h100-sxm": 2.0}
    r = sweep([spec("llama-3.1-8b"), spec("qwen3-8b")], [find_gpu("h100"), find_gpu("a100-80")], [1, 2],
              [8192, 131072], ["auto", "bf16", "fp8"], prices=prices)
    # auto = bf16 for both models: 2 KV dtypes, not 3 -> 2 models x 2 GPUs x 2 counts x 2 contexts x 2 dtypes
    assert len(r.plans) == 32
    keys = [rank_key(p, prices.get(p.gpu)) for p in r.plans]
    assert keys == sorted(keys)
    first_unfit = next((i for i, p in enumerate(r.plans) if not p.fits), len(r.plans))
    assert all(not p.fits for p in r.plans[first_unfit:])  # fits first
    priced = [p for p in r.plans if p.fits and p.gpu == "h100-sxm"]
    assert r.plans[0] in priced  # a priced fit before any unpriced one


def test_gpu_counts_use_the_one_layout_rule():
    """sweep's GPU counts become layouts by kvplan.planning.deploy.deployment_for_gpus, as fit and cheapest do:
    the widest tp (<= 8, within a node) that divides the heads, then pipeline stages."""
    from kvplan.planning.deploy import deployment_for_gpus

    llama = find_in_catalog("llama-3.1-8b")  # 32 heads, 8 KV heads
    assert deployment_for_gpus(llama, 4) == Deployment(4, 1)
    assert deployment_for_gpus(llama, 16) == Deployment(8, 2)  # a pipeline stage per node of 8
    assert deployment_for_gpus(llama, 12) == Deployment(4, 3)  # 12 % 8 != 0: tp 4, three stages
    r = sweep([llama], [find_gpu("h100")], [12, 16], [8192])
    assert {(p.deployment.tp, p.deployment.pp) for p in r.plans} == {(4, 3), (8, 2)}
    assert parse_counts("1,2,12") == [1, 2, 12]
    for bad in ("0", "5000"):
        with pytest.raises(KvplanError):
            parse_counts(bad)


# --- CSV and JSON ----------------------------------------------------------------------------------

def test_row_keys_are_the_documented_columns():
    m = spec("llama-3.1-8b")
    p = plan(m, find_gpu("h100"), Deployment(1), Request(context=8192))
    assert tuple(plan_row(p, m, 2.5, rank=1)) == ROW_KEYS
    for bytes_col, gib_col in GIB_BESIDE.items():  # the GiB column sits right after its bytes column
        assert CSV_COLUMNS[CSV_COLUMNS.index(bytes_col) + 1] == gib_col


def test_row_is_fit_json_less_layer_kinds_and_states_agree_layer_by_layer():
    # A row skips the layer-kind breakdown and takes each stage's state bytes from its profile's
    # precomputed figure; fit --json works them out layer by layer. Both must agree, over every
    # catalog model (hybrids with recurrent states, Falcon-H1's parallel layers, fp32 SSM states)
    # at tp 1 and 4, pp 1 and 2.
    from kvplan.sources.catalog import bundled_specs
    from kvplan.model.recurrent import state_bytes
    from kvplan.report.text import plan_to_dict

    h100, seen_states = find_gpu("h100"), 0
    for m in bundled_specs():
        for dep in (Deployment(1), Deployment(4, 2)):
            try:
                p = plan(m, h100, dep, Request(context=8192, state_dtype=FP8))
            except KvplanError:
                continue  # a layout this model cannot run
            for stage in p.stages:
                prof = stage.profile
                assert prof.state_bytes_per_sequence() == sum(
                    n * prof.state_bytes(s) for s, n in prof.groups), m.name  # DeepSeek-V4's fixed part too
                assert sum(n * state_bytes(s, prof.tp, prof.state_dtype) for s, n in prof.groups
                           if s.state_elements(prof.tp)) <= prof.state_bytes_per_sequence(), m.name
            full = plan_to_dict(p, m)
            row = plan_row(p, m, 2.0, rank=7)
            kinds = full.pop("layer_kinds")
            stage = full.pop("binding_stage")  # the memory table's column, fit --json's only
            assert (stage["kv_used_bytes_per_gpu"], stage["free_bytes_per_gpu"]) == (row["kv_used_bytes_per_gpu"],
                                                                                    row["free_bytes_per_gpu"]), m.name
            full.pop("quantization_notes", None)  # sentences about the model, fit --json's only (not a row's figure)
            none = dict.fromkeys(("decode_step_seconds_calibrated", "decode_tokens_per_second_calibrated",
                                  "decode_tokens_per_second_per_request_calibrated"))  # no step given: not priced
            assert row == {"rank": 7, **full, **none, "price_per_gpu_hour": 2.0, "cost_per_hour": 2.0 * dep.gpus,
                           "cost_per_concurrent_user_hour": row["cost_per_concurrent_user_hour"]}, m.name
            assert list(row)[1:-6] == list(full)
            assert sum(k["state_bytes_per_sequence"] for k in kinds) == full["state_bytes_per_sequence"], m.name
            seen_states += full["state_bytes_per_sequence"] > 0
    assert seen_states > 0  # some catalog model keeps recurrent states


def test_csv_read_back_equals_json(tmp_path, kvplan_home):
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\nH100: 2.5\nmi300x: 2\n")
    csv_path, json_path = tmp_path / "plan.csv", tmp_path / "plan.json"
    r = run("sweep", "--models", "llama-3.1-70b,deepseek-v3,gemma-2-9b", "--gpu", "h100,mi300x,l40s",
            "--ctx", "8k,128k", "--kv-dtype", "bf16,fp8", "--gpu-counts", "1,2,8", "--prices", prices,
            "-o", csv_path, "-o", json_path)
    assert r.exit_code == 0, r.output
    doc = json.loads(json_path.read_text())
    with open(csv_path, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    rows = doc["plans"]
    # 3 models x 3 GPUs x 3 counts x 2 contexts x 2 dtypes = 108; gemma-2-9b's 16 heads take tp 8, so none skipped
    assert len(rows) == len(table) == doc["plans_count"] == 108 and doc["skipped_plans"] == 0
    assert list(table[0]) == list(CSV_COLUMNS)
    for j, c in zip(rows, table):
        for key, value in j.items():
            cell = c[key]
            if value is None:
                assert cell == ""
            elif isinstance(value, bool):
                assert cell == ("true" if value else "false")
            elif isinstance(value, int):
                assert int(cell) == value, key
            elif isinstance(value, float):
                assert float(cell) == value, key  # exact: floats are written round-trip
            elif isinstance(value, list):
                assert cell == " | ".join(value)
            else:
                assert cell == value
        for bytes_col, gib_col in GIB_BESIDE.items():
            assert float(c[gib_col]) == round(j[bytes_col] / 2**30, 3)
    # llama-3.1-70b, bf16, 128k on 8 GPUs: 80 layers x 2 (K, V) x 1 KV head per rank x 128 x 2 B x 131,072
    # = 5,368,709,120 B = 5 GiB per GPU; 8 ranks x that = 42,949,672,960 B in all
    row = next(c for c in table if c["model"] == "llama-3.1-70b" and c["gpus"] == "8" and c["context"] == "131072"
               and c["kv_dtype"] == "bf16" and c["gpu"] == "h100-sxm")
    assert (int(row["kv_bytes_per_sequence_per_gpu"]) == 5_368_709_120
            and float(row["kv_gib_per_sequence_per_gpu"]) == 5.0)
    assert int(row["kv_bytes_per_sequence"]) == 42_949_672_960
    assert int(row["max_concurrency"]) == int(row["kv_memory_bytes_per_gpu"]) // 5_368_709_120
    # prices: 2.5 per GPU-hour x 8 GPUs = 20.0 per hour; per concurrent user = 20 / max concurrency
    assert float(row["price_per_gpu_hour"]) == 2.5 and float(row["cost_per_hour"]) == 20.0
    assert float(row["cost_per_concurrent_user_hour"]) == 20.0 / int(row["max_concurrency"])
    assert all(c["price_per_gpu_hour"] == "" for c in table if c["gpu"] == "l40s")  # no invented prices
    assert doc["currency"] == "EUR" and doc["prices_per_gpu_hour"] == {"h100-sxm": 2.5, "mi300x": 2.0}


def test_csv_guards_formulas_but_not_numbers():
    row = {"model": "=HYPERLINK(\"http://x\")", "gpu": "@h100", "free_bytes_per_gpu": -5, "fits": False,
           "warnings": ["a", "b"], "cost_per_hour": None}
    out = io.StringIO()
    write_csv([row], out)
    head, line = list(csv.reader(io.StringIO(out.getvalue())))
    assert head == ["model", "gpu", "free_bytes_per_gpu", "free_gib_per_gpu", "fits", "warnings", "cost_per_hour"]
    assert line == ["'=HYPERLINK(\"http://x\")", "'@h100", "-5", "-0.0", "false", "a | b", ""]
    assert out.getvalue().endswith("\r\n")  # RFC 4180 line ends


def test_user_model_names_reach_files_safely(tmp_path, kvplan_home):
    # A model the user imported under a hostile name: CSV keeps it as text, HTML escapes it.
    name = "=cmd|' /c calc'!a0 <script>x</script>"
    (kvplan_home / "models").mkdir(parents=True)
    data = {**spec_to_dict(spec("llama-3.1-8b")), "name": name, "aliases": [], "hf_repo": None}
    (kvplan_home / "models" / "evil.json").write_text(json.dumps(data))
    out = tmp_path / "out"
    out.mkdir()
    r = run("sweep", "--models", name, "--gpu", "h100", "--ctx", "8k", "--gpu-counts", "1",
            "-o", out / "p.csv", "-o", out / "p.html", "-o", out / "p.json")
    assert r.exit_code == 0, r.output
    with open(out / "p.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["model"] == "'" + name  # a spreadsheet shows it, does not run it
    assert json.loads((out / "p.json").read_text())["plans"][0]["model"] == name
    page = (out / "p.html").read_text()
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


def test_sweep_to_stdout_and_all_catalog(kvplan_home):
    r = run("sweep", "--models", "all", "--gpu", "all", "--ctx", "4k", "--gpu-counts", "1", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    n_models, n_gpus = len({m for m in (row["model"] for row in doc["plans"])}), len(load_gpus())
    assert doc["plans_count"] == n_models * n_gpus and n_models >= 50  # tp=1 is always valid
    r = run("sweep", "--models", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k,32k", "--csv")
    assert r.exit_code == 0, r.output
    assert len(list(csv.DictReader(io.StringIO(r.stdout)))) == 2 * 4  # 2 contexts x GPU counts 1, 2, 4, 8


def test_sweep_terminal_table(kvplan_home):
    r = run("sweep", "--models", "qwen3-32b", "--gpu", "h100,h200", "--ctx", "8k", "--gpu-counts", "1,2")
    assert r.exit_code == 0, r.output
    assert "Best 4 of 4 plans" in r.stdout and "qwen3-32b" in r.stdout
    assert "4 plans (" in r.stderr and "ranked: fits first" in r.stderr


# --- atomic writes ---------------------------------------------------------------------------------

def test_atomic_write_leaves_nothing_half_written(tmp_path):
    target = tmp_path / "out.csv"

    def boom(stream):
        stream.write("rank,model\r\n1,half")
        raise RuntimeError("serialiser died")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert os.listdir(tmp_path) == []  # neither the file nor a temp file
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.csv"]
    atomic_write(target, "new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["out.csv"]


@pytest.mark.parametrize("exc, code", [(RuntimeError("disk on fire"), 1), (KeyboardInterrupt(), 130)])
def test_cli_write_failure_leaves_no_file(tmp_path, monkeypatch, kvplan_home, exc, code):
    import kvplan.cli.sweep_output
    import kvplan.report.export

    real = kvplan.report.export.write_csv

    def half(rows, stream, columns=None):
        real([next(iter(rows))], stream)  # some rows reach the temp file (rows stream now), then the serialiser dies
        raise exc

    monkeypatch.setattr(kvplan.cli.sweep_output, "write_csv", half)  # where `sweep -o` calls it
    r = run("sweep", "--models", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k,32k", "-o", tmp_path / "p.csv")
    assert r.exit_code == code and r.stderr.splitlines()[-1].startswith("Error: ")
    assert os.listdir(tmp_path) == ["kvplan-home"] or os.listdir(tmp_path) == []


# --- prices ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, needle", [
    ("h1000: 2.0\n", "key 'h1000': unknown GPU 'h1000'; did you mean"),
    ("h100: -1\n", "key 'h100': price must be a positive number"),
    ("h100: cheap\n", "got 'cheap'"),
    ("h100: true\n", "got True"),
    ("- h100\n", "expected a mapping"),
    ("h100: [1\n", "invalid YAML at line"),
    ("", "empty"),
    ("h100: 2\nh100-sxm: 3\n", "already priced 2"),
    ("h100: 2.49\nh100: 3.0\n", "key 'h100' is given twice (lines 1 and 2)"),  # YAML alone would keep 3.0
    ("currency: USD\nh100: 2.49\ncurrency: EUR\n", "key 'currency' is given twice (lines 1 and 3)"),
    ("currency: 5\n", "key 'currency'"),
])
def test_bad_price_files_are_one_line_errors(tmp_path, text, needle):
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(KvplanError) as err:
        load_prices(path)
    assert needle in err.value.message and str(path) in err.value.message and "\n" not in err.value.message


def test_yaml_merge_key_is_not_a_duplicate(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("base: &b {h100: 1.0}\n")  # a YAML anchor is fine; only keys written twice are refused
    with pytest.raises(KvplanError, match="key 'base': unknown GPU"):
        load_prices(path)
    from kvplan.hardware.gpus import load_yaml_strict

    assert load_yaml_strict("a: &x {k: 1, j: 2}\nb:\n  <<: *x\n  k: 3\n", "t") == {
        "a": {"k": 1, "j": 2}, "b": {"k": 3, "j": 2}}


def test_gpu_profile_with_a_key_twice_is_one_line_error(tmp_path):
    text = (REPO / "kvplan" / "hardware" / "profiles" / "h100-sxm.yaml").read_text()
    (tmp_path / "dup.yaml").write_text(text + "\nbandwidth_bytes_per_s: 1\n")  # silently the last one before
    with pytest.raises(KvplanError) as err:
        load_gpus([tmp_path])
    assert err.value.exit_code == 2 and "\n" not in err.value.message
    assert err.value.message.startswith(f"hw profile {tmp_path / 'dup.yaml'}: "
                                        "key 'bandwidth_bytes_per_s' is given twice")


def test_prices_resolve_aliases_and_profiles(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("currency: USD\nH100: 2.49\na100_80: 1\n4090: 0.4\n")
    book = load_prices(path)
    assert book.by_gpu == {"h100-sxm": 2.49, "a100-sxm-80": 1.0, "rtx-4090": 0.4} and book.currency == "USD"
    assert book.price(find_gpu("l40s")) is None  # nothing bundled, nothing invented
    assert all(g.price_per_hour is None for g in load_gpus().values())


def test_cli_bad_prices_and_inputs(tmp_path, kvplan_home):
    bad = tmp_path / "prices.yaml"
    bad.write_text("h100: free\n")
    base = ["sweep", "--models", "llama-3.1-8b", "--ctx", "8k"]
    one_line_error(run(*base, "--prices", bad), 2, "price must be a positive number")
    one_line_error(run(*base, "--prices", tmp_path / "nope.yaml"), 3, "does not exist")
    one_line_error(run(*base, "--gpu", "h1000"), 3, "did you mean")
    one_line_error(run(*base, "--gpu-counts", "0"), 2, "between 1 and")
    one_line_error(run(*base, "--kv-dtype", "fp7"), 2, "unknown KV cache dtype")
    one_line_error(run(*base, "-o", tmp_path / "no" / "dir.csv"), 2, "does not exist")
    one_line_error(run("sweep", "--models", "no-such-model-x", "--ctx", "8k"), 3, "unknown model")
    one_line_error(run("cheapest", "llama-3.1-8b", "--ctx", "8k", "--concurrency", "0"), 2, "between 1 and")
    one_line_error(run("cheapest", "llama-3.1-8b", "--concurrency", "4", "--min-tokens-per-second", "-3"), 2,
                   "positive number")


# --- cheapest --------------------------------------------------------------------------------------

def h100_profile_with_price(folder: Path, price: float) -> None:
    text = (REPO / "kvplan" / "hardware" / "profiles" / "h100-sxm.yaml").read_text()
    text = text.replace("key: h100-sxm", "key: rented-h100").replace("price_per_hour: null", f"price_per_hour: {price}")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("aliases:"))
    (folder / "rented.yaml").write_text(text + "\n")


def test_cheapest_ranks_by_cost(tmp_path, kvplan_home):
    prices = tmp_path / "prices.yaml"
    prices.write_text("h100: 2\nh200: 1\n")
    hw = tmp_path / "hw"
    hw.mkdir()
    h100_profile_with_price(hw, 1.5)  # a profile's own price_per_hour
    r = run("cheapest", "llama-3.1-8b", "--ctx", "8k", "--concurrency", "4", "--gpu", "h100,h200,a100-80,rented-h100",
            "--gpu-counts", "1,2", "--prices", prices, "--hw-profiles", hw, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    order = [(m["gpu"], m["gpus"], m["cost_per_hour"]) for m in doc["meets"]]
    # cost per hour = price x GPUs: h200 1x1 = 1, rented 1.5, h100 2 and h200 2x1 = 2 (fewer GPUs first),
    # rented 2 x 1.5 = 3, h100 2 x 2 = 4; a100 has no price: last, by GPU count.
    assert order == [("h200-sxm", 1, 1.0), ("rented-h100", 1, 1.5), ("h100-sxm", 1, 2.0), ("h200-sxm", 2, 2.0),
                     ("rented-h100", 2, 3.0), ("h100-sxm", 2, 4.0), ("a100-sxm-80", 1, None), ("a100-sxm-80", 2, None)]
    assert [m["rank"] for m in doc["meets"]] == list(range(1, 9)) and doc["fails"] == []
    assert all(m["max_concurrency"] >= 4 and m["batch"] == 4 for m in doc["meets"])


def test_cheapest_with_prices_searches_the_priced_gpus(tmp_path, kvplan_home):
    # Issue 15: a prices file names the GPUs one can rent; without --gpus those are the ones searched
    # (a profile's own price_per_hour counts too), and stderr says so. `--gpus all` searches every GPU.
    prices = tmp_path / "prices.yaml"
    prices.write_text("h100: 2\nl4: 0.5\n")
    hw = tmp_path / "hw"
    hw.mkdir()
    h100_profile_with_price(hw, 1.5)
    base = ("cheapest", "llama-3.1-8b", "--ctx", "8k", "--concurrency", "4", "--gpu-counts", "1,2",
            "--prices", prices, "--hw-profiles", hw, "--json")
    r = run(*base)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {m["gpu"] for m in doc["meets"] + doc["fails"]} == {"h100-sxm", "l4", "rented-h100"}
    assert "searching the 3 GPUs with a price" in r.stderr
    r = run(*base, "--gpu", "all")
    assert len({m["gpu"] for m in json.loads(r.stdout)["meets"]}) > 10


def test_cheapest_says_why_and_exits_6(kvplan_home):
    r = run("cheapest", "llama-3.1-70b", "--ctx", "128k", "--concurrency", "32", "--gpu", "h100,h200",
            "--gpu-counts", "1,2,4,8", "--json")
    assert r.exit_code == 6, r.output  # EXIT_DOES_NOT_FIT: nothing meets the target
    doc = json.loads(r.stdout)
    assert doc["meets"] == [] and len(doc["fails"]) == 8
    for f in doc["fails"]:
        if f["kv_memory_bytes_per_gpu"] <= 0:
            assert f["why"].startswith("doesn't fit: weights and overhead leave no KV memory")
        else:  # 5 GiB per sequence per GPU at tp 8 (see test_csv_read_back_equals_json)
            assert f["why"].startswith(f"doesn't fit: short by {32 - f['max_concurrency']} request")
    r = run("cheapest", "llama-3.1-70b", "--ctx", "128k", "--concurrency", "32", "--gpu", "h100,h200",
            "--gpu-counts", "1,2,4,8")
    assert r.exit_code == 6 and "No deployment meets the target" in r.stdout and "short by" in r.stdout


def test_cheapest_speed_floor_and_invalid_tp(kvplan_home):
    # gpt2: 12 heads and 12 layers, so 13 GPUs have no valid split; a floor of a million tokens/s per
    # request is unreachable.
    r = run("cheapest", "gpt2", "--ctx", "1k", "--concurrency", "2", "--gpu", "h100", "--gpu-counts", "13",
            "--json")
    one_line_error(r, 2, "no tp x pp split of 13 GPUs is valid")
    r = run("cheapest", "gpt2", "--ctx", "1k", "--concurrency", "2", "--gpu", "h100", "--gpu-counts", "1,8",
            "--min-tokens-per-second", "1e6", "--json")
    assert r.exit_code == 6, r.output
    fails = json.loads(r.stdout)["fails"]
    assert len(fails) == 2 and all(f["why"].startswith("too slow: ") and "< 1e+06" in f["why"] for f in fails)
    assert sorted((f["tp"], f["pp"]) for f in fails) == [(1, 1), (4, 2)]  # 8 GPUs: tp 8 cannot split 12 heads
    r = run("cheapest", "gpt2", "--ctx", "1k", "--concurrency", "2", "--gpu", "h100", "--gpu-counts", "1",
            "--min-tokens-per-second", "10", "--json")
    meets = json.loads(r.stdout)["meets"]
    assert r.exit_code == 0 and meets[0]["decode_tokens_per_second_per_request"] >= 10


# --- HTML (the browser test is tests/test_html_browser.py) ------------------------------------------

EVIL = '</script><script>document.body.dataset.pwned=1</script><img src=x onerror="alert(1)">=evil'


def evil_sweep():
    m = dataclasses.replace(spec("qwen3-8b"), name=EVIL)
    return sweep([m, spec("llama-3.1-8b")], [find_gpu("h100"), find_gpu("mi300x")], [1, 2], [8192, 32768],
                 ["bf16", "fp8"], prices={"h100-sxm": 2.0})


def test_html_is_self_contained_and_escaped():
    from kvplan.report.html import render_html, safe_json

    r = evil_sweep()
    page = render_html(sweep_rows(r), title="<b>t</b>", summary=[EVIL], currency="USD")
    assert "plotly.js v" in page and "Plotly.newPlot" in page  # plotly.js itself is inlined
    assert 'src="http' not in page and "src='http" not in page and "<link" not in page
    assert "<script src" not in page and "Content-Security-Policy" in page and "default-src 'none'" in page
    assert EVIL not in page and "<b>t</b>" not in page
    assert "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned=1" in page  # table and summary, as text
    data = safe_json({"name": EVIL})
    assert "<" not in data and ">" not in data and json.loads(data) == {"name": EVIL}
    assert page.count("<script") == 4  # error hook, plotly.js, the figures' JSON, the renderer: nothing else


def test_sweep_without_html_does_not_import_plotly(tmp_path):
    code = ("import sys; from typer.testing import CliRunner; from kvplan.cli import app; "
            "r = CliRunner().invoke(app, ['sweep', '--models', 'llama-3.1-8b', '--gpu', 'h100', '--ctx', '8k', "
            f"'-o', {str(tmp_path / 'p.csv')!r}]); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('plotly', 'torch', 'huggingface_hub') if m in sys.modules))")
    env = {**os.environ, "KVPLAN_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_html_via_cli(tmp_path, kvplan_home):
    out = tmp_path / "plan.html"
    r = run("sweep", "--models", "llama-3.1-8b,qwen3-8b", "--gpu", "h100,a100-80", "--ctx", "8k,32k",
            "-o", out, "--title", "Q3 <purchase>")
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert ("<title>Q3 &lt;purchase&gt;</title>" in page and 'id="chart-memory-0"' in page
            and "<table id=\"plans\">" in page)
    # one set of charts per model (two models here), a headline per model x context, filters for both
    assert 'id="chart-concurrency-1"' in page and 'id="chart-concurrency-2"' not in page
    assert page.count('<tr data-model="qwen3-8b" data-ctx="32768">') >= 2  # its headline and its plans
    assert '<select id="f-model">' in page and '<option value="32768">32k</option>' in page
    assert os.listdir(tmp_path) == ["kvplan-home", "plan.html"] or sorted(os.listdir(tmp_path)) == ["plan.html"]


# --- engines in sweep and cheapest ---------------------------------------------------------------


def test_sweep_with_an_engine_equals_fit_with_that_engine():
    r = run("sweep", "--models", "llama-3.1-8b,gemma-2-9b", "--gpu", "h100,l40s", "--ctx", "8k,32k",
            "--gpu-counts", "1,2", "--engine", "vllm", "--engine-version", "0.11.0", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["engine"] == "vllm 0.11.0" and len(doc["plans"]) == 2 * 2 * 2 * 2
    for row in doc["plans"]:
        f = run("fit", row["model"], "--gpu", row["gpu"], "--tp", row["tp"], "--pp", row["pp"], "--ctx", row["context"],
                "--engine", "vllm", "--engine-version", "0.11.0", "--json")
        one = json.loads(f.stdout)
        for key in ("kv_memory_bytes_per_gpu", "kv_cache_tokens", "max_concurrency", "max_context",
                    "gpu_memory_utilization", "block_size", "fits"):
            assert row[key] == one[key], (row["model"], row["gpu"], key)


def test_llama_cpp_sweeps_split_layers_and_the_engine_flags_are_checked():
    r = run("sweep", "--models", "llama-3.1-8b", "--gpu", "4090", "--ctx", "8k", "--gpu-counts", "2",
            "--engine", "llama.cpp", "--kv-dtype", "q8_0", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["plans"]
    assert (row["tp"], row["pp"]) == (1, 2)  # llama.cpp has no tensor parallelism: 2 GPUs = 2 layer ranges
    one_line_error(run("sweep", "--models", "gpt2", "--ctx", "1k", "--engine-version", "0.11.0"), 2, "need --engine")
    one_line_error(run("cheapest", "gpt2", "--concurrency", "2", "--engine", "vllm", "--engine-version", "9.0"),
                   2, "outside the modelled range")


def test_cheapest_with_an_engine():
    r = run("cheapest", "llama-3.1-8b", "--ctx", "32k", "--concurrency", "8", "--gpu", "h100,l40s",
            "--engine", "sglang", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    best = doc["meets"][0]
    f = run("fit", "llama-3.1-8b", "--gpu", best["gpu"], "--gpus", best["gpus"], "--ctx", "32k", "--batch", "8",
            "--engine", "sglang", "--json")
    assert json.loads(f.stdout)["max_concurrency"] == best["max_concurrency"] >= 8


def test_procurement_headline_per_model_and_context():
    from kvplan.planning.deploy import Deployment
    from kvplan.engines import resolve_engine
    from kvplan.planning.plan import Request
    from kvplan.compare.procurement import headlines

    plan = resolve_engine().plan

    gpus = [find_gpu("h100"), find_gpu("mi300x"), find_gpu("l4")]
    r = sweep([spec("llama-3.1-8b"), spec("llama-3.1-70b")], gpus, [1, 2, 4], [8192, 131072], ["bf16"], batch=4,
              prices={"h100-sxm": 2.0, "mi300x": 3.0})
    heads = {(h["model"], h["context"]): h for h in headlines(r, gpus)}
    assert len(heads) == 4
    h = heads[("llama-3.1-8b", 8192)]
    # Cheapest that fits 4 requests of 8k: one H100 at 2.0/h (the unpriced L4 is not a "cheapest").
    assert (h["gpu"], h["gpus"], h["cost_per_hour"]) == ("h100-sxm", 1, 2.0)
    assert h["cost_per_concurrent_user_hour"] == 2.0 / h["max_concurrency"]
    assert h["headroom"] == h["max_concurrency"] / 4
    full = plan(spec("llama-3.1-8b"), gpus[0], Deployment(1, 1),
                Request(context=8192, batch=h["max_concurrency"], kv_dtype=BF16))
    # per 1M output tokens = cost per hour / (tokens per hour with every slot decoding) x 10^6
    assert h["cost_per_million_output_tokens"] == pytest.approx(2.0 / (full.decode_tokens_per_second * 3600) * 1e6)
    big = heads[("llama-3.1-70b", 131072)]
    assert big["fits"] and big["cost_per_hour"] in (2.0 * big["gpus"], 3.0 * big["gpus"])


def test_headline_says_when_a_context_is_beyond_the_model():
    """Qwen3-32B's config allows 40,960 tokens (max_position_embeddings): at 128k no deployment
    can help, and the headline says that rather than "nothing fits"."""
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.hardware.gpus import find_gpu
    from kvplan.compare.procurement import headlines
    from kvplan.compare.sweep import sweep

    h100 = find_gpu("h100")
    result = sweep([find_in_catalog("qwen3-32b")], [h100], [1, 2], [8192, 131072])
    heads = {h["context"]: h for h in headlines(result, [h100])}
    assert heads[8192]["fits"] and "why" not in heads[8192]
    assert not heads[131072]["fits"]
    assert heads[131072]["why"] == "131,072 tokens is beyond the model's context limit (40,960 tokens)"
