"""Layer 10 of 14, simulator: capacity for a real workload, an event-driven simulation of a continuous-batching
engine. Imports planning (a Plan's KV pool) and below.

A deployment's KV pool (from a kvplan plan, see kvplan.simulator.adapter) serves a stream of
requests (built-in length distributions or a trace file) under a vLLM-style scheduler, with a
paged pool (pages, chunked prefill, prefix caching; admission and preemption as the engine does them:
vLLM's recompute, TensorRT-LLM's reservations to completion, SGLang's new_token_ratio) or a contiguous one
(one reservation per request). It reports waste, occupancy, concurrency, preemptions,
throughput, latency percentiles and goodput. Pure Python, seeded, no numpy.

Modules: workload (distributions, Poisson arrivals), traces (CSV/JSONL, public trace layouts),
model (the pool and the roofline step time), prefix (prefix cache), engine (the scheduler), admit (the
engines' admission rules),
results (integrals and figures), adapter (plan -> SimModel), report (JSON, CSV, HTML).
"""
