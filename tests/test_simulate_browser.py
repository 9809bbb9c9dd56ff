"""The `simulate` HTML report in headless Chromium: its four charts render offline, and a hostile
title or model name stays text. Skips where Chromium is absent (see test_html_browser)."""

from __future__ import annotations

import re

import pytest

from test_html_browser import chromium, headless
from test_reports import EVIL


@pytest.fixture(scope="module")
def dom(tmp_path_factory):
    from kvplan.simulator.engine import EngineConfig
    from kvplan.report.simulation import render_html
    from kvplan.simulator.session import configs, run_all
    from kvplan.simulator.paper import opt13b_a100
    from kvplan.simulator.workload import WORKLOADS, generate

    browser = chromium()
    tmp = tmp_path_factory.mktemp("simbrowser")
    runs = run_all(opt13b_a100(), generate(WORKLOADS["sharegpt"], 2, 60, 0), configs(EngineConfig(), True), 2.0, 0.1)
    page = tmp / "sim.html"
    page.write_text(render_html({"model": EVIL}, {EVIL: runs["paged"], **runs}, title=EVIL), encoding="utf-8")
    cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run",
           f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0", "--window-size=1000,2000",
           "--virtual-time-budget=3000", "--dump-dom", page.as_uri()]
    out = headless(cmd)
    if "<html" not in out.stdout:
        pytest.skip(f"Chromium could not run here: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout, out.stderr


def test_charts_render_and_nothing_runs(dom):
    page, log = dom
    assert [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line] == []
    assert re.search(r'<div id="errors"></div>', page)
    for name in ("kv", "requests", "speed", "preemptions"):
        assert re.search(rf'id="chart-{name}".*?class="main-svg"', page, re.S), f"chart {name} was not drawn"
    assert "data-pwned" not in page and "<img" not in page
    assert EVIL.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in page
