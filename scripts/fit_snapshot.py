"""Record `kvplan fit --json` for every catalog model x 4 GPUs x 3 contexts x every engine
(`--extra`: check-log of every fixture log, cheapest, fit --emit/--explain, simulate and sweep).

A refactor's before/after check: run it on the old tree and the new one, then diff the two files.
Each line is one case: the arguments, the exit code, stdout and stderr, in-process via CliRunner.

    python scripts/fit_snapshot.py > /tmp/before.jsonl
"""

import json
import sys

from typer.testing import CliRunner

try:
    from kvplan.sources.catalog import bundled_specs
except ImportError:  # a tree from before the house moved the modules (742bb1d and older)
    from kvplan.catalog import bundled_specs
from kvplan.cli import app

GPUS = ("a100-80", "h100", "l40s", "mi300x")
CONTEXTS = ("4k", "32k", "128k")
ENGINES = (None, "vllm", "sglang", "trtllm", "llama.cpp", "transformers")


def main() -> None:
    runner = CliRunner()
    for model in sorted(s.name for s in bundled_specs()):
        for gpu in GPUS:
            for ctx in CONTEXTS:
                for engine in ENGINES:
                    args = ["fit", model, "--gpu", gpu, "--ctx", ctx, "--json"]
                    if engine:
                        args += ["--engine", engine]
                    r = runner.invoke(app, args)
                    err = r.stderr if hasattr(r, "stderr") else ""
                    print(json.dumps({"args": args, "rc": r.exit_code, "out": r.stdout, "err": err}))
    sys.stdout.flush()


if __name__ == "__main__" and not sys.argv[1:]:
    main()


def extra() -> None:
    """check-log on every fixture log, cheapest, and fit --emit: the other users of the engines."""
    from pathlib import Path

    runner = CliRunner()
    cases = [["check-log", str(p), "--json"] for p in sorted(Path("tests/fixtures/logs").glob("*.log"))]
    cases += [["check-log", str(p), "--json", "--gpu", "h100"] for p in sorted(Path("tests/fixtures/logs").glob("*.log"))]
    for model in ("llama-3.1-70b", "qwen3-30b-a3b", "deepseek-v3", "gemma-3-27b-it", "gpt-oss-120b"):
        cases.append(["cheapest", model, "--ctx", "32k", "--concurrency", "16", "--json"])
        cases.append(["cheapest", model, "--ctx", "32k", "--concurrency", "16", "--json", "--engine", "vllm"])
        for engine in ("vllm", "sglang", "llama.cpp"):
            cases.append(["fit", model, "--gpu", "h100", "--ctx", "32k", "--json", "--emit", engine])
            cases.append(["fit", model, "--gpu", "h100", "--gpus", "8", "--ctx", "32k", "--explain", "--emit", engine])
    sim = ["--workload", "chat", "--qps", "4", "--duration", "20", "--json"]
    cases += [["simulate", "llama-3.1-8b", "--gpu", "h100", *sim],
              ["simulate", "llama-3.1-70b", "--gpu", "h100", "--gpus", "4", "--max-model-len", "32k", *sim],
              ["simulate", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--max-model-len", "32k", *sim],
              ["simulate", "gpt-oss-120b", "--gpu", "h100", "--max-model-len", "32k", "--compare", *sim],
              ["simulate", "qwen3-30b-a3b", "--gpu", "l40s", "--gpus", "2", "--max-model-len", "16k", "--engine", "vllm", *sim],
              ["sweep", "--models", "llama-3.1-70b,qwen3-30b-a3b,deepseek-v3", "--gpu", "a100-80,h100,mi300x",
               "--ctx", "8k,128k", "--json"]]
    for args in cases:
        r = runner.invoke(app, args)
        print(json.dumps({"args": args, "rc": r.exit_code, "out": r.stdout, "err": r.stderr}))


if __name__ == "__main__" and sys.argv[1:] == ["--extra"]:
    extra()
