"""The HTML report in a real headless Chromium (Debian's package): it renders, offline, safely.

One browser run (a few seconds) loads a report whose model name is a script-injection attempt,
dumps the DOM after the scripts ran and takes a screenshot. Skips, saying why, where Chromium
is not installed (scripts/test.sh installs it with apt-get).
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from test_reports import EVIL, evil_sweep

WIDTH, HEIGHT = 1000, 1400
# Wall-clock seconds one Chromium run may take. The page's own work is bounded in virtual time
# (--virtual-time-budget=3000: plotly draws, then the DOM is dumped), so the wall clock only waits on a busy machine: a
# run takes 2-5 s alone and passed 120 s with several full suites at once. Past this it is a hang, and the test fails.
BROWSER_TIMEOUT_S = int(os.environ.get("KVPLAN_BROWSER_TIMEOUT", "300"))


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium; scripts/test.sh does it as root); "
                "the HTML report's browser test cannot run")


def headless(cmd: list[str]) -> subprocess.CompletedProcess:
    """`cmd` (a Chromium command line) run to its end, or failed after BROWSER_TIMEOUT_S. Chromium runs in a session
    of its own, and a run past the limit is killed with its whole process group: its renderer and GPU children hold
    the output pipes, so killing the browser alone (subprocess.run's timeout) would leave the test waiting on them."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=BROWSER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"Chromium did not finish within {BROWSER_TIMEOUT_S} s (KVPLAN_BROWSER_TIMEOUT)")
        finally:
            try:  # a child left behind after the browser exited (none, normally)
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_a_run_past_the_limit_fails_and_leaves_no_child(monkeypatch, tmp_path):
    # a "browser" whose child holds the output pipe open (as Chromium's renderer does) and never ends: the run fails
    # at the limit (5 s here: time for a loaded machine to start the shell and its child) rather than waiting, and
    # the child is gone with its group
    monkeypatch.setattr(sys.modules[__name__], "BROWSER_TIMEOUT_S", 5)
    pid_file = tmp_path / "child"
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="did not finish within 5 s"):
        headless(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"])
    assert time.monotonic() - start < 30  # not the child's 60 s: the group was killed, not the shell alone
    child = int(pid_file.read_text())
    try:
        os.kill(child, 0)
        gone = Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"  # a zombie waiting for init counts as gone
    except ProcessLookupError:
        gone = True
    assert gone


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    from kvplan.report.html import render_html
    from kvplan.report.export import sweep_rows

    browser = chromium()
    tmp = tmp_path_factory.mktemp("browser")
    page = tmp / "report.html"
    from kvplan.hardware.gpus import find_gpu
    from kvplan.compare.procurement import headlines

    result = evil_sweep()
    rows = sweep_rows(result)
    heads = headlines(result, [find_gpu("h100"), find_gpu("mi300x")])
    page.write_text(render_html(rows, title="browser test", summary=[EVIL], currency="USD", headlines=heads),
                    encoding="utf-8")
    shot = tmp / "shot.png"
    cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
           "--no-first-run", f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0",
           f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=3000",
           "--dump-dom", f"--screenshot={shot}", page.as_uri()]
    out = headless(cmd)
    # the same page opened with a filter in its link: only llama-3.1-8b at 32k shown
    filtered = headless([c for c in cmd if not c.startswith("--screenshot")][:-1]
                        + [page.as_uri() + "#model=llama-3.1-8b&ctx=32768"])
    if not shot.exists() and "<html" not in out.stdout:
        pytest.skip(f"Chromium could not run here: {out.stderr.strip().splitlines()[-1:]}")
    return {"dom": out.stdout, "log": out.stderr, "png": shot, "rows": rows, "heads": heads,
            "filtered": filtered.stdout}


