"""Cold-start wall time of `kvplan fit` against `python -c pass`, measured in one run.

Run by hand: `.venv/bin/python benchmarks/cold_start.py [N]`. Each command is started N times
(default 15) as a fresh process, interleaved so both see the same machine load; the script prints
the median and the minimum of each and of their difference, and which heavy modules (torch,
plotly, huggingface_hub) the fit process imported: it must be none. Target: fit ≤ 0.35 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

FIT = ["fit", "llama-3-70b", "--gpu", "a100-80", "--ctx", "128k"]
HEAVY = ("torch", "plotly", "huggingface_hub", "numpy", "httpx2")


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main(n: int) -> None:
    kvplan = str(Path(sys.executable).with_name("kvplan"))
    empty, fit = [], []
    wall([sys.executable, "-c", "pass"]), wall([kvplan, *FIT])  # warm the file cache once
    for _ in range(n):
        empty.append(wall([sys.executable, "-c", "pass"]))
        fit.append(wall([kvplan, *FIT]))
    probe = ("import sys, runpy; sys.argv = ['kvplan', " + ", ".join(repr(a) for a in FIT) + "]\n"
             "try:\n    runpy.run_module('kvplan', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stderr
    loaded = [line[len("HEAVY:"):] for line in err.splitlines() if line.startswith("HEAVY:")]
    print(f"runs: {n} each, interleaved; python {sys.version.split()[0]}")
    print(f"python -c pass      median {statistics.median(empty):.3f} s   min {min(empty):.3f} s")
    print(f"kvplan {' '.join(FIT)}   median {statistics.median(fit):.3f} s   min {min(fit):.3f} s")
    print(f"difference          median {statistics.median(fit) - statistics.median(empty):.3f} s   "
          f"min {min(fit) - min(empty):.3f} s")
    print(f"heavy modules imported by fit: {loaded[-1] if loaded and loaded[-1] else 'none'}")
    print(f"target fit <= 0.35 s: {'met' if statistics.median(fit) <= 0.35 else 'NOT met'}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
