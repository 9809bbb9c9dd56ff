"""The forty-fourth round's llama-bench token-generation sources read as their tables print them (tests/fixtures/speed).

Two kinds of table: compare-llama-bench's (a PR build beside master, `| t/s master | t/s PR | Speedup |`), whose
printed speedup checks each transcribed pair, and llama-bench's own output (`| ... | test | mean ± std |`), whose
test name states the lengths the point carries.
"""

from pathlib import Path

import pytest
import yaml
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"
COMPARE = ("llamacpp-pr-16834", "llamacpp-pr-16649")
BENCH = ("llm-tracker-mi300x-llamacpp", "llm-tracker-w7900-2024-08-05-llamacpp")
AMD_PAGE = "llm-tracker-amd-gpus-llamacpp"
NEW = {"llamacpp-pr-16834": 6, "llamacpp-pr-16649": 3, "llm-tracker-mi300x-llamacpp": 4,
       "llm-tracker-w7900-2024-08-05-llamacpp": 8, AMD_PAGE: 6, "llamacpp-pr-4766": 12}


def _doc(source: str) -> dict:
    return yaml.safe_load((CORPUS / f"{source}.yaml").read_text())


def _points(source: str) -> list[dict]:
    doc = _doc(source)
    return [{**(doc.get("defaults") or {}), **p} for p in doc["points"]]


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _figure(p: dict) -> float:
    return p["metrics"].get("tg_tok_s") or p["metrics"]["pp_tok_s"]


def _compare_rows():
    rows = [(s, p) for s in COMPARE for p in _points(s)]
    # #4766's turn-56 table (JohannesGaessler, RTX 3090); its 2024-01-10 rows (ggerganov, RTX 4090) are llama-bench's
    return rows + [("llamacpp-pr-4766", p) for p in _points("llamacpp-pr-4766") if p["gpu"] == "rtx-3090"]


@pytest.mark.parametrize("source, p", _compare_rows(), ids=lambda x: x if isinstance(x, str) else x["id"])
def test_each_figure_is_its_rows_pr_column_and_agrees_with_the_printed_speedup(source, p):
    # Speedup = t/s PR / t/s master to two decimals, an independent check of the pair: #16834's gpt-oss 20B tg128
    # prints 186.10 | 187.25 | 1.01 (187.25 / 186.10 = 1.006); #4766's RTX 3090 Q4_0 tg128 121.82 | 119.90 | 0.98
    cells = _cells(p["row"])
    master, pr, speedup = (float(c) for c in cells[-3:])
    assert _figure(p) == pr
    assert round(pr / master, 2) == pytest.approx(speedup, abs=0.011)
    test = next(c for c in cells if c.startswith(("tg", "pp")))
    length = int(test[2:])
    assert (p["n_gen"] if test.startswith("tg") else p["n_prompt"]) == length


@pytest.mark.parametrize("source", BENCH + (AMD_PAGE,))
def test_each_llama_bench_row_is_its_mean_and_names_the_points_test(source):
    # llama-bench prints `| ... | test | mean ± std |`: "tg128" is n_gen 128 from an empty cache, "pp 3968" n_prompt
    for p in _points(source):
        if "±" not in p["row"]:
            continue  # the AMD page's comparison table (the next test)
        cells = _cells(p["row"])
        mean = float(cells[-1].split("±")[0])
        test = cells[-2].replace(" ", "")
        assert _figure(p) == mean, p["id"]
        assert test in (f"tg{p['n_gen']}", f"pp{p['n_prompt']}"), p["id"]
        assert (p["n_gen"] == 0) != (p["n_prompt"] == 0), p["id"]


def test_the_amd_pages_comparison_table_is_the_runs_above_it():
    # The page's table has one column a card (7900 XT, 7900 XTX, RTX 3090, RTX 4090), rows "Prompt tok/s" and
    # "Inference tok/s"; its 7900 XTX cells are the XTX run's pp 3968 and tg 128 rounded (2575.87 -> 2576,
    # 119.09 -> 119.1), so the RTX 3090 / 4090 cells are read as the same two tests, as the points carry them
    points = {p["id"]: p for p in _points(AMD_PAGE)}
    xtx_pp, xtx_tg = points["rx-7900-xtx-llama2-7b-q4_0-pp3968"], points["rx-7900-xtx-llama2-7b-q4_0-tg128"]
    prompt = [float(c) for c in _cells(points["rtx-3090-llama2-7b-q4_0-pp3968"]["row"])[1:]]
    inference = [float(c) for c in _cells(points["rtx-3090-llama2-7b-q4_0-tg128"]["row"])[1:]]
    assert prompt[1] == round(xtx_pp["metrics"]["pp_tok_s"]) and inference[1] == round(xtx_tg["metrics"]["tg_tok_s"], 1)
    for i, gpu in ((2, "rtx-3090"), (3, "rtx-4090")):
        assert points[f"{gpu}-llama2-7b-q4_0-pp3968"]["metrics"]["pp_tok_s"] == prompt[i]
        assert points[f"{gpu}-llama2-7b-q4_0-pp3968"]["n_prompt"] == xtx_pp["n_prompt"] == 3968
        assert points[f"{gpu}-llama2-7b-q4_0-tg128"]["metrics"]["tg_tok_s"] == inference[i]
        assert points[f"{gpu}-llama2-7b-q4_0-tg128"]["n_gen"] == xtx_tg["n_gen"] == 128


def test_the_new_points_are_priced():
    # every point of the round's sources is read into a case (none skipped): 6 + 3 + 4 + 8 + 6 new sources' and
    # #4766's 5 + 7 = 39 cases, 21 of the 34 new ones token generation
    cases = speed_cases()[0]
    counts = {s: sum(c.source == s for c in cases) for s in NEW}
    assert counts == NEW == {s: len(_points(s)) for s in NEW}
    tg = sum(c.load.bench == "tg" for c in cases if c.source in NEW and c.source != "llamacpp-pr-4766")
    tg += sum(c.load.bench == "tg" and c.gpu == "rtx-3090" for c in cases if c.source == "llamacpp-pr-4766")
    assert tg == 21
