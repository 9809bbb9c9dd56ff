"""A plan on a unified-memory GPU (GB10) says each assumption once: the plan's general note on the shared pool, or,
where the engine states its own (vLLM's start-up check against the OS's share, and the host growth it counts,
kvplan/engines/vllm/uma.py; SGLang's free memory at its pool's measurement, kvplan/engines/sglang/uma.py), the fact
alone beside them. The arithmetic is uma.py's and is not tested here."""

from __future__ import annotations

from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import UNIFIED, Request
from kvplan.sources.catalog import find_in_catalog

REFUSES = "refuses to start"  # vLLM's start-up check, which the general note no longer claims of every engine
GENERAL = "from which it subtracts nothing for what the OS"  # the general note: what the plan's budget leaves out


def _warnings(engine: str | None):
    plan = resolve_engine(engine).result(find_in_catalog("qwen3-8b"), find_gpu("gb10"), Deployment(1),
                                         Request(context=8192)).plan
    return plan.warnings


def test_vllm_states_the_start_up_check_once_and_the_fact_stays():
    said = _warnings("vllm")
    unified = [w for w in said if w.topic == UNIFIED]
    # the fact, vLLM's start-up check (os_memory), vLLM's host growth (host_growth): three different things
    assert len(unified) == 3, [w.message for w in said]
    assert sum("shared with the CPU and the OS" in w.message for w in said) == 1
    assert not any(REFUSES in w.message for w in said)  # the start-up check is vLLM's own line, with its numbers
    assert sum("os_memory=SIZE" in w.message for w in said) == 1
    assert sum("host_growth=SIZE" in w.message for w in said) == 1


def test_an_engine_without_rules_of_its_own_keeps_the_general_note():
    said = [w.message for w in _warnings(None)]
    assert sum(GENERAL in m for m in said) == 1, said
    assert not any(REFUSES in m for m in said)
    assert not any("os_memory=SIZE" in m for m in said)


def test_sglang_states_the_free_memory_its_pool_is_sized_from_once():
    # SGLang has no start-up check against the total (kvplan/engines/sglang/uma.py): the general note's start-up
    # sentence would be wrong for it, so its own line (the OS's share, os_memory) replaces it beside the fact
    said = _warnings("sglang")
    assert sum(w.topic == UNIFIED for w in said) == 2, [w.message for w in said]
    assert sum("shared with the CPU and the OS" in w.message for w in said) == 1
    assert not any(REFUSES in w.message for w in said)
    assert sum("os_memory=SIZE" in w.message for w in said) == 1


def test_fit_prints_each_unified_memory_line_once():
    # `fit` without --gpus makes the one-GPU plan and the smallest fit: both carry the same notes, printed once
    res = CliRunner().invoke(whole_app(), ["fit", "qwen3-8b", "--gpu", "gb10", "--ctx", "32k", "--engine", "vllm"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(lines) == len(set(lines))
    assert sum("unified memory" in ln for ln in lines) == 1
    assert not any(REFUSES in ln for ln in lines)


def test_sweep_and_cheapest_say_once_which_gpus_memory_is_an_assumption():
    # They print no plan's warnings (a sweep makes thousands): one line per GPU whose usable memory is shared (GB10)
    # or a tool's total (B300), none for a GPU whose profile holds torch's total (H100)
    runner = CliRunner()
    for args in (["sweep", "-m", "qwen3-8b", "-c", "32k", "-g", "gb10,h100,b300", "--gpu-counts", "1"],
                 ["cheapest", "qwen3-8b", "-n", "4", "-c", "32k", "-g", "gb10,h100,b300"]):
        res = runner.invoke(whole_app(), args)
        assert res.exit_code == 0, res.output
        lines = [ln for ln in res.stderr.splitlines() if "unified memory" in ln or "tool's device total" in ln]
        assert [ln.split()[2] for ln in lines] == ["gb10:", "b300:"], (args[0], lines)
