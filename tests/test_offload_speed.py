"""The tier and prefix bookkeeping made faster leaves a simulation's results as they were: a fixed replay with a
CPU and a disk tier, run with the current engine and with its demotion and publishing as they stood before
(commit 4bf9c07, restated here), gives the same summary, tiers and tier contents to the last figure; and
load_trace's block names stand for the chains of hash ids they did before (`/1/2/3`, now a number)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import deployment_for_gpus
from kvplan.engines import resolve_engine
from kvplan.planning.plan import Request
from kvplan.simulator import engine as sim_engine
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.prefix import PrefixCache, Segment
from kvplan.simulator.traces import load_trace
from kvplan.sources.resolve import resolve_model

TRACE = Path(__file__).parent / "fixtures" / "traces" / "mooncake_conversation_400.jsonl"


class BeforeCache(PrefixCache):
    """PrefixCache as of 4bf9c07: every moved segment's `where` entry deleted, then set again; one segment
    published at a time."""

    def publish(self, key, start: int, end: int):
        if key in self.segments:
            return None
        if self.where:
            self._take(key)
        b = self.block_size
        seg = Segment(key, (end // b - start // b) * self.block_bytes)
        self.segments[key] = seg
        seg.refs = 1
        self.active += seg.nbytes
        return seg

    def _demote(self, items: list, i: int = 0) -> None:
        tiers, where, now = self.tiers, self.where, self.now
        while items and i < len(tiers):
            tier = tiers[i]
            tier.tick(now)
            lru, cap, down = tier.lru, tier.capacity, []
            used, stored = tier.used, 0
            for key, nbytes in items:
                if nbytes > cap:
                    down.append((key, nbytes))
                    continue
                lru[key] = nbytes
                where[key] = i
                used += nbytes
                stored += 1
            while used > cap:
                item = lru.popitem(False)
                del where[item[0]]
                used -= item[1]
                down.append(item)
            tier.dropped += len(down) - (len(items) - stored)
            tier.stored += stored
            tier.used = used
            tier.peak = max(tier.peak, used)
            items, i = down, i + 1


class BeforeEngine(sim_engine.Engine):
    """The engine as of 4bf9c07: a sequence's computed segments published one call each."""

    def _publish(self, seq) -> None:
        prefix = seq.req.prefix
        start = sum(n for _, n in prefix[: seq.published])
        while seq.published < len(prefix):
            key, n = prefix[seq.published]
            if start + n > seq.computed:
                return
            seg = self.cache.publish(key, start, start + n)
            if seg is None:
                return
            seq.own -= seg.nbytes
            self.used -= seg.nbytes
            seq.shared += seg.nbytes
            seq.segs.append(seg)
            seq.published += 1
            start += n


def _run(monkeypatch, cache_class, engine_class, tiers):
    monkeypatch.setattr(sim_engine, "PrefixCache", cache_class)
    spec, gpu = resolve_model("llama-3.1-8b").spec, find_gpu("h100")
    plan = resolve_engine().plan(spec, gpu, deployment_for_gpus(spec, 1), Request(context=32768))
    model = sim_model(plan, spec, gpu)
    model = dataclasses.replace(model, kv_budget_bytes=4 * 2**30)
    reqs, _ = load_trace(str(TRACE))
    eng = engine_class(model, sim_engine.EngineConfig(tiers=tiers))
    rec = eng.run(reqs)
    return rec.summary(2.0, 0.1), [(list(t.lru.items()), t.used, t.peak) for t in eng.cache.tiers], dict(eng.cache.where)


def test_tiers_faster_same_results(monkeypatch):
    # a 2 GiB CPU tier and a 100 GiB disk tier under a 4 GiB pool: segments go down both tiers, fall out of each,
    # and come back (the CPU's to preempted requests, the disk's to new ones); the same everywhere, the tiers'
    # contents and order included
    tiers = (("cpu", 2 * 2**30, 64e9), ("disk", 100 * 2**30, 6.8e9))
    after = _run(monkeypatch, PrefixCache, sim_engine.Engine, tiers)
    before = _run(monkeypatch, BeforeCache, BeforeEngine, tiers)
    assert after == before
    cpu, disk = after[0]["offload"]["tiers"]
    assert cpu["hit_tokens_preempted"] > 0 and disk["hit_tokens"] > 0, (cpu, disk)
    assert cpu["segments_dropped"] > 0 and disk["segments_dropped"] > 0, (cpu, disk)


def test_trace_block_names_are_the_id_chains():
    # a block's name stands for every hash id up to it: two blocks share a name exactly when their chains of ids
    # from the first block are equal, and each name is one object
    reqs, _ = load_trace(str(TRACE))
    rows = [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]
    by_name, objects = {}, {}
    for r, row in zip(reqs, sorted(rows, key=lambda x: x["timestamp"])):
        assert r.prompt == row["input_length"]
        for depth, (key, _) in enumerate(r.prefix, 1):
            assert by_name.setdefault(key, tuple(row["hash_ids"][:depth])) == tuple(row["hash_ids"][:depth])
            assert objects.setdefault(key, key) is key
    assert len(set(by_name.values())) == len(by_name)  # different chains, different names
