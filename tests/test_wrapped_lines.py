"""Round 47, a new user's first hour: every line kvplan prints for people fits 80 columns in a pipe, broken between
words (kvplan.report.wrap); a model typed in words is named back as the catalog's; an empty or unreadable file is one
line. The suite runs with KVPLAN_WRAP=0 (conftest); these tests run the commands wrapped, as a user sees them."""

from __future__ import annotations

import importlib
import json
import os

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli.main import whole_app
from kvplan.report.wrap import fitted, terminal_width

WRAPPED = {"KVPLAN_WRAP": None, "COLUMNS": "80"}  # a pipe's width, as rich's tables have it
WHOLE = {"KVPLAN_WRAP": "0", "COLUMNS": "80"}


def test_a_long_note_breaks_between_words_never_inside_a_figure(monkeypatch):
    monkeypatch.delenv("KVPLAN_WRAP", raising=False)
    note = ("margin: at --gpu-memory-utilization 0.92 kvplan expects 35.13 GiB of KV per GPU; 1 x 131,072 tokens need "
            "10.00 GiB, 25.13 GiB (251%) to spare")
    # 124 characters: the first break is the last space within 40 columns ("...utilization 0.92" is 40 long, the
    # flag kept with its number); "10.00 GiB" would end at column 44 of the third line, so it moves down whole
    assert fitted(note, 40).split("\n") == [
        "margin: at --gpu-memory-utilization 0.92",
        "  kvplan expects 35.13 GiB of KV per",
        "  GPU; 1 x 131,072 tokens need",
        "  10.00 GiB, 25.13 GiB (251%) to spare",
    ]
    assert fitted(note, 200) == note  # a line that fits is left as it is
    # a word longer than the width (a path) keeps a line of its own, whole; an indented line's continuation is
    # two columns further in
    long = "/models/" + "x" * 50 + "/config.json"
    assert fitted(f"  note: read {long} here", 30).split("\n") == ["  note: read", f"    {long}", "    here"]
    monkeypatch.setenv("KVPLAN_WRAP", "0")
    assert fitted(note, 40) == note


def test_a_unit_per_gpu_stays_with_its_figure(monkeypatch):
    monkeypatch.delenv("KVPLAN_WRAP", raising=False)
    # "kvplan expects 40.00" is 20 columns: without the glue the break at 24 would leave "GiB/GPU" to the next line
    assert fitted("kvplan expects 40.00 GiB/GPU of KV", 24).split("\n") == ["kvplan expects", "  40.00 GiB/GPU of KV"]
    assert fitted("the link moves 900.0 GiB/s each way", 24).split("\n") == ["the link moves", "  900.0 GiB/s each way"]


@pytest.mark.parametrize("columns", [None, "100", "57"])
def test_the_width_is_the_tables_width(monkeypatch, columns):
    from rich.console import Console

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == Console().width == Console(stderr=True).width


README_RUNS = [  # the README's commands (and the two lines the brief measured: 182 and 577 characters before)
    ["fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k"],
    ["fit", "llama-3.1-70b", "--gpu", "h100", "--gpus", "4", "--ctx", "128k", "--emit", "vllm"],
    ["fit", "deepseek-v3", "--gpu", "h200", "--dp", "8", "--ep", "8", "--ctx", "32k", "--emit", "vllm"],
    ["fit", "qwen3.5-27b", "--gpu", "h200-sxm", "--engine", "sglang", "--ctx", "32k", "--emit", "sglang"],
    ["cheapest", "llama-3.1-8b", "--ctx", "8k", "-n", "4", "--engine", "sglang"],
    ["simulate", "llama-3.1-8b", "--gpu", "h100", "--workload", "chat", "--qps", "2", "--duration", "10"],
    ["sweep", "-m", "llama-3.1-70b,deepseek-v3", "--gpu", "h100,a100-80", "--ctx", "128k", "--engine", "vllm"],
    ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512", "--engine", "vllm"],
]


@pytest.mark.parametrize("args", README_RUNS, ids=lambda a: "-".join(a[:2]))
def test_every_line_fits_80_columns_and_says_what_one_line_said(args, kvplan_home):
    wrapped = CliRunner().invoke(whole_app(), args, env=WRAPPED)
    assert wrapped.exit_code in (0, 6), wrapped.output  # (6: cheapest's "no deployment meets the target")
    wide = [line for line in (wrapped.stdout + wrapped.stderr).splitlines() if len(line) > 80]
    assert wide == []
    whole = CliRunner().invoke(whole_app(), args, env=WHOLE)
    assert max(map(len, whole.stderr.splitlines())) > 80  # the notes it wraps (else this test tests nothing)
    # only spaces moved: the same words in the same order, none cut (a figure, a name, a flag)
    assert wrapped.stderr.split() == whole.stderr.split() and wrapped.stdout == whole.stdout


def test_an_error_stays_one_line_however_long(kvplan_home):
    r = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b", "--gpu", "h100", "--weight-dtype", "int3"], env=WRAPPED)
    assert len(one_line_error(r, 2, "unknown weight dtype 'int3'")) > 80


