"""The forty-second round's compare-llama-bench sources read as their tables print them (tests/fixtures/speed)."""

from pathlib import Path

import pytest
import yaml

from kvplan.speed.ggml import materializes_scores
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"
# compare-llama-bench tables (PR descriptions): each row ends `| t/s master | t/s PR build | Speedup |`
COMPARE = ("llamacpp-pr-11583", "llamacpp-pr-15131", "llamacpp-pr-15157", "llamacpp-pr-29152")


def _points(source: str) -> list[dict]:
    return yaml.safe_load((CORPUS / f"{source}.yaml").read_text())["points"]


@pytest.mark.parametrize("source", COMPARE)
def test_each_figure_is_its_rows_pr_column_and_agrees_with_the_printed_speedup(source):
    # The table prints Speedup = t/s PR / t/s master to two decimals, an independent check of the transcribed pair:
    # #15131's RTX 3090 llama 8B F16 at micro-batch 8 prints 390.73 | 423.63 | 1.08, and 423.63 / 390.73 = 1.084.
    for p in _points(source):
        cells = [c.strip() for c in p["row"].strip().strip("|").split("|")]
        master, pr, speedup = (float(c) for c in cells[-3:])
        assert p["metrics"]["pp_tok_s"] == pr, p["id"]
        assert round(pr / master, 2) == pytest.approx(speedup, abs=0.011), p["id"]
        assert str(p["ubatch"]) in cells, p["id"]  # the micro-batch column as printed


def test_15131_reads_flashattention_from_the_tables_own_column():
    # the table's FlashAttention column: "Yes" on the RTX 3090 F16 rows, "No" on the RTX 4090 Q4_0 rows, so only the
    # latter write their attention scores out (kvplan.speed.ggml.materializes_scores), whatever the build's date
    for p in _points("llamacpp-pr-15131"):
        printed = "Yes" if "| Yes " in p["row"] else "No"
        assert materializes_scores(p["flags"], None) is (printed == "No"), p["id"]


def test_the_new_sources_are_priced():
    # every point of the four sources is read into a case (none skipped): 11 + 16 + 6 + 16 = 49
    cases, _ = speed_cases()
    counts = {s: sum(c.source == s for c in cases) for s in COMPARE}
    assert counts == {s: len(_points(s)) for s in COMPARE}
    assert sum(counts.values()) == 49
