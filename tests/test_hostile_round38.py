"""Round 38: hostile inputs to what round 37 changed (check-log, --overhead, unified-memory GPUs and their engine
options), each failing before its fix by being read silently as something else.

* check-log took `--model ""`, `--gpu ""` and `--engine-version ""` for "not given" (the log's own), planned a
  `--tp 100000` (fit refuses past 4,096, and the log's own tp is refused past it too: kvplan.engines.logrecord),
  and never looked at a `--hw-profiles` folder unless --gpu was given (fit refuses a missing one).
* A unified-memory option past the profile's whole memory was planned: os_memory=500GiB on a GB10 (121.69 GiB,
  gb10.yaml memory_usable_bytes 130,663,055,360 B) gave a negative MemAvailable and a start-up refusal; the OS,
  its page cache and the GPU share that memory, so no share of it can be larger. In a sweep that refusal, raised
  for the GB10 alone, skipped every GPU's plans at the count; now only the GB10's.
* `--engine-opt os_memory=10GiB --engine-opt os_memory=20GiB` planned 20 GiB unsaid (the last one won).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import REPO, one_line_error
from kvplan.cli import app

runner = CliRunner()
LOG = REPO / "tests" / "fixtures" / "logs" / "vllm_v1_aiperf449.log"
GB10_TOTAL = 130_663_055_360  # 124,610 MiB x 1,048,576 B (gb10.yaml)


@pytest.mark.parametrize("flags, code, needle", [
    (["--tp", "100000"], 2, "--tp must be between 1 and 4,096, got 100000"),
    (["--tp", "0"], 2, "--tp must be between 1 and 4,096, got 0"),
    (["--model", ""], 2, "model name is empty"),
    (["--gpu", ""], 3, "unknown GPU ''"),  # not found, as fit's --gpu ""
    (["--engine-version", ""], 2, "--engine-version is empty"),  # " " was refused already (check_version)
    (["--hw-profiles", "/nonexistent-kvplan-profiles"], 3, "hw profiles directory '/nonexistent-kvplan-profiles'"),
])
def test_check_log_refuses_what_it_took_for_not_given(flags, code, needle, kvplan_home):
    r = runner.invoke(app, ["check-log", str(LOG), *flags])
    one_line_error(r, code, needle)
    assert r.stdout == ""  # nothing half-printed before the refusal


def test_check_log_still_reads_the_log_at_the_bounds(kvplan_home):
    r = runner.invoke(app, ["check-log", str(LOG), "--tp", "4096", "--json"])
    assert r.exit_code == 0, r.output
    assert "tp 4096 (given)" in " ".join(json.loads(r.stdout)["notes"])


# each engine's unified-memory options (kvplan.engines.*.uma)
SHARES = [("vllm", "os_memory"), ("vllm", "page_cache"), ("vllm", "host_growth"), ("sglang", "os_memory"),
          ("sglang", "page_cache"), ("trtllm", "os_memory"), ("trtllm", "page_cache"), ("llama.cpp", "os_memory")]


@pytest.mark.parametrize("engine, option", SHARES)
def test_a_unified_share_past_the_whole_memory_is_refused(engine, option, kvplan_home):
    # 122 GiB = 130,996,502,528 B > 130,663,055,360 B (refused); 121 GiB = 129,922,760,704 B < it (planned)
    assert 121 * 2**30 < GB10_TOTAL < 122 * 2**30
    args = ["fit", "llama-3.1-8b", "--gpu", "gb10", "--ctx", "8k", "--engine", engine, "--engine-opt"]
    r = runner.invoke(app, [*args, f"{option}=122GiB"])
    assert r.exit_code == 2 and r.stdout == "" and "Traceback" not in r.output, r.output
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error")]
    assert errors == [f"Error: --engine-opt {option} 122GiB is more than the whole memory of GPU profile 'gb10' "
                      "(121.69 GiB, shared by the OS and the GPU)"]
    assert r.stderr.splitlines()[-1] == errors[0]  # after fit's model line, nothing but the refusal
    assert runner.invoke(app, [*args, f"{option}=121GiB"]).exit_code == 0


def test_a_discrete_gpu_ignores_the_share_and_is_not_bounded_by_it(kvplan_home):
    r = runner.invoke(app, ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm",
                            "--engine-opt", "os_memory=500GiB"])
    assert r.exit_code == 0, r.output
    assert "os_memory ignored: GPU profile 'h100-sxm' is not unified memory" in r.stderr


def test_a_sweep_skips_only_the_gpu_the_share_does_not_fit(tmp_path, kvplan_home):
    out = tmp_path / "p.csv"
    r = runner.invoke(app, ["sweep", "-m", "llama-3.1-8b", "-g", "gb10,h100", "-c", "8k,32k", "--gpu-counts", "1",
                            "--engine", "vllm", "--engine-opt", "os_memory=123GiB", "-o", str(out), "--top", "0"])
    assert r.exit_code == 0, r.output
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 2 and all(",h100-sxm," in row for row in rows)  # both contexts on the H100 (was: none)
    assert "skipped, --engine-opt os_memory 123GiB is more than the whole memory of GPU profile 'gb10'" in r.stderr
    assert "(2 plans)" in r.stderr  # the GB10's two contexts, not the H100's


def test_an_engine_option_given_twice_with_two_values_is_refused(kvplan_home):
    args = ["fit", "llama-3.1-8b", "--gpu", "gb10", "--ctx", "8k", "--engine", "vllm"]
    r = runner.invoke(app, [*args, "--engine-opt", "os_memory=10GiB", "--engine-opt", "os_memory=20GiB"])
    one_line_error(r, 2, "--engine-opt os_memory is given twice, '10GiB' and '20GiB': give one")
    assert r.stdout == ""
    same = runner.invoke(app, [*args, "--engine-opt", "os_memory=10GiB", "--engine-opt", "os-memory=10GiB"])
    assert same.exit_code == 0, same.output  # one value, said twice (the dash spelling is the same key)
