"""A simulation's inputs refused alike by every front end (kvplan.simulator.inputs.check_workload_inputs).

Each bad input goes to every CLI command and Python API function that takes it; all must refuse it with exit
code 2 and the same one-line message once the CLI's flags are read as the API's keywords (`--slo-percent` is
`slo_percent`). Three copies of these checks once drifted apart in wording and range ("--slo-percent must be in
(0, 100]" beside "slo_percent must be between 0 and 100"); this test fails on any such drift.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

import kvplan.api as api
from conftest import one_line_error
from kvplan.cli import app
from kvplan.cli._common import flag
from kvplan.core.errors import KvplanError
from kvplan.simulator.inputs import check_workload_inputs

MODEL, GPU = "llama-3.1-8b", "h100"
SHARED = {"workload", "trace", "qps", "duration", "seed", "slo_ttft", "slo_tpot"}
# the inputs each front end takes, beyond what every one of them takes
CLI = {"simulate": {"slo_percent", "step_overhead", "max_num_seqs", "max_num_batched_tokens", "mode", "reserve"},
       "sweep": set(), "cheapest": {"slo_percent"},
       "disagg": {"slo_percent", "step_overhead", "max_num_seqs", "max_num_batched_tokens"}}
API = {"simulate": {"step_overhead", "max_num_seqs", "max_num_batched_tokens", "mode", "reserve"},
       "disagg": {"slo_percent", "step_overhead", "max_num_seqs", "max_num_batched_tokens"}}
CLI_HEAD = {"simulate": ["simulate", MODEL, "--gpu", GPU], "sweep": ["sweep", "--models", MODEL, "--ctx", "8k",
                                                                     "--gpu", GPU],
            "cheapest": ["cheapest", MODEL, "--concurrency", "4"], "disagg": ["disagg", MODEL, "--gpu", GPU]}

BAD = [  # one bad input each (two for the pair that excludes each other)
    {"workload": "chat", "trace": "x.csv"},
    {"qps": 0.0}, {"qps": 1e-300}, {"duration": 1e-9}, {"slo_ttft": 0.0}, {"slo_tpot": 1e7},
    {"seed": -1}, {"seed": 2**63 + 1}, {"slo_percent": 0.0}, {"slo_percent": 101.0},
    {"step_overhead": 2000.0}, {"max_num_seqs": 0}, {"max_num_seqs": 1_000_001},
    {"max_num_batched_tokens": 0}, {"max_num_batched_tokens": 2**24 + 1},
    {"mode": "static"}, {"reserve": "half"},
]


def _as_keywords(line: str) -> str:
    """A CLI message with each flag written as its API keyword (--slo-percent: slo_percent)."""
    return re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), line.removeprefix("Error: "))


def _cli(command: str, bad: dict) -> str:
    args = [*CLI_HEAD[command], *[x for k, v in bad.items() for x in (flag(k), str(v))]]
    return _as_keywords(one_line_error(CliRunner().invoke(app, args), 2))


def _api(function: str, bad: dict) -> str:
    with pytest.raises(KvplanError) as e:
        getattr(api, function)(MODEL, GPU, **bad)
    assert e.value.exit_code == 2 and e.value.param in bad, (e.value.param, bad)
    return e.value.message


@pytest.mark.parametrize("bad", BAD, ids=lambda b: "-".join(f"{k}={v}" for k, v in b.items()))
def test_every_front_end_refuses_alike(bad, kvplan_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    said = {f"cli {c}": _cli(c, bad) for c, extra in CLI.items() if set(bad) <= SHARED | extra}
    said |= {f"api {f}": _api(f, bad) for f, extra in API.items() if set(bad) <= SHARED | extra}
    assert any(k.startswith("cli") for k in said) and any(k.startswith("api") for k in said), said
    assert len(set(said.values())) == 1, said
    with pytest.raises(KvplanError) as e:  # the one check says it, by keyword
        check_workload_inputs(**bad)
    assert e.value.message in said.values() and all(k in e.value.message for k in bad if k != "workload")


def test_inputs_not_given_are_not_checked():
    check_workload_inputs()
    check_workload_inputs(seed=0, slo_percent=100.0, max_num_seqs=1, max_num_batched_tokens=2**24, mode="paged",
                          reserve="max", step_overhead=0.0)
