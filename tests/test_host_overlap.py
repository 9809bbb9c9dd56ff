"""vLLM's async scheduling takes the host's fixed work a step off the step (kvplan.speed.overlap): which runs schedule
asynchronously, read from vLLM's own sdists, and what the `step` term then prices."""

from __future__ import annotations

import pytest

from kvplan.speed.overlap import overlaps_host
from kvplan.speed.terms import TERMS, Shape, features

STEP = TERMS.index("step")


@pytest.mark.parametrize("version, flags, pp, date, overlaps", [
    # vllm 0.11.2 sdist vllm/config/scheduler.py L140 and 0.13.0 L133: `async_scheduling: bool = False`
    ("0.11.2", None, 1, "2025-12-07", False),
    ("0.13.0", None, 1, None, False),
    # 0.14.0 L133 `Field(default=None)`, vllm/config/vllm.py L588-628: None becomes True ...
    ("0.14.0", None, 1, None, True),
    ("0.25.1", None, 1, "2026-07-24", True),
    ("0.15.0rc2.dev46", None, 1, None, True),  # a development build reads as the release before it, 0.14.999
    # ... but False under pipeline parallelism in 0.14.x (L590-596: "not yet supported with pipeline_parallel_size >
    # 1"; 0.14.1 the same lines) ...
    ("0.14.1", None, 4, None, False),
    # ... and no longer from 0.15.0 (vllm-project/vllm#32359; the 0.16.0 sdist's default branch L647-, 0.19.0's
    # L755- and 0.28.0's L1185- exclude no pp; 0.15.x has no sdist, its first release after the merge is taken)
    ("0.15.0", None, 4, None, True),
    ("0.27.1", None, 4, None, True),
    (None, None, 2, "2026-01-25", False),  # dated between 0.14.0 (01-20) and 0.15.0 (01-29): 0.14.x's rule
    (None, None, 2, "2026-02-10", True),
    # a run's own --async-scheduling / --no-async-scheduling wins either way, in the words opt_bool reads
    ("0.11.0", {"async_scheduling": True}, 1, None, True),
    ("0.11.0", {"async_scheduling": "1"}, 1, None, True),
    ("0.11.0", {"async_scheduling": "yes"}, 1, None, True),
    ("0.25.1", {"async_scheduling": "false"}, 1, None, False),
    ("0.25.1", {"async_scheduling": 0}, 1, None, False),
    # V0 (before 0.8) has no async scheduler, whatever a flag says (the release rule is read first)
    ("0.7.3", None, 1, None, False),
    ("0.7.3", {"async_scheduling": "true"}, 1, None, False),
    # no release stated: the one current at the run's date (0.14.0 reached PyPI 2026-01-20); a plan has no date
    (None, None, 1, "2025-11-06", False),
    (None, None, 1, "2026-06-03", True),
    (None, None, 1, None, True),
])
def test_vllm_schedules_asynchronously_by_release_flag_and_stages(version, flags, pp, date, overlaps):
    assert overlaps_host("vllm", version, flags, pp, date) is overlaps


def test_other_engines_keep_their_step_cost():
    assert overlaps_host("sglang", "0.5.12") is False
    assert overlaps_host("trtllm", None, {"async_scheduling": True}) is False


def test_an_overlapped_step_has_no_fixed_host_cost_and_the_rest_unchanged():
    # one 16 GB read at 4 TB/s: 4 ms of weights either way; the step term 1 (a step's fixed cost, once) or 0
    s = Shape(dense_bytes=16_000_000_000, bandwidth=4e12, layers=32)
    sync = features(s, tokens=1, seqs=1, context=1000, pairs=1000)
    overlapped = features(Shape(dense_bytes=16_000_000_000, bandwidth=4e12, layers=32, host_overlap=True),
                          tokens=1, seqs=1, context=1000, pairs=1000)
    assert sync[0] == overlapped[0] == pytest.approx(0.004)
    assert (sync[STEP], overlapped[STEP]) == (1.0, 0.0)
    assert [x for i, x in enumerate(sync) if i != STEP] == [x for i, x in enumerate(overlapped) if i != STEP]
    # a prefill in 3 chunks takes 3 steps: 3 fixed costs synchronously, none overlapped
    assert features(s, tokens=3000, seqs=1, context=0, pairs=0, steps=3)[STEP] == 3.0
