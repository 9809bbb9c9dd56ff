"""An engine's development build read as the release before the one it leads to (kvplan.engines.versions), and the
reading said on every command that takes an engine version (round 40's first hour: 0.20.1rc1.dev16 was read as
0.20.1 without a word).

The ordering is PEP 440's, checked against `packaging` (the reference implementation pip uses), not against kvplan:
X.Y.Z.devN and X.Y.ZrcN.devM sort below X.Y.Z. The corpus's club3090-46 log is the engine's own witness.
"""

from __future__ import annotations

import json

import pytest
from packaging.version import Version
from typer.testing import CliRunner

from conftest import LOG_CORPUS, corpus_index, corpus_record, training_log
from kvplan.engines.logparse import parse_log
from kvplan.engines.versions import parse_version, reading

CLUB46 = "club3090-46-qwen36-27b-dflash-2x4090"
# every threshold vLLM's rules compare a release with, written as releases (kvplan/engines/vllm, engines/*.py)
THRESHOLDS = ("0.8.5", "0.9.1", "0.11.0", "0.12.0", "0.14.0", "0.15.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0",
              "0.20.1", "0.25.0", "0.29.0")


def _dev_builds() -> list[str]:
    """The corpus's stated vLLM versions that are development builds of a release or of its release candidate."""
    out = set()
    for rec in corpus_index():
        v = str(rec.get("version") or "")
        if rec.get("engine") == "vllm" and ".dev" in v and ".post" not in v and Version(v).release[3:] == ():
            out.add(v)
    return sorted(out)


def test_the_corpus_holds_development_builds_to_read():
    # 0.20.1rc1.dev16 (club3090-46), 0.20.2rc1.dev9 (club3090-74..77), 0.29.1rc1.dev17 (spark-396), ...
    assert {"0.20.1rc1.dev16+g7a1eb8ac2", "0.20.2rc1.dev9+g01d4d1ad3"} <= set(_dev_builds())


@pytest.mark.parametrize("version", _dev_builds())
def test_a_development_build_meets_each_threshold_as_pep_440_orders_it(version):
    for t in THRESHOLDS:
        assert (parse_version(version) >= parse_version(t)) == (Version(version) >= Version(t)), (version, t)


def test_club3090_46s_build_prints_the_tokens_line_of_0_20_0_as_kvplan_now_reads_it():
    # The log: "GPU KV cache size: 67,728 tokens" and "Maximum concurrency for 180,000 tokens per request: 1.06x";
    # 67,728 / 180,000 = 0.376, not 1.06: the tokens line is not int(C x L), vLLM 0.20.1's form
    # (kv_cache_utils.py v0.20.1 L1706), so the build lacks that change; kvplan/engines/vllm/capacity.py gives the
    # older form at v <= (0, 20, 0)
    rec = corpus_record(CLUB46)
    rep = parse_log(training_log(CLUB46)).reported
    tokens, conc = int(rep["kv_cache_tokens"].value), rep["max_concurrency"].value
    assert (tokens, conc) == (67_728, 1.06) and abs(tokens / 180_000 - conc) > 0.5
    assert parse_version(rec["version"]) <= (0, 20, 0)


@pytest.mark.parametrize("version, expected", [
    ("0.20.1rc1.dev16+g7a1eb8ac2", (0, 20, 0)),  # 16 commits past the v0.20.1rc0 tag: before 0.20.1
    ("0.15.0rc2.dev46", (0, 14, 999)),  # before 0.15.0: the 0.14 series' last, whichever it is
    ("0.6.3.dev109", (0, 6, 2)),
    ("0.6.3.post2.dev308", (0, 6, 3)),  # on the way to 0.6.3.post2, after 0.6.3
    ("0.9.0.2.dev108+g71faa1880", (0, 9, 0)),  # a fork's fourth number: after 0.9.0
    ("v0.20.1rc1", (0, 20, 1)), ("1.3.0rc19", (1, 3, 0)), ("0.4.3.post4", (0, 4, 3)),  # numbered pre/post-releases
])
def test_parse_version_reads_a_build_suffix(version, expected):
    assert parse_version(version) == expected


def test_the_reading_is_said_only_where_the_version_is_not_a_plain_release():
    assert reading("vllm", "0.20.0") is None and reading("vllm", None) is None
    assert reading("llama.cpp", "2024-08") is None  # a named era, not a release number
    dev = reading("vllm", "0.15.0rc2.dev46")
    assert "before release 0.15.0" in dev and "(0.14.x)" in dev
    assert "read as release 0.5.9" in reading("sglang", "0.5.9rc0")


def _invoke(*args: str):
    from kvplan.cli import app

    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def _stderr(*args: str) -> str:
    return _invoke(*args).stderr


@pytest.mark.parametrize("command", [
    ("fit", "llama-3.1-8b-instruct", "--gpu", "h100", "--json"),
    ("sweep", "--models", "llama-3.1-8b-instruct", "--gpu", "h100", "--ctx", "8k"),
    ("cheapest", "llama-3.1-8b-instruct", "--ctx", "8k", "--concurrency", "4", "--gpu", "h100"),
    ("disagg", "llama-3.1-8b-instruct", "--gpu", "h100", "--isl", "2048", "--osl", "256"),
    ("simulate", "llama-3.1-8b-instruct", "--gpu", "h100", "--workload", "chat", "--qps", "1", "--duration", "5"),
])
def test_every_command_that_takes_an_engine_version_says_how_it_read_a_development_build(command):
    err = _stderr(*command, "--engine", "vllm", "--engine-version", "0.20.1rc1.dev16")
    assert "note: vllm 0.20.1rc1.dev16 is a development build made before release 0.20.1: modelled as the " \
           "release before it (0.20.0)" in err


def test_check_log_says_how_it_read_the_build_it_was_told():
    # club3090-46's log does not print its release (the issue's environment block states it): --engine-version
    rec = corpus_record(CLUB46)
    err = _stderr("check-log", str(LOG_CORPUS / rec["log"]), "--model", "qwen3.5-27b", "--gpu", "rtx-4090",
                  "--engine-version", rec["version"])
    assert "development build made before release 0.20.1" in err


def test_fit_json_carries_the_reading_and_a_plain_release_none():
    fit = ("fit", "llama-3.1-8b-instruct", "--gpu", "h100", "--engine", "vllm", "--json", "--engine-version")
    dev = json.loads(_invoke(*fit, "0.15.0rc2.dev46").stdout)["plans"][0]["engine"]
    assert "modelled as the release before it (0.14.x)" in dev["version_read"]
    assert "version_read" not in json.loads(_invoke(*fit, "0.15.0").stdout)["plans"][0]["engine"]


def test_a_build_is_read_as_pep_440_normalizes_it_whatever_its_case():
    # PEP 440 compares versions case-insensitively: 0.20.1RC1.DEV16 is 0.20.1rc1.dev16, below 0.20.1
    assert Version("0.20.1RC1.DEV16") < Version("0.20.1") and parse_version("V0.20.1RC1.DEV16+cu128") == (0, 20, 0)
    assert "before release 0.20.1" in reading("vllm", "0.20.1RC1.DEV16")
