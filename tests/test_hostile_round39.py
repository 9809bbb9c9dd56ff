"""Round 39: hostile inputs that were not refused the kvplan way, each failing before its fix.

* A `--host`, `--link`, `--prices` or config file that is a device or a FIFO: the size check read stat()'s 0 bytes
  for /dev/zero and then read it forever (a MemoryError, "internal error", after eating the machine's memory), and a
  FIFO with no writer blocked the open for good. kvplan.core.capped.read_capped opens without blocking, asks the
  open descriptor what it is, and reads one byte past the cap at most.
* `--ctx` of 5,000 nines was float infinity and int() of it an OverflowError ("internal error"); 5,000 digits of
  bytes were int()'s ValueError past its 4,300-digit limit. Errors now echo 40 characters of what was typed.
* A rope_scaling factor of 0, -4 or "4" was read as 1, silently: vLLM multiplies the context limit by it.
* `--timeout nan`, `-1` and `inf` were taken (the Hub's wait), whatever the model.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from conftest import LLAMA_31_8B, REPO, one_line_error
from kvplan.cli import app
from kvplan.core.capped import read_capped
from kvplan.core.errors import KvplanError
from kvplan.core.units import parse_bytes, parse_tokens
from kvplan.readers.rope import read_rope_scaling

runner = CliRunner()
FIT = ["fit", "llama-3.1-8b", "--gpu", "h100", "--ctx", "8k"]
def _capped_memory():  # a reader that does not stop fails with a MemoryError, not by taking the test machine
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def _kvplan(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KVPLAN_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=60, preexec_fn=_capped_memory)


@pytest.mark.parametrize("flags, needle", [
    (["--offload", "cpu:64GiB", "--host", "/dev/zero"], "host profile /dev/zero is not a regular file"),
    (["--prices", "/dev/zero"], "prices file /dev/zero"),
])
def test_a_device_as_a_profile_is_refused_at_once(flags, needle, tmp_path):
    cmd = ["cheapest", "llama-3.1-8b", "-n", "1", "-c", "8k", *flags] if "--prices" in flags else [*FIT, *flags]
    start = time.monotonic()
    out = _kvplan(cmd, tmp_path)
    assert out.returncode == 2 or (out.returncode == 3 and "--prices" in flags), out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ") and needle in lines[-1] and "internal error" not in out.stderr
    assert time.monotonic() - start < 30


def test_a_fifo_as_a_link_or_host_profile_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "fabric.yaml"
    os.mkfifo(fifo)
    for args in (["disagg", "llama-3.1-8b", "-g", "h100", "--isl", "1k", "--osl", "128", "--link", str(fifo)],
                 [*FIT, "--offload", "cpu:64GiB", "--host", str(fifo)]):
        out = _kvplan(args, tmp_path)  # before: open() blocked until the 60 s timeout
        assert out.returncode == 2 and "is not a regular file (a device, a FIFO or a folder)" in out.stderr


def test_read_capped_reads_a_file_to_its_cap_and_no_further(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_bytes(b"x" * 10)
    assert read_capped(f, 10, "it") == b"x" * 10
    with pytest.raises(KvplanError, match=r"^it: larger than 0 MiB; not a profile$"):  # 9 B // 2^20 = 0 MiB
        read_capped(f, 9, "it", "a profile")
    with pytest.raises(KvplanError, match=r"^it: larger than 0 MiB$"):  # no kind: nothing said of what it is not
        read_capped(f, 9, "it")
    with pytest.raises(KvplanError, match="is not a regular file"):
        read_capped(tmp_path, 10, "the folder")
    with pytest.raises(FileNotFoundError):
        read_capped(tmp_path / "missing.yaml", 10, "it")


@pytest.mark.parametrize("flag, value, needle", [
    ("--ctx", "9" * 5000, "is absurd (more than 1,073,741,824 tokens)"),
    ("--max-model-len", "9" * 5000, "is absurd (more than 1,073,741,824 tokens)"),
    ("--kv-cache-memory", "9" * 5000, "is absurd (more than an exbibyte)"),
    ("--overhead", "9" * 5000 + ".5GiB", "is absurd (more than an exbibyte)"),
])
def test_thousands_of_digits_are_one_line_and_echo_forty_characters(flag, value, needle, kvplan_home):
    r = runner.invoke(app, [*[a for a in FIT if a not in ("--ctx", "8k")], flag, value])
    line = one_line_error(r, 2, needle)
    assert "'" + "9" * 40 + "'..." in line and len(line) < 200


def test_leading_zeros_are_the_number_they_spell():
    assert parse_bytes("0" * 5000 + "1GiB") == 2**30  # before: int()'s ValueError past 4,300 digits
    assert parse_tokens("0" * 5000 + "8k") == 8192
    with pytest.raises(KvplanError, match="absurd"):
        parse_bytes("1" + "0" * 30)


@pytest.mark.parametrize("factor", [0, -4, "4", True])
def test_a_rope_factor_that_is_not_a_positive_number_is_refused(factor, kvplan_home, tmp_path):
    cfg = {**LLAMA_31_8B,
           "rope_scaling": {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 8192}}
    with pytest.raises(KvplanError, match="rope_scaling factor .* is not a positive number"):
        read_rope_scaling(cfg, "llama")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = runner.invoke(app, ["fit", str(tmp_path), "--gpu", "h100", "--ctx", "8k", "--engine", "vllm"])
    one_line_error(r, 2, "is not a positive number")  # before: planned at a limit of 8,192 x 1, unsaid


def test_a_rope_factor_below_one_is_still_read():
    # transformers only warns for factor < 1 (modeling_rope_utils: "factor field must be a float >= 1"): planned
    cfg = {**LLAMA_31_8B, "rope_scaling": {"rope_type": "linear", "factor": 0.5}}
    assert read_rope_scaling(cfg, "llama").factor == 0.5


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf"])
def test_a_timeout_that_is_no_wait_is_refused(value, kvplan_home):
    one_line_error(runner.invoke(app, [*FIT, "--timeout", value]), 2, "--timeout must be a positive number of seconds")


def test_a_negative_run_of_thousands_of_digits_echoes_forty_characters(kvplan_home):
    # '-' and 5,000 nines is a size negated: refused as negative, but the message repeated all 5,001 characters
    r = runner.invoke(app, [*FIT, "--overhead", "-" + "9" * 5000])
    line = one_line_error(r, 2, "--overhead must not be negative")
    assert "'-" + "9" * 39 + "'..." in line and len(line) < 200
