"""V0's MLA engine labelled outside what the step-time model prices (kvplan.engines.vllm.v0_mla.speed_note).

vLLM 0.7.1 up to 0.8.0 runs DeepSeek's MLA models on the V0 engine with its own MLA backend (the 0.7.3 wheel's
`attention/backends/mla/utils.py`; 0.8.0 made V1 the default). The speed corpus's only such runs, dstack's DeepSeek-R1
(dstackai/benchmarks@7f37e66 `Deepseek-R1/raw_data/online_results.csv`), measured at 4 requests a TPOT of 25.73 ms on
8 x H200 (0.7.4.dev181) and 46.20 ms on 8 x MI300X (0.7.3.dev138), TTFT 0.976 / 1.259 s, where the calibrated
figures of the twenty-sixth round's training-CV folds (docs/speed-history.md) are 14.1 / 14.3 ms and 0.430 / 0.533 s:
25.73 / 14.1 = 1.8x, 46.20 / 14.3 = 3.2x, 0.976 / 0.430 = 2.3x, 1.259 / 0.533 = 2.4x.
"""

from kvplan.engines.vllm import v0_mla
from kvplan.sources.catalog import find_in_catalog


def test_the_note_names_v0_mla_releases_only():
    r1 = find_in_catalog("deepseek-r1")
    for v in ((0, 7, 1), (0, 7, 3), (0, 7, 4)):
        note = v0_mla.speed_note(r1, v)
        assert note and "outside what the step-time model prices" in note and "1.8-3.2x" in note
    assert v0_mla.speed_note(r1, (0, 8, 0)) is None  # V1 by default, vllm#14770's MLA
    assert v0_mla.speed_note(r1, (0, 7, 0)) is None  # before V0's MLA backend: DeepSeek ran with per-head K/V
    assert v0_mla.speed_note(find_in_catalog("llama-3.1-8b"), (0, 7, 3)) is None  # no MLA layer
