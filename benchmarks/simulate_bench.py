"""Time of `kvplan simulate` on 100,000 requests (generation + simulation + summary), one core.

Run by hand: `.venv/bin/python benchmarks/simulate_bench.py [REQUESTS]`. The deployment is
llama-3.1-70b on 4 x H100 (kvplan's plan, through kvplan.simulator.adapter); the workloads are the
built-in chat (shared system prompts, prefix caching on) and code, at a rate that keeps the engine
busy, in the paged pool and in a contiguous max-length pool. Prints wall and CPU seconds per run
(CPU time is the one-core figure; wall time also counts other processes on a shared machine).
Target: 100,000 requests in at most 10 s on one core. The last row replays Mooncake's FAST'25
conversation trace (copies of it, arrivals compressed) with a CPU and a disk tier, whose prefixes come
back from the tiers; the `code tiers` row has tiers that its workload never hits back.
"""

from __future__ import annotations

import gc
import sys
import time


def main(n: int) -> None:
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.deploy import deployment_for_gpus
    from kvplan.engines import resolve_engine
    from kvplan.engines.admission import admission
    from kvplan.engines.scheduler import prefill_first
    from kvplan.planning.plan import Request
    from kvplan.sources.resolve import resolve_model
    from kvplan.simulator.adapter import sim_model
    from kvplan.simulator.engine import Engine, EngineConfig
    from kvplan.simulator.workload import WORKLOADS, generate

    spec, gpu = resolve_model("llama-3.1-70b").spec, find_gpu("h100")
    plan = resolve_engine().plan(spec, gpu, deployment_for_gpus(spec, 4), Request(context=32768))
    model = sim_model(plan, spec, gpu)
    print(f"{model.name} on 4 x {gpu.key}: KV pool {model.kv_budget_bytes / 2**30:.2f} GiB per GPU")
    # Offload tiers (#23): a CPU tier of 64 GiB per GPU behind PCIe Gen5 (64 GB/s) and a disk tier of
    # 512 GiB per GPU at an eighth of an 8-drive array's 54.4 GB/s: the dgx-h100 host profile's figures.
    tiers = (("cpu", 64 * 2**30, 64e9), ("disk", 512 * 2**30, 54.4e9 / 8))
    # the engines' own admission rules on the paged pool (kvplan.engines.admission): TensorRT-LLM's default, SGLang's
    admit = {"no-evict": admission("trtllm"), "sglang": admission("sglang")}
    first = {"no-evict": prefill_first("trtllm"), "sglang": prefill_first("sglang")}  # and their steps
    for workload, qps, mode in (("chat", 20.0, "paged"), ("code", 40.0, "paged"), ("chat", 20.0, "contiguous"),
                                ("code", 40.0, "tiers"), ("mooncake", 30.0, "tiers"), ("code", 40.0, "no-evict"),
                                ("code", 40.0, "sglang")):
        wall, cpu = time.perf_counter(), time.process_time()
        reqs = mooncake(n, qps) if workload == "mooncake" else generate(WORKLOADS[workload], qps, n / qps, seed=0)
        if workload != "mooncake":  # mooncake's copies, frozen while they lived, are gone now (as they went before
            gc.unfreeze()  # the freeze: once this row's requests replace them); what else was frozen thaws
        # pinned: the engine-neutral plan's limits, 256 running and 8,192 tokens a step (kvplan.simulator.limits)
        pinned = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
        if mode in admit:
            # SGLang's own steps too, as simulate --engine sglang takes them (a prefill batch whenever one forms)
            cfg = EngineConfig(mode="paged", admission=admit[mode], prefill_first=first[mode], **pinned)
        else:
            cfg = (EngineConfig(mode="paged", tiers=tiers, **pinned) if mode == "tiers"
                   else EngineConfig(mode=mode, **pinned))
        rec = Engine(model, cfg).run(reqs)
        s = rec.summary(2.0, 0.1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{workload:5} {mode:10} {len(reqs):>7,} requests, {s['time']['steps']:>9,} steps: "
              f"{wall:5.2f} s wall, {cpu:5.2f} s CPU; mean running {s['concurrency']['mean_running']:.0f}, "
              f"{s['requests']['preemptions']:,} preemptions"
              + "".join(f"; {x['tier']} hits {x['hit_rate_pct']:.1f}%" for x in s.get("offload", {}).get("tiers", ())))


def mooncake(n: int, qps: float) -> list:
    """n requests of Mooncake's FAST'25 conversation trace (tests/fixtures/traces, 12,031 requests), its copies
    one after another, each copy's prefixes its own, arrivals compressed to `qps` on average: a trace whose
    prefixes are reused at distances past the GPU pool, so the tiers are hit."""
    import gc
    import lzma
    import tempfile
    from collections import deque
    from operator import attrgetter, itemgetter
    from pathlib import Path

    from kvplan.core.collector import collector_paused
    from kvplan.simulator.traces import load_trace

    xz = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "traces" / "mooncake_fast25_conversation.jsonl.xz"
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        f.write(lzma.decompress(xz.read_bytes()))
        f.flush()
        base, _ = load_trace(f.name)
    span = base[-1].arrival
    scale = len(base) / (qps * span)
    # load_trace shares one segment tuple (block name, tokens) among the requests that hold the block; so do the
    # copies, each its own (1.4 of 2.3 million segments, once per copy, not per request). `tokens[i]` is block i's
    # (every Mooncake block the trace's block size), each request's prefix block indices, once; copy c names block
    # i `c * len(keys) + i` (a copy's blocks numbered apart from every other copy's, as load_trace numbers a
    # trace's), in C loops
    keys: dict = {}
    deque(map(keys.update, map(attrgetter("prefix"), base)), 0)  # name -> tokens, in order of first sight
    tokens = list(keys.values())
    keys = {k: i for i, k in enumerate(keys)}
    parts = [tuple(map(keys.__getitem__, map(itemgetter(0), r.prefix))) for r in base]
    out: list = []
    with collector_paused():  # 1.4 million prefix tuples and no cycle: the engine's run pauses it too
        _copies(out, n, base, parts, tokens, span, scale)
        # and into the permanent generation, so that the collector's next pass, once it runs again, does not walk
        # them all (0.22 to 0.45 s of the row; main() thaws what is left once the next row's requests replace them)
        gc.freeze()
    return out


def _copies(out: list, n: int, base: list, parts: list, tokens: list, span: float, scale: float) -> None:
    """Append copies of `base` to `out` until it holds n requests, each copy's blocks numbered apart: its requests'
    prefixes (`parts`, block indices; `tokens`, each block's) from segment tuples of its own."""
    from kvplan.simulator.workload import SimRequest

    while len(out) < n:
        copy = len(out) // len(base)
        own = list(zip(range(copy * len(tokens), (copy + 1) * len(tokens)), tokens))
        for r, idx in zip(base[: n - len(out)], parts):
            out.append(SimRequest(len(out), (r.arrival + copy * span) * scale, r.prompt, r.output,
                                  tuple(map(own.__getitem__, idx))))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
