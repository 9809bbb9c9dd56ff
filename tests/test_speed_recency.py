"""The fit's recency weights (kvplan.speed.recency): a figure's weight halves every HALF_LIFE months its release's
date lies before its set's newest; hand arithmetic on stand-in cases."""

from types import SimpleNamespace

import pytest

from kvplan.speed.recency import HALF_LIFE, months, weights


def case(version, date, engine="vllm", era=None):
    return SimpleNamespace(engine=engine, era=era or engine, version=version, date=date)


def test_months():
    # 2026-09-01: 2026 x 12 + (9 - 1) + 0 / 30 = 24,320; 2025-11-16: 24,300 + 10 + 15 / 30 = 24,310.5
    assert months("2026-09-01") == 24320 and months("2025-11-16") == 24310.5
    assert months(None) is None and months("None") is None and months("") is None


def test_weights_halve_every_half_life_of_the_release_age():
    assert HALF_LIFE["vllm"] == 4.0
    cases = [
        case("0.27.1", "2026-09-01"),  # the newest release: 24,320, weight 1
        case("0.11.0", "2025-11-01"),  # 0.11.0's earliest run: 24,310, 10 months old: 0.5 ** 2.5 = 0.17678
        case("0.11.0", "2025-12-24"),  # a later run of 0.11.0 is aged by the release's earliest run: 0.17678
        case(None, "2026-05-01"),  # no release stated: its own date, 24,316, 4 months: 0.5
        case("0.7.3", "2026-05-01"),  # a 2026 table of 0.7.3 runs, 0.7.3's only dated run: 24,316, 4 months: 0.5
        # a build made before 0.7.3 is read as 0.7.2 (kvplan.core.releases), so it does not date 0.7.3's release:
        # 0.7.2 at 24,302, 18 months: 0.5 ** 4.5 = 0.04419
        case("0.7.3.dev138+g21f6ca217", "2025-03-01"),
        case("0.9.0", None),  # a release no dated run states: 1
        case(None, None),  # nothing to age it by: 1
    ]
    w = weights(cases)
    assert w == pytest.approx([1.0, 0.17678, 0.17678, 0.5, 0.5, 0.04419, 1.0, 1.0], abs=5e-5)


def test_each_set_ages_from_its_own_newest_and_unnamed_engines_and_older_eras_weigh_1():
    cases = [
        case("0.27.1", "2026-09-01"),
        case("0.20.1", "2026-05-01", era="vllm-inprocess"),  # its set's newest: 1, not 0.5
        case("0.10.0", "2025-09-01", era="vllm-inprocess"),  # 8 months before it: 0.25
        case("1.0", "2025-01-01", engine="trtllm"),  # no half-life for the engine
        case("0.5.6", "2025-01-01", engine="sglang", era="sglang<0.5.14"),  # an older era
        case("0.5.16", "2026-09-01", engine="sglang"),
    ]
    assert weights(cases) == pytest.approx([1.0, 1.0, 0.25, 1.0, 1.0, 1.0])
