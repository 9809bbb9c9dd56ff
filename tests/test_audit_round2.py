"""What a second new-user audit of the CLI found wrong: each a refusal of an answer that did not hold, a unit or
label that misled, or a figure printed in a form nobody can read."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def run(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


def last_error(r, code: int, needle: str) -> str:
    """A refusal after notes on stderr: exit `code`, the last stderr line one `Error:` line, no traceback."""
    assert r.exit_code == code, (r.exit_code, r.output)
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: ") and needle in line and "Traceback" not in r.output, r.stderr
    return line


def test_find_rate_refuses_a_run_too_short_for_a_steady_state(kvplan_home):
    # The chat workload's outputs keep a request on an 8B model for seconds (its mean output is hundreds of tokens
    # at tens of ms a token): 5 s of arrivals end before the deployment fills, so any rate whose burst fits the
    # 256 running slots "met" the SLA (41.5 req/s here, where 300 s of arrivals find about 11). Refused: exit 2.
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--find-rate", "--duration", "5")
    line = last_error(r, 2, "no steady state")
    assert "a longer --duration" in line and "s of arrivals" in line


def test_find_rate_refuses_a_trace_that_is_one_burst(kvplan_home, tmp_path):
    # 40 requests of 900+ prompt tokens and 20 output tokens, rescaled to the rate tried: every rate up to the
    # search's ceiling (1 x 2^19 req/s) "met" the SLA, and 524,288 req/s was printed as the answer.
    rows = "".join(json.dumps({"timestamp": i * 200, "input_length": 900 + i, "output_length": 20}) + "\n"
                   for i in range(40))
    (tmp_path / "t.jsonl").write_text(rows)
    r = run("simulate", "llama-3.1-8b", "--gpu", "h100", "--trace", tmp_path / "t.jsonl", "--find-rate")
    line = last_error(r, 2, "no steady state")
    assert "more of the trace's requests" in line and "e+0" not in line  # 524,288, not 5.24e+05
