"""Each command's --help reads as prose at 80 columns: a paragraph's lines are filled to the terminal's width, not
broken where the docstring's source lines were (Rich keeps a paragraph's single line breaks; kvplan.cli.main.reflowed
joins them)."""

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import COMMANDS, reflowed, whole_app


def test_reflowed_joins_a_paragraphs_lines_and_keeps_paragraphs():
    assert reflowed("One line\n  and its rest.\n\nA second\nparagraph.") == \
        "One line and its rest.\n\nA second paragraph."


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_paragraphs_fill_80_columns(command):
    out = CliRunner().invoke(whole_app(), [command, "--help"], env={"COLUMNS": "80", "TERM": "dumb"}).output
    lines = out.split("\n")
    body = lines[:next(i for i, line in enumerate(lines) if line.lstrip().startswith(("╭", "+-")))]
    para: list[str] = []
    for line in [*body, ""]:
        if line.strip():
            para.append(line.rstrip())
            continue
        # every line of a paragraph but its last runs to within a long word of the width (80 less the margins)
        assert all(len(x) >= 60 for x in para[:-1]), (command, para)
        para = []
    assert max(map(len, lines)) <= 80


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_cuts_no_word_at_80_columns(command):
    # Rich ends a word wider than its help column with "…": at 80 columns fit's --allow-long-context named
    # "VLLM_ALLOW_LONG_MAX_MODEL_LEN…" and "SGLANG_ALLOW_OVERWRITE_LONGER…", --host "(kvplan/hardware/hosts/README…",
    # simulate's --engine "capacity_scheduler_policy=MAX…": a user could not read the name to type
    out = CliRunner().invoke(whole_app(), [command, "--help"], env={"COLUMNS": "80", "TERM": "dumb"}).output
    assert "…" not in out, [line for line in out.splitlines() if "…" in line]


@pytest.mark.parametrize("command", ["fit", "cheapest", "simulate", "disagg", "step-times", "validate"])
def test_every_command_taking_a_model_names_it_model_in_its_usage(command):
    # disagg and step-times spelt their own argument, which typer shows by the parameter's name: "[OPTIONS] model"
    out = CliRunner().invoke(whole_app(), [command, "--help"], env={"COLUMNS": "80", "TERM": "dumb"}).output
    assert f"{command} [OPTIONS] MODEL" in out and "[OPTIONS] model" not in out
