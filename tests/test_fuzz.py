"""A bounded, deterministic fuzzer over what users hand kvplan: GPU profiles, prices files, start-up logs, flags,
--offload tiers.

Each case takes a real input (a bundled GPU profile, a prices file, a log fixture, a working command
line), mutates it a few times with a seeded random.Random, and runs the CLI in-process (CliRunner).
The rule is the project's: bad input ends as `Error: ...` on stderr with an exit code, never as
"internal error" or a traceback, and never as a hang (each case's input is a few kB at most, and a
SIGALRM ends a case that runs past CASE_SECONDS).

CI runs CASES cases per target (a few hundred in all). More by hand:
    KVPLAN_FUZZ_CASES=2500 KVPLAN_FUZZ_SEED=7 .venv/bin/python -m pytest -q tests/test_fuzz.py
A failure names the target, seed and case number; `fuzz_case(target, seed, i)` rebuilds the input.

What it found, all fixed with a regression test in tests/test_hostile_inputs.py: check-log numbers
like `.`, `1.2.3`, `00` and 400 digits (ValueError, ZeroDivisionError, OverflowError), quadratic
regexes on long lines, absurd n_layer (a hang); YAML alias bombs (a hang); `[/]` in a name (rich
MarkupError); file names too long for the filesystem (OSError); a 400-digit price (OverflowError in
float()); a 1,800-character unknown option (14 s in Click's "did you mean", now refused by main()).
The `offload` target (issue 25) mutates the README's --offload command lines (tier specs, backends, hosts,
engines); it found a 400-digit tier size to be an OverflowError (tests/test_issue25.py).
"""

from __future__ import annotations

import os
import random
import re
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import REPO

CASES = int(os.environ.get("KVPLAN_FUZZ_CASES", "75"))
SEED = int(os.environ.get("KVPLAN_FUZZ_SEED", "0"))
CASE_SECONDS = 20  # a case is a few kB of input; anything this slow is a hang
MAX_INPUT = 64 * 1024  # bytes of mutated input per case

LOGS = sorted((REPO / "tests" / "fixtures" / "logs").glob("*.log"))
PROFILES = sorted((REPO / "kvplan" / "hardware" / "profiles").glob("*.yaml"))
PRICES = "currency: USD\nh100: 2.49\nh200: 3.10\na100-80: 1.29\nl40s: 0.99\n\"NVIDIA A10\": 0.6\nt4: 0.35\n"

NUMBERS = [".", "1.2.3", "00", "0", "-1", "-0", "9" * 400, "1e400", "1e-400", "nan", "inf", "-inf", "0.0000001",
           "4294967296", "18446744073709551617", "1,000", "0x10", "1_000", "", " ", "1.", ".5", "007", "3e9", "NaN"]
WORDS = ["[/]", "[bold]", "\\", "'", '"', "&a", "*a", "!!python/object:os.system", "{", "}", "[", "]", ":", "- ",
         "null", "~", "true", "no", "é", "\u202e", "\x00", "\t", "#", "---", "...", "%YAML 1.1", "<<: *a"]
FLAG_VALUES = NUMBERS + ["1k", "32K", "1M", "1g", "0k", "-1k", "1e3k", "999999999999999k", "a100", "h100",
                         "NVIDIA H100 80GB HBM3", "fp8", "q4_0", "q4_k_m", "int4", "auto", "all", "[/]", "-", "--json"]

runner = CliRunner()


class Hang(Exception):
    pass


@contextmanager
def deadline(seconds: int):
    def ring(*_):
        raise Hang(f"case ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --- mutations ------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|\w+|[^\w\s]")


