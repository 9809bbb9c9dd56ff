"""The offload tiers kept as one queue (kvplan.simulator.tierq) hold what the per-tier LRUs hold.

PrefixCache keeps tiers that each hold the whole pool as one queue cut into regions (a segment moving down a tier
moves a cut, a segment taken back leaves a hole); elsewhere as an `OrderedDict` per tier, which
tests/test_offload.py checks against inserting one segment at a time. Here the two are driven with the same
random evictions and takes (keys taken come back later, as a recomputed segment does) and compared after each:
every tier's keys in order, bytes, peak, stored and dropped counts, and where each key sits; then a whole
Mooncake replay with tiers that are hit runs in both and gives the same records.
"""

from __future__ import annotations

import dataclasses
import random

from kvplan.simulator.prefix import PrefixCache


def _state(cache: PrefixCache) -> list:
    return [[list(cache.contents(i).items()), t.used, t.peak, t.stored, t.dropped, t.area]
            for i, t in enumerate(cache.tiers)] + [sorted(cache.where.items()), cache.version]


def test_queue_holds_what_the_lrus_hold():
    pool = 40
    tiers = (("cpu", 40, None), ("mid", 57, None), ("disk", 130, None))
    for seed in range(20):
        rng = random.Random(seed)
        queue, lrus = PrefixCache(16, 1, tiers, pool), PrefixCache(16, 1, tiers)
        assert queue.queue is not None and lrus.queue is None
        taken: list = []
        for step in range(400):
            queue.now = lrus.now = step * 0.5
            if rng.random() < 0.7:
                # mostly one size (a model's segments of whole 512-token blocks: the cuts' fast path), some others
                fresh = [(f"k{step}-{j}", 8 if seed % 2 and rng.random() < 0.9 else rng.randint(1, pool))
                         for j in range(rng.randint(1, 9))]
                back = [taken.pop(rng.randrange(len(taken))) for _ in range(min(len(taken), rng.randint(0, 2)))]
                items = back + fresh  # a key taken earlier comes back after its hole
                queue._demote(list(items))
                lrus._demote(list(items))
            elif lrus.where:
                key = rng.choice(sorted(lrus.where))
                assert queue._tier_of(key) == lrus._tier_of(key)
                queue._take(key)
                lrus._take(key)
                taken.append((key, rng.randint(1, pool)))
            assert _state(queue) == _state(lrus), (seed, step)
            assert set(lrus.below) == set(lrus.where)
            # the queue's segments keep their `segments` entries while below, and leave them when dropped
            assert {k: s.serial >= 0 for k, s in queue.segments.items()} == dict.fromkeys(lrus.where, True)


def test_queue_cuts_off_its_dropped_head(monkeypatch):
    from kvplan.simulator import tierq

    monkeypatch.setattr(tierq, "_COMPACT", 8)
    queue, lrus = PrefixCache(16, 1, (("cpu", 10, None),), 10), PrefixCache(16, 1, (("cpu", 10, None),))
    for step in range(300):
        items = [(step * 3 + j, 1 + (step + j) % 4) for j in range(3)]
        queue._demote(list(items))
        lrus._demote(list(items))
        if step % 7 == 0:
            key = sorted(lrus.where)[step % len(lrus.where)]
            queue._take(key)
            lrus._take(key)
        assert _state(queue) == _state(lrus)
    assert queue.queue.off > 0 and len(queue.queue.segs) < 300


def test_replay_is_the_same_with_either_tier_layout():
    from tests.test_simulate_replay_pinned import GIB, _model, _mooncake

    from kvplan.simulator.engine import Engine, EngineConfig

    # a 4 GiB pool, tiers each at least that: the queue; the engine with per-tier LRUs put in its place
    cfg = EngineConfig(tiers=(("cpu", 4 * GIB, 64e9), ("disk", 8 * GIB, 6.8e9)))
    reqs = _mooncake(1500, 2.0)
    runs = []
    for layout in ("queue", "lrus"):
        eng = Engine(_model(4 * GIB), cfg)
        assert eng.cache.queue is not None
        if layout == "lrus":
            eng.cache = PrefixCache(eng.B, eng.m.block_bytes(), cfg.tiers)
        rec = eng.run([dataclasses.replace(r) for r in reqs])
        runs.append((rec.summary(2.0, 0.1), [rec.first, rec.finish, rec.preemptions, rec.reload], rec.series,
                     _state(eng.cache)[:-1]))  # (not `version`: the LRUs' eviction counts two changes, one here)
    assert runs[0] == runs[1]
    tiers = runs[0][0]["offload"]["tiers"]
    assert all(t["hit_tokens"] + t["hit_tokens_preempted"] > 0 for t in tiers), tiers  # both tiers come back


def test_taking_many_keys_at_once_is_taking_each():
    """`TierQueue.take_keys` (a promoted prefix's segments in one loop) leaves what `_take` of each key leaves, keys
    no tier holds (dropped, never stored, taken twice) included."""
    pool = 40
    tiers = (("cpu", 40, None), ("disk", 97, None))
    for seed in range(20):
        rng = random.Random(seed)
        many, each = PrefixCache(16, 1, tiers, pool), PrefixCache(16, 1, tiers, pool)
        for step in range(300):
            many.now = each.now = step * 0.25
            if rng.random() < 0.6:
                items = [(f"k{step}-{j}", 8 if rng.random() < 0.8 else rng.randint(1, pool))
                         for j in range(rng.randint(1, 9))]
                many._demote(list(items))
                each._demote(list(items))
                continue
            held = sorted(each.where)
            keys = rng.sample(held, min(len(held), rng.randint(0, 6))) + [f"k{step}-none", rng.choice(held or ["x"])]
            taken = many.queue.take_keys(iter(keys), many.now)
            before = {k for k in keys if k in each.where}
            for key in keys:
                each._take(key)
            assert taken == len(before), (seed, step)
            assert _state(many)[:-1] == _state(each)[:-1], (seed, step)
            assert {k for k, s in many.segments.items() if s.serial >= 0} == set(each.where)
