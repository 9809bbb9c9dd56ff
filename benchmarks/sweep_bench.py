"""Time of a ~100,000-plan sweep, and of turning it into CSV, JSON and HTML.

Run by hand: `.venv/bin/python benchmarks/sweep_bench.py [REPEATS]`. The grid is 50 bundled models
× 30 GPUs × 6 contexts × 3 KV dtypes × 4 GPU counts (1, 2, 4, 8) = 108,000 combinations; those
whose tp does not divide a model's attention heads are skipped and counted, as `kvplan sweep`
does. Each stage runs REPEATS times (default 3) in this process; the script prints the best and
the median. Target: the sweep itself (every plan made and ranked) under 2 s.
"""

from __future__ import annotations

import io
import statistics
import sys
import time


CPU: list[str] = []  # per stage, the best CPU seconds (less disturbed by other jobs than wall time)


def timed(fn, repeats: int):
    times, cpu, result = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU.append(f"{min(cpu):.2f}")
    return result, min(times), statistics.median(times)


def main(repeats: int) -> None:
    from kvplan.sources.catalog import bundled_specs
    from kvplan.report.export import json_document, sweep_rows, write_csv
    from kvplan.hardware.gpus import load_gpus
    from kvplan.compare.sweep import sweep

    models = sorted(bundled_specs(), key=lambda s: s.name)[:50]
    gpus = list(load_gpus().values())[:30]
    contexts = [4096, 8192, 32768, 65536, 131072, 262144]
    kv = ["bf16", "fp8", "fp32"]
    counts = [1, 2, 4, 8]
    grid = len(models) * len(gpus) * len(contexts) * len(kv) * len(counts)
    print(f"grid: {len(models)} models × {len(gpus)} GPUs × {len(contexts)} contexts × {len(kv)} KV dtypes "
          f"× {len(counts)} GPU counts = {grid:,} combinations")

    result, best, med = timed(lambda: sweep(models, gpus, counts, contexts, kv), repeats)
    n = len(result.plans)
    print(f"sweep (plan + rank): {n:,} plans, {result.skipped_plans:,} skipped; best {best:.2f} s, "
          f"median {med:.2f} s = {best / n * 1e6:.1f} µs per plan  (target < 2 s)")
    rows, best, med = timed(lambda: sweep_rows(result), repeats)
    print(f"rows (plan_to_dict + prices): best {best:.2f} s, median {med:.2f} s")

    def to_csv():
        out = io.StringIO()
        write_csv(rows, out)
        return out.getvalue()

    text, best, med = timed(to_csv, repeats)
    print(f"CSV: {len(text) / 1e6:.1f} MB; best {best:.2f} s, median {med:.2f} s")
    text, best, med = timed(lambda: json_document({"plans_count": n}, rows), repeats)
    print(f"JSON: {len(text) / 1e6:.1f} MB; best {best:.2f} s, median {med:.2f} s")
    from kvplan.report.html import render_html

    text, best, med = timed(lambda: render_html(rows), 1)
    print(f"HTML (charts of the best deployments, table of the best 2,000 plans): {len(text) / 1e6:.1f} MB; "
          f"{best:.2f} s")
    print("best CPU s (sweep, rows, CSV, JSON, HTML):", " ".join(CPU))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
