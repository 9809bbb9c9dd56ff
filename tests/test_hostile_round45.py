"""Round 45: hostile and malformed input at every file-reading entry point, end to end through the CLI.

Each case failed before its fix: an integer past a float's range (JSON carries 10**400 exactly) was an internal
OverflowError in check-bench's figures and simulate's trace fields; a 50 MB log took check-log 10-30 s (under its 64
MiB cap) where a start-up log is tens of KB; a file with a byte-order mark (an editor's UTF-8 one, the UTF-16LE that
PowerShell 5's `>` writes) was "not a benchmark result" or "not a ... start-up log"; a llama-bench or AIPerf CSV with
an old Mac's lone-CR line ends, or a field past the csv module's 128 KiB limit, was an internal csv.Error; a trace
given as a pipe (`--trace <(xzcat t.jsonl.xz)`) was an internal "not seekable" error, and a FIFO no writer holds
open hung simulate in open().
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.bench import detect
from kvplan.cli.main import whole_app
from kvplan.core.errors import KvplanError
from kvplan.simulator import traces
from kvplan.simulator.traces import load_trace

runner = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "bench"
VLLM = FIX / "vllm-l40s-llama32-3b-10qps.json"
HUGE = "1" + "0" * 400  # JSON's integers are exact: json.loads gives int 10**400, which float() cannot hold


# --- an integer past a float's range ---------------------------------------------------------------------------

def test_a_huge_integer_figure_is_left_out_and_said(tmp_path):
    # mean_ttft_ms 10**400 is no measurement: left out (the median still read) and named, as NaN or -5 are
    text = VLLM.read_text().replace('"mean_ttft_ms": ', f'"mean_ttft_ms": {HUGE}, "was": ', 1)
    (run,) = detect.read_runs(text)
    assert run.metrics["ttft"].mean is None and run.metrics["ttft"].median is not None
    (tmp_path / "r.json").write_text(text)
    r = runner.invoke(whole_app(), ["check-bench", str(tmp_path / "r.json"), "--json"])
    assert r.exit_code == 0, r.output
    assert "left out" in r.stderr and "internal error" not in r.output


def test_a_huge_integer_setting_is_not_believed(tmp_path):
    doc = json.loads(VLLM.read_text())
    text = json.dumps(doc).replace(f'"num_prompts": {doc["num_prompts"]}', f'"num_prompts": {HUGE}')
    (run,) = detect.read_runs(text)
    assert run.settings.num_prompts == doc["completed"]  # falls back to `completed`, as for any bad count


@pytest.mark.parametrize("field, needle", [
    ("input_tokens", "input_tokens must be a whole number of tokens between 0 and 16,777,216"),
    ("arrival", "0000' is not finite"),  # the value as given, its first 40 characters
])
@pytest.mark.parametrize("sign", ["", "-"])
def test_a_huge_integer_in_a_trace_is_one_line(kvplan_home, tmp_path, field, needle, sign):
    record = {"arrival": 0, "input_tokens": 10, "output_tokens": 5}
    text = json.dumps(record).replace(f'"{field}": {record[field]}', f'"{field}": {sign}{HUGE}')
    (tmp_path / "t.jsonl").write_text(text + "\n")
    r = runner.invoke(whole_app(), ["simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", str(tmp_path / "t.jsonl")])
    one_line_error(r, 2, needle)


# --- check-log: a file far larger than any start-up log --------------------------------------------------------

def test_a_log_past_sixteen_mib_is_refused_at_once(tmp_path):
    # Before: read and parsed under the 64 MiB cap, ~0.25 s of CPU a MiB (13 s for 50 MB on one line). Now one past
    # 16 MiB (round 46: parsing ~0.07 s a MiB, tests/test_logscan.py) is refused before parsing; CPU time, as
    # tests/test_hostile_inputs.py measures (a shared box stretches wall)
    log = tmp_path / "big.log"
    log.write_bytes(b"INFO vLLM GPU KV cache size: 1 tokens\n" + b"a" * (16 * 2**20))
    start = time.process_time()
    r = runner.invoke(whole_app(), ["check-log", str(log)])
    one_line_error(r, 2, f"larger than 16 MiB; not a start-up log (keep its start: head -c 1M {log} > start.log)")
    assert time.process_time() - start < 1.0


# --- a byte-order mark: UTF-8's dropped, UTF-16's decoded ------------------------------------------------------

def _bench_json(path: Path) -> dict:
    r = runner.invoke(whole_app(), ["check-bench", str(path), "--gpu", "h100", "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["runs"]


@pytest.mark.parametrize("name", ["vllm-l40s-llama32-3b-10qps.json", "vllm-report-gemma3-27b.txt"])
@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-be"])
def test_a_bench_file_with_a_byte_order_mark_reads_as_without(tmp_path, name, encoding):
    marked = tmp_path / name
    marked.write_bytes((FIX / name).read_text().encode(encoding))  # utf-16 writes its mark; -be needs one added
    if encoding == "utf-16-be":
        marked.write_bytes(b"\xfe\xff" + marked.read_bytes())
    assert _bench_json(marked) == _bench_json(FIX / name)


def test_a_utf16_log_reads_as_its_utf8(tmp_path):
    log = Path(__file__).parent / "fixtures" / "logs" / "vllm_v1_aiperf449.log"
    (tmp_path / "l.log").write_bytes(log.read_text().encode("utf-16"))
    runs = [runner.invoke(whole_app(), ["check-log", str(p), "--json"]) for p in (tmp_path / "l.log", log)]
    assert runs[0].exit_code == runs[1].exit_code == 0, runs[0].output
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout)


# --- CSV: lone-CR line ends read; a field the csv module refuses is one line -----------------------------------

CSV_FLAGS = {"llama-bench-qwen25-7b-rtx4080.csv": ["--gpu", "rtx-4090"],
             "aiperf-gpt-oss-20b.csv": ["--model", "gpt-oss-20b", "--gpu", "l40s", "--input-len", "550",
                                        "--output-len", "100"]}


@pytest.mark.parametrize("name", sorted(CSV_FLAGS))
def test_a_csv_with_lone_cr_line_ends_reads_as_with_newlines(tmp_path, name):
    cr = tmp_path / name
    cr.write_bytes((FIX / name).read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    got = [runner.invoke(whole_app(), ["check-bench", str(p), *CSV_FLAGS[name], "--json"]) for p in (cr, FIX / name)]
    assert got[0].exit_code == got[1].exit_code == 0, got[0].output
    assert json.loads(got[0].stdout)["runs"] == json.loads(got[1].stdout)["runs"]


@pytest.mark.parametrize("name", sorted(CSV_FLAGS))
def test_a_csv_field_past_the_csv_modules_limit_is_one_line(tmp_path, name):
    lines = (FIX / name).read_text().splitlines()
    (tmp_path / name).write_text("\n".join([lines[0], "x" * 200_000 + "," + lines[1]]) + "\n")
    r = runner.invoke(whole_app(), ["check-bench", str(tmp_path / name), *CSV_FLAGS[name]])
    one_line_error(r, 2, "CSV: not a CSV kvplan reads (field larger than field limit")


# --- simulate --trace from a pipe, and a FIFO nobody writes ----------------------------------------------------

TRACE = Path(__file__).parent / "fixtures" / "traces" / "bailian_schema_40.jsonl"


def _fed(data: bytes) -> int:
    read, write = os.pipe()  # /dev/fd/N of a pipe with its writer open: what bash's <(...) gives
    threading.Thread(target=lambda: (os.write(write, data), os.close(write)), daemon=True).start()
    return read


def test_a_trace_through_a_pipe_reads_as_the_file():
    read = _fed(TRACE.read_bytes())
    try:
        assert load_trace(f"/dev/fd/{read}") == load_trace(str(TRACE))
    finally:
        os.close(read)


def test_a_fifo_no_writer_holds_is_refused_not_waited_on_for_ever(tmp_path, monkeypatch):
    # round 46: a FIFO is waited on for its writer (tests/test_hostile_round46.py), up to traces.FIFO_WAIT_S (30 s;
    # 0.3 here), then refused in one line: still no hang
    monkeypatch.setattr(traces, "FIFO_WAIT_S", 0.3)
    fifo = tmp_path / "t.csv"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(runner.invoke(
        whole_app(), ["simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", str(fifo)])), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # before: blocked in open() until a writer came; be that writer, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
    assert got, "simulate waited on the FIFO"
    one_line_error(got[0], 2, "nothing came through the pipe in 0.3 s (no writer opened it); start its writer first")


# --- several outputs: all written, or none ------------------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here to fail a write")
@pytest.mark.parametrize("command", [
    ["sweep", "--models", "gpt2", "--gpu", "t4", "--ctx", "1k"],
    ["simulate", "llama-3.1-8b", "--gpu", "h100", "--duration", "2"],
])
def test_a_second_output_failing_leaves_no_first_one(tmp_path, command):
    # Before: a.csv was renamed into place, then x.json (a link to /dev/full) failed with "No space left": exit 1
    # with half the outputs on disk. Now every output is written to its temporary file first and renamed only when
    # all are written, so nothing lands; the folder holds only the link.
    (tmp_path / "x.json").symlink_to("/dev/full")
    r = runner.invoke(whole_app(), command + ["-o", str(tmp_path / "a.csv"), "-o", str(tmp_path / "x.json")])
    assert r.exit_code != 0 and "No space left" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_a_pipe_past_the_file_cap_is_refused(monkeypatch):
    # a pipe has no size to check up front: an endless one (`<(yes "")` after a JSON line) read past the cap is
    # refused, not read for ever. Cap lowered to 1,000 characters: one record, then 2,000 one-character blank lines
    monkeypatch.setattr(traces, "MAX_FILE_BYTES", 1000)
    read = _fed(TRACE.read_bytes().splitlines(keepends=True)[0] + b"\n" * 2000)
    try:
        with pytest.raises(KvplanError, match="runs past"):
            load_trace(f"/dev/fd/{read}")
    finally:
        os.close(read)