def _main(monkeypatch, capsys, *argv: str):
    cli_main = importlib.import_module("kvplan.cli.main")  # (kvplan.cli's `main` is the entry function)
    monkeypatch.setattr("sys.argv", ["kvplan", *argv])
    with pytest.raises(SystemExit) as info:
        cli_main.main()
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, said", [
    (("fit", "llama", "3.1", "8b"), "Error: Invalid value for 'MODEL': 3 words (llama 3.1 8b); a model name is one "
                                    "word (or quoted): did you mean llama-3.1-8b?"),  # before: Missing option '--gpu'
    (("fit", "Llama", "3.1", "8B", "Instruct", "--gpu", "h100"), "did you mean llama-3.1-8b-instruct?"),
    (("fit", "--gpu", "h100", "llama", "3", "70b", "--ctx", "8k"), "did you mean llama-3-70b?"),  # an alias
    (("simulate", "qwen3", "32b", "-g", "h100", "--workload", "chat"), "did you mean qwen3-32b?"),
    (("models", "show", "llama", "3.1", "8b"), "did you mean llama-3.1-8b?"),
    (("fit", "lama", "3.1", "8b", "-g", "h100"), "did you mean llama-3.1-8b, "),  # not a name: the nearest ones
    (("fit", "./my", "model/", "-g", "h100"), 'quote a path that has spaces: "./my model/"'),
])
def test_a_model_typed_in_words_is_named_back_as_the_catalogs(monkeypatch, capsys, kvplan_home, argv, said):
    err = _main(monkeypatch, capsys, *argv)
    command = " ".join(argv[:2] if argv[0] == "models" else argv[:1])
    assert err.startswith("Error: ") and said in err and err.endswith(f" {command} --help)")


def test_a_word_after_a_model_the_catalog_knows_is_an_extra_argument(monkeypatch, capsys, kvplan_home):
    err = _main(monkeypatch, capsys, "fit", "llama-3.1-8b", "--gpu", "h100", "extra")
    assert "unexpected extra argument" in err and "(extra)" in err and "words" not in err


@pytest.mark.parametrize("argv, extra", [
    (("fit", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "a100"), "(a100)"),  # after an option's value
    (("fit", "llama-3.1-8b", "--json", "a100", "--gpu", "h100"), "(a100)"),  # after a flag
    (("fit", "--gpu", "h100", "llama-3.1-8b", "--ctx", "8k", "8b"), "(8b)"),  # the option before MODEL
])
def test_a_word_not_next_to_the_model_is_an_extra_argument(monkeypatch, capsys, kvplan_home, argv, extra):
    # only the words typed directly after MODEL, before any option, are read as a name with spaces
    err = _main(monkeypatch, capsys, *argv)
    assert "unexpected extra argument" in err and extra in err and "words" not in err


def test_words_after_an_option_before_the_model_still_read_as_its_name(monkeypatch, capsys, kvplan_home):
    err = _main(monkeypatch, capsys, "fit", "--gpu", "h100", "llama", "3.1", "8b", "--ctx", "8k")
    assert "3 words (llama 3.1 8b)" in err and "did you mean llama-3.1-8b?" in err


def test_help_is_help_whatever_else_the_line_holds(monkeypatch, capsys):
    cli_main = importlib.import_module("kvplan.cli.main")
    monkeypatch.setattr("sys.argv", ["kvplan", "fit", "llama", "3.1", "8b", "--help"])
    with pytest.raises(SystemExit) as info:
        cli_main.main()
    out = capsys.readouterr()
    assert info.value.code == 0 and "Usage: " in out.out and "Error" not in out.err


@pytest.mark.parametrize("command", ["check-log", "check-bench"])
@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_file_is_said_empty(tmp_path, command, content):
    path = tmp_path / "result.json"
    path.write_text(content)
    kind = "a start-up log" if command == "check-log" else "a benchmark result"
    for extra in ([], ["--json"]):
        r = CliRunner().invoke(whole_app(), [command, str(path), *extra])
        assert one_line_error(r, 2, f"{path} is empty; give {kind} file") and r.stdout == ""


@pytest.mark.parametrize("args, said", [
    (["check-log", "{f}", "--model", "llama-3.1-8b", "--gpu", "h100"], "cannot read {f}: Permission denied"),
    (["check-bench", "{f}"], "cannot read {f}: Permission denied"),
    (["cheapest", "llama-3.1-8b", "--ctx", "8k", "-n", "4", "--prices", "{f}"], "{f}: cannot read: Permission denied"),
    (["simulate", "llama-3.1-8b", "-g", "h100", "--trace", "{f}"], "cannot read trace {f}: Permission denied"),
    (["fit", "{d}", "--gpu", "h100"], "config.json: Permission denied"),
])
def test_an_unreadable_file_is_one_line(tmp_path, monkeypatch, kvplan_home, args, said):
    # the open is refused as for a file of mode 000 (a test run as root reads any file, so the refusal is the
    # kernel's answer stood in for): one line naming the file, nothing on stdout, nothing written
    f, d = tmp_path / "secret.txt", tmp_path / "model"
    f.write_text("h100: 2.49\n")
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    denied = {str(f), str(d / "config.json")}
    real = os.open

    def refused(path, *a, **k):
        if str(path) in denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr("kvplan.core.capped.os.open", refused)  # (every reader of a user's file opens through it)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = CliRunner().invoke(whole_app(), [a.format(f=f, d=d) for a in args])
    assert one_line_error(r, r.exit_code, said.format(f=f)) and r.exit_code in (2, 3) and r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_model_in_words_is_a_usage_error_to_clicks_own_runner_too(kvplan_home):
    # (the standalone runner, as tests/test_fuzz.py drives it: an exception class Click's runner does not handle would
    # escape it as a crash)
    r = CliRunner().invoke(whole_app(), ["fit", "llama", "3.1", "8b", "--gpu", "h100"])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit) and "did you mean llama-3.1-8b?" in r.output