def mutate(text: str, rng: random.Random) -> str:
    """One random edit of `text`: a number, a word, a line, or the end of the text."""
    lines = text.split("\n")
    kind = rng.randrange(9)
    if kind <= 2:  # replace a number (the commonest source of crashes)
        spots = [m for m in re.finditer(r"\d+(?:[.,]\d+)*", text)]
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + rng.choice(NUMBERS) + text[m.end():]
    if kind == 3:  # replace a token with a hostile word
        spots = list(_TOKEN.finditer(text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + rng.choice(WORDS) + text[m.end():]
    if kind == 4 and lines:  # drop a line
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    if kind == 5 and lines:  # repeat a line, sometimes many times
        i = rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * rng.choice((1, 2, 50))
        return "\n".join(lines)
    if kind == 6 and lines:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if kind == 7:  # a long line of one character class
        i = rng.randrange(len(lines) + 1)
        lines[i:i] = [rng.choice(("9", ".", " ", "a", "1,", "model='")) * rng.choice((1000, 20000))]
        return "\n".join(lines)
    return text[: rng.randrange(len(text) + 1)]  # cut short


def mutated(text: str, rng: random.Random) -> str:
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        text = mutate(text, rng)
    return text[:MAX_INPUT]


# --- targets: each builds (args, files) for one case ------------------------------------------------

@dataclass
class Case:
    args: list
    files: dict  # relative path -> text


def _log_case(rng: random.Random) -> Case:
    log = rng.choice(LOGS)
    flags = []
    for opt, values in (("--model", ["llama-3.1-8b", "qwen3-30b-a3b", "gpt2", "c4ai-command-r-v01", "qwq-32b"]),
                        ("--gpu", ["rtx-3090", "h100", "l4", "a100-80"]), ("--tp", ["1", "2", "4", "0", "-3"]),
                        ("--kv-dtype", ["fp8", "q8_0", "f32", "bf16", "nope"]),
                        ("--engine-version", ["0.6.6", "0.11.0", "0.4.6", "2024-03", "current", "x"])):
        if rng.random() < 0.25:
            flags += [opt, rng.choice(values)]
    if rng.random() < 0.3:
        flags.append("--json")
    return Case(["check-log", "{tmp}/case.log", *flags], {"case.log": mutated(log.read_text(), rng)})


def _profile_case(rng: random.Random) -> Case:
    data = yaml.safe_load(rng.choice(PROFILES).read_text())
    data.update(key="fuzz", aliases=["fuzz-gpu"])
    text = mutated(yaml.safe_dump(data, sort_keys=False), rng)
    args = rng.choice([["gpus", "--hw-profiles", "{tmp}/hw"],
                       ["fit", "gpt2", "--gpu", "fuzz", "--ctx", "1k", "--hw-profiles", "{tmp}/hw"],
                       ["fit", "qwen3-8b", "--gpu", "fuzz", "--ctx", "8k", "--batch", "4", "--hw-profiles", "{tmp}/hw"],
                       ["cheapest", "gpt2", "-n", "2", "--ctx", "1k", "--gpu", "fuzz,t4", "--hw-profiles", "{tmp}/hw"]])
    return Case(args, {"hw/fuzz.yaml": text})


def _prices_case(rng: random.Random) -> Case:
    text = mutated(PRICES, rng)
    model = rng.choice(["gpt2", "qwen3-8b", "llama-3.1-8b"])
    args = ["cheapest", model, "-n", rng.choice(["1", "8", "64"]), "--ctx", rng.choice(["1k", "8k", "32k"]),
            "--prices", "{tmp}/prices.yaml"]
    if rng.random() < 0.5:
        args += ["--gpu", rng.choice(["h100,a100-80,l40s", "all", "t4"])]
    return Case(args, {"prices.yaml": text})


BASE_COMMANDS = [
    ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", "--batch", "8"],
    ["fit", "qwen3-30b-a3b", "--gpu", "a100-80", "--ctx", "128k", "--kv-dtype", "fp8", "--gpus", "2"],
    ["fit", "gpt2", "--gpu", "t4", "--engine", "vllm", "--engine-opt", "max_num_batched_tokens=4096"],
    ["fit", "gpt-oss-20b", "--gpu", "l4", "--engine", "llama.cpp", "--weight-dtype", "int4", "--json"],
    ["sweep", "--models", "gpt2,qwen3-0.6b", "--gpu", "t4,l4", "--ctx", "1k,8k", "--top", "3"],
    ["cheapest", "llama-3.1-8b", "-n", "16", "--ctx", "8k", "--gpu", "h100,l40s", "--max-gpus", "8"],
    ["models", "show", "qwen3-8b"],
    ["gpus", "--json"],
    ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512", "--prefill-tp", "1", "--decode-tp", "2"],
    ["disagg", "qwen3-8b", "--gpu", "l40s", "--isl", "2k", "--osl", "256", "--qps", "4", "--duration", "5",
     "--max-gpus", "4", "--link", "roce-400g"],
]


def _flags_case(rng: random.Random) -> Case:
    args = list(rng.choice(BASE_COMMANDS))
    for _ in range(rng.choice((1, 2, 3))):
        i = rng.randrange(1, len(args))
        edit = rng.randrange(4)
        if edit == 0:
            args[i] = rng.choice(FLAG_VALUES)
        elif edit == 1:
            del args[i]
        elif edit == 2:
            args.insert(i, rng.choice(["--ctx", "--batch", "--gpus", "--tp", "--gpu-memory-utilization",
                                       "--block-size", "--overhead", "--kv-dtype", "--json", "--top", "-n"]))
        elif not args[i].startswith("-"):  # a long value; a long unknown *option* is main()'s to refuse
            args[i] = args[i] * rng.choice((2, 300))
        if not args[1:]:
            break
    return Case(args, {})


# --offload (issue 25): the README's working command lines, with hostile tier specs, backends and hosts
OFFLOAD_COMMANDS = [
    ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "32k", "--engine", "vllm", "--offload", "cpu:64GiB"],
    ["fit", "qwen3-32b", "--gpu", "h200", "--engine", "sglang", "--offload", "cpu:2x", "--host", "dgx-h200"],
    ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k", "--offload", "cpu:64GiB", "--json"],
    ["sweep", "-m", "llama-3.1-8b", "-c", "32k", "-g", "h100", "--gpu-counts", "1,2", "--engine", "vllm",
     "--offload", "cpu:256GiB"],
    ["cheapest", "llama-3.1-8b", "--ctx", "32k", "-n", "4", "--gpu", "h100", "--max-gpus", "2", "--engine", "vllm",
     "--offload", "cpu:512GiB", "--host", "dgx-h100"],
    ["simulate", "llama-3.1-8b", "--gpu", "h100", "--duration", "2", "--qps", "2", "--offload", "cpu:64GiB",
     "--host", "dgx-h100"],
]
TIERS = ["cpu", "disk", "remote", "gpu", "CPU", "", "cpu:cpu", "[/]", "nvme"]
SIZES = ["64GiB", "2x", "auto", "0", "0x", "-1GiB", "1e400GiB", "nanx", "infx", "0.5x", "9" * 400 + "TiB", "1GB",
         "64", "GiB", "1e-400x", "18446744073709551617GiB", "64GiB,cpu:64GiB", "2x,disk:1TiB", ""]


def _offload_value(rng: random.Random) -> str:
    value = f"{rng.choice(TIERS)}:{rng.choice(SIZES + NUMBERS)}"
    if rng.random() < 0.3:
        value += "," + f"{rng.choice(TIERS)}:{rng.choice(SIZES)}"
    return value if rng.random() < 0.9 else rng.choice(WORDS + NUMBERS)


def _offload_case(rng: random.Random) -> Case:
    args = list(rng.choice(OFFLOAD_COMMANDS))
    for _ in range(rng.choice((1, 2))):
        edit = rng.randrange(4)
        if edit == 0:
            args[args.index("--offload") + 1] = _offload_value(rng)
        elif edit == 1:
            args += ["--offload-backend", rng.choice(["native", "lmcache", "kvbm", "mooncake", "", "[/]", "NATIVE"])]
        elif edit == 2:
            args += ["--host", rng.choice(["dgx-h100", "gb200-nvl72-tray", "nope", "", "[/]", "../../etc/passwd"])]
        else:
            args += ["--engine", rng.choice(["vllm", "sglang", "trtllm", "llama.cpp", "transformers"])]
    return Case(args, {})



BENCH = sorted(p for p in (REPO / "tests" / "fixtures" / "bench").iterdir() if p.name != "SOURCES.md")


def _bench_case(rng: random.Random) -> Case:
    """check-bench on a mutated published benchmark result (each case simulates its load: fewer cases)."""
    src = rng.choice(BENCH)
    flags = []
    for opt, values in (("--model", ["llama-3.1-8b", "qwen3-0.6b", "gpt-oss-20b", "nope"]),
                        ("--gpu", ["h100", "l40s", "rtx-4090", "nope"]), ("--tp", ["1", "2", "0", "-3"]),
                        ("--input-len", ["1", "512", "0", "99999999"]), ("--output-len", ["1", "64", "-1"]),
                        ("--engine", ["vllm", "sglang", "trtllm", "llama.cpp", "x"])):
        if rng.random() < (0.7 if opt in ("--model", "--gpu") else 0.15):
            flags += [opt, rng.choice(values)]
    if rng.random() < 0.3:
        flags.append("--json")
    return Case(["check-bench", "{tmp}/case" + src.suffix, *flags],
                {"case" + src.suffix: mutated(src.read_text(), rng)})



LINKS = sorted((REPO / "kvplan" / "hardware" / "links").glob("*.yaml"))


def _link_case(rng: random.Random) -> Case:
    text = mutated(rng.choice(LINKS).read_text(), rng)
    return Case(["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512", "--link", "{tmp}/link.yaml"],
                {"link.yaml": text})


TARGETS = {"logs": _log_case, "profiles": _profile_case, "prices": _prices_case, "flags": _flags_case,
           "bench": _bench_case, "offload": _offload_case, "links": _link_case}
COUNT = {"bench": max(5, CASES // 3)}  # a bench case runs a simulation (about 0.3 s): a third as many


def fuzz_case(target: str, seed: int, i: int) -> Case:
    return TARGETS[target](random.Random(f"{target}/{seed}/{i}"))


def run_case(case: Case, tmp: Path):
    for rel, text in case.files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    with deadline(CASE_SECONDS):
        return runner.invoke(app_under_test(), args)


def app_under_test():
    from kvplan.cli import app

    return app


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_never_an_internal_error(target, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a mutated model name must not reach the network
    monkeypatch.chdir(tmp_path)  # a mutated output flag writes here, never into the checkout
    failures = []
    for i in range(COUNT.get(target, CASES)):
        case = fuzz_case(target, SEED, i)
        case_dir = tmp_path / f"c{i}"
        case_dir.mkdir()
        try:
            result = run_case(case, case_dir)
        except Hang as exc:
            failures.append(f"case {i}: {exc}: {[a[:60] for a in case.args]}")
            continue
        text = result.output + (result.stderr if result.stderr_bytes is not None else "")
        if isinstance(result.exception, Hang):
            failures.append(f"case {i}: {result.exception}: {[a[:60] for a in case.args]}")
            continue
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or "internal error" in text or "Traceback" in text:
            shown = [a if len(a) < 60 else a[:40] + f"...({len(a)} chars)" for a in case.args]
            last = text.strip().splitlines()[-1:] or [repr(result.exception)]
            failures.append(f"case {i} (seed {SEED}): {shown}: {last[0][:300]}")
    assert not failures, f"{len(failures)} of {CASES} {target} cases failed:\n" + "\n".join(failures[:10])
