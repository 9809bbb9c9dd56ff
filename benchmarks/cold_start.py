"""Cold-start wall time of common kvplan commands, for this venv or against another one.

Run by hand: `.venv/bin/python benchmarks/cold_start.py [-n N] [--against OTHER/.venv/bin/python]`.
Each command (`fit llama-3-70b --gpu a100-80 --ctx 128k`, `gpus`, `fit qwen3-8b --gpu h100`, and
`python -c pass` for the interpreter's own start) is started N times (default 21) as a fresh
process; with `--against`, the other interpreter's kvplan runs right after this one's each time, so
both see the same machine load. Prints the median, the quartiles and the minimum of each, in wall
seconds and in CPU seconds (user + system: less disturbed by other jobs on a shared machine), and which
heavy modules (torch, plotly, huggingface_hub, numpy) the fit process imported: it must be none.
Target: fit <= 0.35 s.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "python -c pass": None,
    "fit llama-3-70b --gpu a100-80 --ctx 128k": ["fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k"],
    "gpus": ["gpus"],
    "fit qwen3-8b --gpu h100": ["fit", "qwen3-8b", "--gpu", "h100"],
}
HEAVY = ("torch", "plotly", "huggingface_hub", "numpy", "httpx2")


def argv(python: str, args: list[str] | None) -> list[str]:
    if args is None:
        return [python, "-c", "pass"]
    return [str(Path(python).with_name("kvplan")), *args]


def wall(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of cmd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_modules(python: str) -> str:
    fit = COMMANDS["fit llama-3-70b --gpu a100-80 --ctx 128k"]
    probe = ("import sys, runpy; sys.argv = ['kvplan', " + ", ".join(repr(a) for a in fit) + "]\n"
             "try:\n    runpy.run_module('kvplan', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    err = subprocess.run([python, "-c", probe], capture_output=True, text=True).stderr
    loaded = [line[len("HEAVY:"):] for line in err.splitlines() if line.startswith("HEAVY:")]
    return loaded[-1] if loaded and loaded[-1] else "none"


def summary(times: list[float]) -> str:
    q1, med, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    return f"median {med:.3f} s  (q1 {q1:.3f}, q3 {q3:.3f}, min {min(times):.3f}, max {max(times):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=21, help="runs of each command per interpreter")
    parser.add_argument("--against", help="another venv's python (its kvplan script sits beside it)")
    args = parser.parse_args()
    pythons = {"this": sys.executable}
    if args.against:
        pythons["other"] = args.against
    times = {(label, who): [] for label in COMMANDS for who in pythons}
    cpu = {(label, who): [] for label in COMMANDS for who in pythons}
    for label, cmd in COMMANDS.items():  # warm the file cache once
        for python in pythons.values():
            wall(argv(python, cmd))
    for _ in range(args.n):
        for label, cmd in COMMANDS.items():
            for who, python in pythons.items():
                elapsed, used = wall(argv(python, cmd))
                times[label, who].append(elapsed)
                cpu[label, who].append(used)
    print(f"runs: {args.n} of each, interleaved; python {sys.version.split()[0]}")
    for who, python in pythons.items():
        print(f"{who}: {python}")
    for label in COMMANDS:
        print(label)
        for kind, table in (("wall", times), ("cpu", cpu)):
            for who in pythons:
                print(f"  {who:5} {kind:4}  {summary(table[label, who])}")
            if args.against:
                diff = statistics.median(table[label, "this"]) - statistics.median(table[label, "other"])
                print(f"  this - other, {kind} medians: {diff * 1000:+.0f} ms")
    for who, python in pythons.items():
        print(f"heavy modules imported by fit ({who}): {heavy_modules(python)}")
    fit = statistics.median(times["fit llama-3-70b --gpu a100-80 --ctx 128k", "this"])
    print(f"target fit <= 0.35 s: {'met' if fit <= 0.35 else 'NOT met'} ({fit:.3f} s)")


if __name__ == "__main__":
    main()
