"""kvplan.cli._common's shared helpers and kvplan.cli.engine_flags: the engine flags as one configured
engine, one progress bar, plan warnings worded at the edge, and --speculative checked against the engine."""

import io

import pytest

from kvplan.cli import _common, engine_flags
from kvplan.core.errors import KvplanError, inputs_named


def test_engine_flags_make_the_same_engine_for_every_command():
    engine, gmu = engine_flags.engine_from_flags("vLLM", "0.11.0", ["max_num_seqs=64"], "0.8", 32)
    assert (engine.name, engine.version, engine.opts, gmu) == ("vllm", "0.11.0", {"max_num_seqs": "64"}, 0.8)
    assert engine.explicit == {"gpu_memory_utilization": 0.8, "block_size": 32}
    neutral, gmu = engine_flags.engine_from_flags(None, None, None, None, None)
    assert neutral.name == "kvplan" and gmu is None


@pytest.mark.parametrize("args, needle", [
    ((None, "0.11.0", None, None, None), "--engine-version and --engine-opt need --engine"),
    (("vllm", None, None, None, 0), "--block-size must be between 1 and 4,096"),
    (("vllm", None, None, "1.5", None), "--gpu-memory-utilization"),
    (("sglang", None, None, None, None, "vllm"), "--emit vllm does not match --engine sglang"),
    ((None, None, None, None, None, "trtllm"), "--emit supports"),
])
def test_engine_flag_errors_are_one_line(args, needle):
    with inputs_named(_common.flag), pytest.raises(KvplanError) as err:  # as a command (cli_errors) names inputs
        engine_flags.engine_from_flags(*args)
    assert needle in err.value.message and "\n" not in err.value.message


def test_the_progress_bar_shows_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())  # a pipe: no bar, the work runs without one
    with _common.progress_bar("planning", 10) as bar:
        assert bar is None

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stderr", Tty())
    with _common.progress_bar("planning", 10, show=False) as bar:
        assert bar is None
    with _common.progress_bar("planning", 10, eta=True) as bar:
        bar.advance(3)
        bar.done(7, 10)
        (task,) = bar._bar.tasks
        assert (task.completed, task.total) == (7, 10)


def test_plan_warnings_are_data_worded_at_the_edge():
    """The core keeps byte integers; the text (GiB, thousands separators) is made in kvplan.report.text."""
    from kvplan.planning.plan import PlanWarning
    from kvplan.report.text import format_warning

    w = PlanWarning("weights + overhead + the given KV budget ({}) exceed the GPU's usable memory ({})",
                    (3 * 2**30, 80 * 2**30), ("GiB", "GiB"))
    assert format_warning(w) == ("weights + overhead + the given KV budget (3.00 GiB) exceed the GPU's usable "
                                 "memory (80.00 GiB)")
    assert format_warning(PlanWarning("context {} exceeds ({})", (40960, 32768), ("count", "count"))) == \
        "context 40,960 exceeds (32,768)"


@pytest.mark.parametrize("args, needle", [
    (("sweep", "--models", "deepseek-v3", "--gpu", "h200", "--gpu-counts", "8", "--ctx", "8k", "--engine", "sglang",
      "--speculative", "mtp"), "--speculative with --engine sglang"),
    (("cheapest", "deepseek-v3", "--gpu", "h200", "--ctx", "8k", "--concurrency", "4", "--engine", "trtllm",
      "--speculative", "mtp"), "--speculative with --engine trtllm"),
    (("simulate", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--max-model-len", "8k", "--engine", "llama.cpp",
      "--speculative", "ngram:3"), "--speculative with --engine llama.cpp"),
    # vLLM serves draft models from 0.15.0 (kvplan.engines.vllm.speculative.check_vllm): a release check from the flag
    # alone
    (("cheapest", "llama-3.1-70b", "--gpu", "h100", "--ctx", "8k", "--concurrency", "4", "--engine", "vllm",
      "--engine-version", "0.11.0", "--speculative", "draft:llama-3.2-1b-instruct:4"),
     "serves draft models from 0.15.0"),
])
def test_a_drafter_the_engine_does_not_model_is_a_usage_error_in_every_command(kvplan_home, args, needle):
    """--speculative goes through the configured engine (Engine.check_speculative) before any model is
    read: a usage error, not every deployment 'skipped' or 'failing' (exit 6)."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("Error: ") and needle in r.stderr and r.stdout == ""
    assert "model:" not in r.stderr  # refused before the model was looked up


def test_an_option_group_is_its_flags_in_place_and_arrives_built():
    # kvplan.cli._common.grouped: the group's fields are options where the group stands (help and order), and the
    # command gets one HubFlags built from what was typed; a flag left out takes the field's default.
    import typer
    from typer.testing import CliRunner

    got = []
    app = typer.Typer()

    @app.command()
    @_common.cli_errors
    @_common.grouped
    def probe(first: _common.JsonOpt = False, hub: _common.HubFlags = _common.HubFlags(),
              last: _common.PricesOpt = None):
        got.append((first, hub, last))

    help_text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    assert [help_text.index(f) for f in ("--json", "--revision", "--token", "--timeout", "--prices")] == sorted(
        help_text.index(f) for f in ("--json", "--revision", "--token", "--timeout", "--prices"))
    assert "Hub revision (branch, tag or commit)" in help_text
    result = CliRunner().invoke(app, ["--revision", "v1", "--timeout", "3"])
    assert result.exit_code == 0, result.output
    assert got == [(False, _common.HubFlags(revision="v1", token=None, timeout=3.0), None)]
    bad = CliRunner().invoke(app, ["--timeout", "soon"])
    assert bad.exit_code == 2 and "--timeout" in bad.output  # typer's own check of the field's type
