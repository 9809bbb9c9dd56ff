"""A Mooncake-like replay's results pinned: the simulator made faster must give them to the last figure.

`tests/fixtures/simulate/replay_pinned.json` holds what the engine gave before the prefix cache and its tiers
were reworked for speed: written by the simulator of 8a162a2 on the tree it sits in, by running this file as
a script with `--write` (only when a change is meant to move results; re-written once since to add the summary's
`latency_s.itl`, the pooled gap between tokens: 21 lines added, no pinned figure moved; and once to add the
summary's `load`, the verdict `simulate` prints on its load line: 15 lines added, no pinned figure moved). Every
step takes a fixed 25 ms, so that re-fitted step-time coefficients do not move the pins. The replays: the first
3,000 requests of Mooncake's FAST'25 conversation trace (as benchmarks/simulate_bench.py replays the whole trace,
arrivals compressed) on a 16 GiB pool, without tiers and with a CPU and a disk tier small enough that segments fall
through both and come back from each; and the built-in chat workload (shared system prompts of uneven
lengths) on a small pool and tiers. Pinned: the whole summary, every request's records, the time series,
the tiers' contents in LRU order and where each key sits; every figure compares exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import lzma
import sys
import tempfile
from pathlib import Path

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import deployment_for_gpus
from kvplan.planning.plan import Request
from kvplan.simulator.adapter import sim_model
from kvplan.simulator.engine import Engine, EngineConfig
from kvplan.simulator.traces import load_trace
from kvplan.simulator.workload import WORKLOADS, generate
from kvplan.sources.resolve import resolve_model

HERE = Path(__file__).parent
TRACE = HERE / "fixtures" / "traces" / "mooncake_fast25_conversation.jsonl.xz"
PINNED = HERE / "fixtures" / "simulate" / "replay_pinned.json"
GIB = 2**30
STEP_S = 0.025
# replay -> (pool bytes, offload tiers): Mooncake's hash blocks on a 16 GiB pool, a 4 GiB CPU and a 16 GiB disk tier;
# the chat workload's system prompts (some larger than the CPU tier, which they skip) on 1.5 GiB, 64 and 96 MiB tiers
SETTINGS = {"mooncake": (16 * GIB, ()),
            "mooncake tiers": (16 * GIB, (("cpu", 4 * GIB, 64e9), ("disk", 16 * GIB, 6.8e9))),
            "chat tiers": (3 * GIB // 2, (("cpu", GIB // 16, 64e9), ("disk", 3 * GIB // 32, 6.8e9)))}


def _model(pool: int):
    spec, gpu = resolve_model("llama-3.1-8b").spec, find_gpu("h100")
    plan = resolve_engine().plan(spec, gpu, deployment_for_gpus(spec, 1), Request(context=32768))
    # every step 25 ms: the pins hold the cache's bookkeeping, not the step-time model's coefficients
    return dataclasses.replace(sim_model(plan, spec, gpu), kv_budget_bytes=pool, fixed_step_s=STEP_S)


def _mooncake(n: int, qps: float) -> list:
    """The first `n` requests of Mooncake's FAST'25 conversation trace, arrivals compressed to `qps` on average."""
    lines = lzma.decompress(TRACE.read_bytes()).decode().splitlines(keepends=True)[:n]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "head.jsonl"
        path.write_text("".join(lines))
        base, _ = load_trace(str(path))
    scale = len(base) / (qps * base[-1].arrival)
    return [dataclasses.replace(r, arrival=r.arrival * scale) for r in base]


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _replay(name: str) -> dict:
    """One replay's results as plain JSON values: summary, digests of the per-request records and of the tiers."""
    pool, tiers = SETTINGS[name]
    reqs = generate(WORKLOADS["chat"], 4.0, 300.0, seed=1) if name == "chat tiers" else _mooncake(3000, 2.0)
    eng = Engine(_model(pool), EngineConfig(tiers=tiers))
    rec = eng.run(reqs)
    records = [rec.arrival, rec.first, rec.finish, rec.output, rec.prompt, rec.preemptions, rec.reload]
    tiers = [[list(t.lru.items()), t.used, t.peak, t.area] for t in eng.cache.tiers]
    return json.loads(json.dumps({"summary": rec.summary(2.0, 0.1), "records": _digest(records),
                                  "series": _digest(rec.series), "tiers": _digest(tiers),
                                  "where": _digest(sorted(eng.cache.where.items()))}))


REPLAYS = ("mooncake", "mooncake tiers", "chat tiers")


def test_replays_give_the_pinned_results():
    pinned = json.loads(PINNED.read_text())
    for name in REPLAYS:
        got = _replay(name)
        assert got == pinned[name], name


def test_pinned_replays_exercise_hits_evictions_and_both_tiers():
    # what the pins cover: prefix hits, preemptions, GPU evictions, segments pushed through both tiers and out of
    # the last, and hits served back from each tier
    pinned = json.loads(PINNED.read_text())
    for name in REPLAYS:
        s = pinned[name]["summary"]
        assert s["prefix_cache"]["prefix_hit_tokens"] > 0 and s["prefix_cache"]["prefix_evictions"] > 0, name
    s = pinned["mooncake"]["summary"]
    assert s["requests"]["preemptions"] > 0 and s["prefix_cache"]["prefix_hit_tokens_preempted"] > 0
    for name in ("mooncake tiers", "chat tiers"):
        cpu, disk = pinned[name]["summary"]["offload"]["tiers"]
        assert cpu["segments_dropped"] > 0 and disk["segments_dropped"] > 0, (name, cpu, disk)
        assert cpu["hit_tokens"] + cpu["hit_tokens_preempted"] > 0 and disk["hit_tokens"] > 0, (name, cpu, disk)



def test_a_lookup_asked_again_sees_every_change():
    # PrefixCache.lookup answers a question asked again from its last answer while the pool and the tiers hold the
    # same keys: publishing, evicting (down into a tier) and taking back each change the answer, and the list it
    # returns is the caller's own (the engine extends a sequence's list in place)
    from kvplan.simulator.prefix import PrefixCache

    cache = PrefixCache(16, 1, (("cpu", 1000, None),))
    prefix = (("a", 32), ("b", 32), ("c", 32))
    assert cache.lookup(prefix, 200)[1] == 0
    segs, _ = cache.publish_run(prefix, 0, 0, 64)  # a and b
    found, hit, lower, _ = cache.lookup(prefix, 200)
    assert [s.key for s in found] == ["a", "b"] and hit == 64 and not lower
    found.append("mine")
    assert [s.key for s in cache.lookup(prefix, 200)[0]] == ["a", "b"]
    cache.release(segs)
    cache.evict(2)  # b, the deeper, goes first: down to the CPU tier
    found, hit, lower, gpu = cache.lookup(prefix, 200)
    assert [s.key for s in found] == ["a"] and hit == 64 and gpu == 32 and [k for k, _, _ in lower] == ["b"]
    cache._take("b")
    assert cache.lookup(prefix, 200)[1:3] == (32, [])
    assert cache.lookup(prefix, 40)[1] == 32 and cache.lookup(prefix, 20)[1] == 0  # the limit is part of the question


if __name__ == "__main__":
    if "--write" in sys.argv:
        PINNED.write_text(json.dumps({name: _replay(name) for name in REPLAYS}, indent=1, sort_keys=True) + "\n")
    else:
        for name in REPLAYS:
            r = _replay(name)
            print(name, json.dumps({k: r["summary"][k] for k in ("requests", "prefix_cache", "time")}),
                  json.dumps(r["summary"].get("offload", {}).get("tiers", [])))
