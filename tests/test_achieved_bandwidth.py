"""A profile's measured device-memory bandwidth (`achieved_bandwidth_bytes_per_s`): read by the speed terms where
a profile has it, the datasheet's otherwise; the roofline stays on the datasheet; the field is checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvplan.core.errors import KvplanError
from kvplan.hardware.gpu_profile import parse_profile
from kvplan.hardware.gpus import find_gpu
from kvplan.speed.shape import read_bandwidth, shape_for
from kvplan.speed.terms import TERMS, features, roofline

PROFILES = Path(__file__).resolve().parents[1] / "kvplan" / "hardware" / "profiles"
H100 = find_gpu("h100-sxm")


def _llama_8b():
    from kvplan.sources.catalog import find_in_catalog

    return find_in_catalog("llama-3.1-8b")


def test_the_weights_term_on_an_h100_reads_at_its_measured_bandwidth():
    # FluidX3D README @8986874e (2026-07-14), 'H100 SXM5 80GB HBM3': 17,602 MLUPs/s FP32/FP32, 153 bytes per cell
    # update: 17,602e6 x 153 = 2,693,106,000,000 B/s (80% of the datasheet's 3,350 GB/s).
    assert H100.achieved_bandwidth_bytes_per_s == 17_602 * 153 * 10**6 == 2_693_106_000_000
    s = shape_for(_llama_8b(), H100)
    assert s.bandwidth == 2_693_106_000_000 and s.peak_bandwidth == 3_350_000_000_000
    # Llama 3.1 8B in bf16, one GPU: LM head 525,336,576 + attention 1,342,177,280 + MLP 5,637,144,576 + norms
    # 266,240 = 7,504,924,672 parameters (the embedding is a lookup, not read) x 2 B = 15,009,849,344 B;
    # one decode step reads them in 15,009,849,344 / 2.693106e12 = 5.573 ms (4.481 ms at the datasheet's 3.35 TB/s).
    assert s.dense_bytes == 15_009_849_344
    f = features(s, 1, 1, 0, 0)
    assert f[TERMS.index("weights")] == pytest.approx(15_009_849_344 / 2.693106e12)
    assert f[TERMS.index("weights")] == pytest.approx(5.5734e-3, rel=1e-4)
    # the roofline, kvplan's labelled lower bound, stays on the datasheet: 15,009,849,344 / 3.35e12 = 4.481 ms
    assert roofline(s, 1, 1, 0, 0) == pytest.approx(15_009_849_344 / 3.35e12)


def test_a_profile_without_a_measurement_reads_at_its_datasheet():
    # GB200: no published measurement found, so its terms read at the datasheet's 8,000 GB/s
    gb200 = find_gpu("gb200")
    assert gb200.achieved_bandwidth_bytes_per_s is None and gb200.achieved_bandwidth_source is None
    assert read_bandwidth(gb200) == gb200.bandwidth_bytes_per_s == 8_000_000_000_000
    s = shape_for(_llama_8b(), gb200)
    assert s.bandwidth == s.peak_bandwidth == 8e12


def test_every_measured_figure_is_its_sources_arithmetic():
    # Each bundled value is the cited MLUPs/s x 153 bytes (FluidX3D's D3Q19 FP32/FP32 cell update), under the
    # datasheet; the source names its commit.
    seen = 0
    for path in sorted(PROFILES.glob("*.yaml")):
        gpu = parse_profile(path.read_text(), str(path))
        if gpu.achieved_bandwidth_bytes_per_s is None or path.name in OTHER_METHOD:
            continue
        seen += 1
        mlups = int(re.search(r"': (\d+) MLUPs/s", gpu.achieved_bandwidth_source).group(1))
        assert gpu.achieved_bandwidth_bytes_per_s == mlups * 153 * 10**6, path.name
        assert gpu.achieved_bandwidth_bytes_per_s <= gpu.bandwidth_bytes_per_s, path.name
        assert "@8986874e" in gpu.achieved_bandwidth_source, path.name
    assert seen == 30


# Figures from a method other than FluidX3D's table, for parts it has no row for; each checked by hand below.
OTHER_METHOD = {"mi300a.yaml"}


def test_mi300a_reads_at_amds_babelstream_triad():
    # amd/HPCTrainingExamples @aaaa72d4 tests/run_BabelStream.sh, sample output of BabelStream 5.0 (HIP, double,
    # 2147.5 MB arrays) on 'AMD Instinct MI300A': "Triad 3787553.768" MBytes/sec, BabelStream's MB = 10^6 bytes:
    # 3,787,553.768 x 10^6 = 3,787,553,768,000 B/s, 71.5% of the datasheet's 5,300 GB/s.
    mi300a = find_gpu("mi300a")
    assert mi300a.achieved_bandwidth_bytes_per_s == 3_787_553_768 * 10**3
    assert "Triad 3787553.768 MBytes/sec" in mi300a.achieved_bandwidth_source
    assert "@aaaa72d4" in mi300a.achieved_bandwidth_source
    assert read_bandwidth(mi300a) == 3_787_553_768_000 < mi300a.bandwidth_bytes_per_s == 5_300_000_000_000
    assert {p.name for p in PROFILES.glob("*.yaml")
            if parse_profile(p.read_text(), str(p)).achieved_bandwidth_bytes_per_s is not None} >= OTHER_METHOD


def _h100_text(**fields) -> str:
    text = (PROFILES / "h100-sxm.yaml").read_text()
    text = re.sub(r"^achieved_bandwidth_(bytes_per_s|source):.*\n", "", text, flags=re.M)
    return text + "".join(f"{k}: {v}\n" for k, v in fields.items())


def test_the_field_is_checked_in_one_line():
    ok = parse_profile(_h100_text(achieved_bandwidth_bytes_per_s=3_000_000_000_000,
                                  achieved_bandwidth_source='"a triad run"'), "x.yaml")
    assert ok.achieved_bandwidth_bytes_per_s == 3_000_000_000_000
    assert parse_profile(_h100_text(), "x.yaml").achieved_bandwidth_bytes_per_s is None
    cases = [
        ({"achieved_bandwidth_bytes_per_s": 3_000_000_000_000}, "needs 'achieved_bandwidth_source'"),
        ({"achieved_bandwidth_bytes_per_s": 3_400_000_000_000, "achieved_bandwidth_source": '"x"'},
         "exceeds 'bandwidth_bytes_per_s'"),
        ({"achieved_bandwidth_bytes_per_s": "2.7TB/s", "achieved_bandwidth_source": '"x"'}, "positive integer"),
        ({"achieved_bandwidth_source": '"x"'}, "positive integer"),
    ]
    for fields, said in cases:
        with pytest.raises(KvplanError) as err:
            parse_profile(_h100_text(**fields), "x.yaml")
        assert said in str(err.value) and "\n" not in str(err.value)