def test_no_console_errors(loaded):
    console = [line for line in loaded["log"].splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []  # the page logs nothing; an exception or a CSP violation would show here
    errors = re.search(r'<div id="errors">(.*?)</div>', loaded["dom"], re.S)
    assert errors is not None and errors.group(1) == ""  # the page's own window.onerror hook


def test_charts_rendered(loaded):
    dom = loaded["dom"]
    # plotly draws each figure as an SVG with class main-svg (two per chart: plot and hover layers)
    for model in (0, 1):  # one set of charts per model
        for name in ("memory", "concurrency", "cost", "decode"):
            block = re.search(rf'id="chart-{name}-{model}".*?class="main-svg"', dom, re.S)
            assert block is not None, f"chart {name} of model {model} was not drawn"
    assert dom.count('class="main-svg"') >= 16
    assert dom.count('class="point"') >= 20  # bars


def test_table_present_and_name_is_text(loaded):
    dom = loaded["dom"]
    table = re.search(r'<table id="plans">.*?</table>', dom, re.S)
    assert table is not None
    assert table.group(0).count("<tr") == len(loaded["rows"]) + 1  # header + every plan
    escaped = EVIL.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert f">{escaped}</td>" in table.group(0)  # shown as text in a cell
    # nothing it carried ran or became markup: the body has no attribute, there is no <img> element
    assert "<body>" in dom and "data-pwned" not in dom and "<img" not in dom
    # plotly's chart titles show the name as text too (its SVG text node holds the characters)
    assert re.search(r'class="gtitle"[^>]*>[^<]*&lt;/script&gt;&lt;script&gt;', dom)


def read_png(path: Path):
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) into a numpy array [H, W, C]."""
    np = pytest.importorskip("numpy")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), dtype=np.uint8)
    prev = np.zeros(w * bpp, dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: a running sum per channel
            cur = (np.cumsum(line.reshape(w, bpp), axis=0) % 256).reshape(-1)
        elif f == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average (3) and Paeth (4) depend on the reconstructed left byte: byte by byte
            cur, p, c = line.tolist(), prev.tolist(), [0] * bpp + prev.tolist()
            for i in range(len(cur)):
                a = cur[i - bpp] if i >= bpp else 0
                if f == 3:
                    cur[i] = (cur[i] + (a + p[i]) // 2) & 255
                else:
                    b, cc = p[i], c[i]
                    pa, pb, pc = abs(b - cc), abs(a - cc), abs(a + b - 2 * cc)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                    cur[i] = (cur[i] + pred) & 255
            cur = np.array(cur, dtype=np.int32)
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[:, :, :3]


def test_screenshot_is_not_blank(loaded):
    np = pytest.importorskip("numpy")
    img = read_png(loaded["png"])
    assert img.shape[:2] == (HEIGHT, WIDTH)
    colours = np.unique(img.reshape(-1, 3), axis=0)
    assert len(colours) > 50  # a blank or text-only page has a handful
    # the first model's memory chart, stacked bars in their fill colours: weights #4c78a8 and KV cache #54a24b
    for rgb in ((0x4C, 0x78, 0xA8), (0x54, 0xA2, 0x4B)):
        assert np.all(img == rgb, axis=2).sum() > 2000, f"no bars of colour {rgb} on screen"


def test_headline_answers_first_with_costs(loaded):
    dom = loaded["dom"]
    table = re.search(r'<table id="headline">.*?</table>', dom, re.S)
    assert table is not None and dom.index('id="headline"') < dom.index('id="chart-memory-0"')
    text = re.sub(r"<[^>]+>", "|", table.group(0))
    h = next(h for h in loaded["heads"] if h["model"] == "llama-3.1-8b" and h["context"] == 8192)
    # the row a buyer reads: deployment, cost per hour, per user-hour, per million output tokens
    assert f"{h['gpu']} × {h['gpus']}, KV {h['kv_dtype']}" in text
    assert f"|{h['cost_per_hour']:,.2f}|" in text and f"|{h['cost_per_million_output_tokens']:,.2f}|" in text
    assert len(re.findall(r"<tr data-model", table.group(0))) == 4  # 2 models x 2 contexts


def test_filter_from_the_link_hides_other_rows_and_charts(loaded):
    dom = loaded["filtered"]
    shown = re.findall(r'<tr data-model="([^"]*)" data-ctx="(\d+)"(?! style="display: none;")', dom)
    assert shown and set(shown) == {("llama-3.1-8b", "32768")}
    hidden_sections = re.findall(r'<section data-model="([^"]*)" style="display: none;"', dom)
    assert len(hidden_sections) == 1 and "llama" not in hidden_sections[0]


def test_cost_sits_next_to_fits(loaded):
    head = re.search(r'<table id="plans"><thead><tr>(.*?)</tr>', loaded["dom"], re.S).group(1)
    names = re.findall(r"<th[^>]*>([^<]*)</th>", head)
    assert names[names.index("fits") + 1] == "cost/h"


def _legend(dom: str) -> list[str]:
    return re.findall(r'class="legendtext"[^>]*>([^<]*)<', dom)


def _dom(browser: str, page: Path, tmp_path: Path, width: int | None = None) -> str:
    """The page's DOM once its scripts ran in headless Chromium (in a window `width` px wide where given); a skip,
    saying why, where Chromium cannot run."""
    window = [f"--window-size={width},{HEIGHT}"] if width else []
    out = headless([browser, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000", *window, "--dump-dom",
                    page.as_uri()])
    if "<html" not in out.stdout:
        pytest.skip(f"Chromium could not run here: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout


def test_trtllm_free_fraction_is_labelled_left_free(tmp_path):
    # TensorRT-LLM's pool is free_gpu_memory_fraction (0.9) of what weights and overhead leave, its budget the
    # whole GPU: the 10% it leaves is inside the budget, drawn as "left free", and nothing is outside the budget.
    # Llama-3.1-8B on an H100 SXM at 8k: 79.18 GiB usable - 14.96 weights - 1.18 overhead = 63.04 GiB,
    # x 0.9 = 56.73 GiB of pool, 6.30 GiB left free (kvplan's own plan, checked against that arithmetic below)
    from kvplan.compare.sweep import sweep
    from kvplan.engines import resolve_engine
    from kvplan.hardware.gpus import find_gpu
    from kvplan.report.export import sweep_rows
    from kvplan.report.html import render_html
    from kvplan.sources.catalog import find_in_catalog

    browser = chromium()
    result = sweep([find_in_catalog("llama-3.1-8b")], [find_gpu("h100-sxm")], [1], [8192],
                   engine=resolve_engine("trtllm", None, ()))
    rows = sweep_rows(result)
    r = rows[0]
    room = r["usable_memory_bytes_per_gpu"] - r["weight_bytes_per_gpu"] - r["overhead_bytes_per_gpu"]
    assert r["kv_share"] == 0.9 and abs(r["kv_memory_bytes_per_gpu"] - 0.9 * room) <= 1
    page = tmp_path / "trtllm.html"
    page.write_text(render_html(rows, title="trtllm", summary=[], currency="USD"), encoding="utf-8")
    dom = _dom(browser, page, tmp_path)
    legend = _legend(dom)
    assert "left free (1 − free fraction)" in legend and "outside the budget" not in legend
    assert {"weights", "overhead", "KV cache"} <= set(legend)
    # the bar's hover value is the remainder, 0.1 x room, in GiB to three places
    assert f'"x":[{round(room * 0.1 / 2**30, 3)}]' in page.read_text(encoding="utf-8").replace(" ", "")


def test_utilisation_engines_keep_outside_the_budget(loaded):
    # vLLM (the sweep's default engine-neutral planner, utilisation 0.9): the remainder is outside the budget
    legend = _legend(loaded["dom"])
    assert "outside the budget" in legend and "left free (1 − free fraction)" not in legend


def test_simulate_page_under_stages_shows_the_binding_stage_and_the_given_pool(tmp_path, kvplan_home):
    # simulate -o x.html at pp 2 with --kv-cache-memory 4GiB (Gemma-2-9B: layers 21-41 hold 11 full-attention layers
    # to 0-20's 10, so they bind, as fit's memory table says): the rendered KV chart names that stage, its dashed
    # "KV pool" line is the 4 GiB given, and nothing reserved passes it
    from typer.testing import CliRunner

    from kvplan.cli import app

    browser = chromium()
    page = tmp_path / "sim.html"
    r = CliRunner().invoke(app, ["simulate", "gemma-2-9b", "--gpu", "h100", "--pp", "2", "--kv-cache-memory", "4GiB",
                                 "--workload", "chat", "--qps", "5", "--duration", "10", "-o", str(page)])
    assert r.exit_code == 0, r.output
    assert "KV pool 4.00 GiB per GPU of layers 21-41, the stage that binds" in r.stderr
    dom = _dom(browser, page, tmp_path)
    assert "KV memory per GPU (layers 21-41, the stage that binds)" in dom  # the chart's title, drawn by plotly
    assert "KV pool stage: layers 21-41" in dom and "KV pool per GPU: 4.00 GiB (4,294,967,296 bytes)" in dom
    assert "KV pool" in _legend(dom)
    text = page.read_text(encoding="utf-8")
    figs = json.loads(re.search(r'id="kvplan-figures">(.*?)</script>', text, re.S).group(1))
    kv = {t["name"]: t["y"] for t in figs["kv"]["data"]}
    assert kv["KV pool"] == [4.0, 4.0] and max(kv["reserved"]) <= 4.0


def test_sglang_request_slots_are_drawn_above_the_budget(tmp_path):
    # SGLang 0.5.23, Llama-3.1-8B on an H100 at 128k: the request-slot pool is 2,049 rows x 131,076 x 4 B =
    # 1,074,298,896 B (the text memory table's "above it: request slots" row, tests/test_sglang_req_pool.py), drawn out
    # of the memory outside the budget: 1,074,298,896 / 2^30 = 1.0005 GiB, 1.001 in the chart, 1.00 in the table
    from kvplan.compare.sweep import sweep
    from kvplan.engines import resolve_engine
    from kvplan.hardware.gpus import find_gpu
    from kvplan.report.export import sweep_rows
    from kvplan.report.html import render_html
    from kvplan.sources.catalog import find_in_catalog

    browser = chromium()
    result = sweep([find_in_catalog("llama-3.1-8b")], [find_gpu("h100")], [1], [131_072],
                   engine=resolve_engine("sglang", "0.5.23", ()))
    rows = sweep_rows(result)
    r = rows[0]
    assert r["above_budget_bytes_per_gpu"] == 1_074_298_896
    rest = r["usable_memory_bytes_per_gpu"] - r["weight_bytes_per_gpu"] - r["overhead_bytes_per_gpu"] \
        - r["kv_memory_bytes_per_gpu"]
    page = tmp_path / "sglang.html"
    page.write_text(render_html(rows, title="sglang", summary=[], currency="USD"), encoding="utf-8")
    dom = _dom(browser, page, tmp_path)
    legend = _legend(dom)
    assert "request slots (above the budget)" in legend and "outside the budget" in legend
    text = page.read_text(encoding="utf-8").replace(" ", "")
    # the slots' bar, and the outside bar less them: together what is outside the budget
    assert '"x":[1.001]' in text and f'"x":[{round((rest - 1_074_298_896) / 2**30, 3)}]' in text
    table = re.search(r'<table id="plans">.*?</table>', dom, re.S).group(0)
    assert "request slots GiB/GPU (above the budget)</th>" in table and '<td data-v="1074298896">1.00</td>' in table


def test_no_request_slot_column_where_no_plan_has_the_pool(loaded):
    # the sweep of the module's page plans with the engine-neutral planner: nothing above its budget, so neither the
    # table's column nor the chart's part
    assert "request slots GiB/GPU" not in loaded["dom"] and "request slots (above" not in _legend(loaded["dom"])


# Appended to a page: once it has laid out, the answer table's width and every cell whose text overflows its box
MEASURE = """<script>window.addEventListener('load', function () { setTimeout(function () {
  var t = document.getElementById('headline'), cut = [];
  t.querySelectorAll('td, th').forEach(function (c) {
    if (c.scrollWidth > c.clientWidth) { cut.push(c.textContent); } });
  var p = document.createElement('pre'); p.id = 'measured';
  p.textContent = JSON.stringify({table: t.getBoundingClientRect().width, cut: cut}); document.body.appendChild(p);
}, 300); });</script></body>"""


def test_the_answer_table_fits_a_1280_px_window_with_every_figure_whole(tmp_path, kvplan_home):
    # The README's sweep with prices: its answer table held qwen3-32b at 128k's reason on one line ("131,072 tokens is
    # beyond the model's context limit (40,960 tokens)"), 1,344 px wide at 1280 px. The page's body has 24 px margins,
    # so 1280 - 2 x 24 = 1,232 px is the room; the reason wraps in its cell, figures never do
    from typer.testing import CliRunner

    from kvplan.cli import app

    browser = chromium()
    prices, page = tmp_path / "prices.yaml", tmp_path / "plan.html"
    prices.write_text("h100-sxm: 2.49\nh200-sxm: 3.59\nmi300x: 2.99\n")
    r = CliRunner().invoke(app, ["sweep", "--models", "llama-3.1-70b,qwen3-32b", "--gpu", "h100,h200,mi300x", "--ctx",
                                 "8k,32k,128k", "--prices", str(prices), "-o", str(page)])
    assert r.exit_code == 0, r.output
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE, 1), encoding="utf-8")
    dom = _dom(browser, page, tmp_path, width=1280)
    measured = json.loads(html.unescape(re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S).group(1)))
    assert measured["table"] <= 1280 - 2 * 24 and measured["cut"] == []
    table = re.search(r'<table id="headline">.*?</table>', dom, re.S).group(0)
    assert "beyond the model's context limit" in table and "<td>0.1993</td>" in table  # 2.99 / 15 users, whole
