"""Round 46: the leftovers of round 45's hostile-input pass, and a new user's mistakes, end to end through the CLI.

Each case failed before its fix: a config.json or safetensors index with a byte-order mark was "not valid JSON
(Unexpected UTF-8 BOM (decode using utf-8-sig) ...)", Python's advice rather than what the engines do with it; a
named pipe whose writer started after simulate opened it (`mkfifo p; (sleep 1; cat t.jsonl > p) &`) was an empty
trace; a new user's `--tp 3` on Llama-3.1-8B was refused without the sizes that work, and `-gpu h100` (one
dash) was "unexpected extra argument (h100)" alone.
"""

from __future__ import annotations

import codecs
import importlib
import json
import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli.main import whole_app
from kvplan.core.errors import KvplanError
from kvplan.simulator import traces
from kvplan.simulator.traces import load_trace
from kvplan.sources.local_weights import local_weights

runner = CliRunner()
TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 4, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100,
        "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}


# --- a byte-order mark on a model's own JSON: refused as the engines refuse it -----------------------------------

def test_the_engines_reading_refuses_a_byte_order_mark():
    # the independent source of the refusal below: transformers reads a config and a shard index as
    # `json.loads(open(f, encoding="utf-8").read())` (5.25.0 configuration_utils.py L1140-1143, utils/hub.py
    # L977-978; AutoConfig.from_pretrained on such a folder says "not a valid JSON file", checked by hand in round 46)
    with pytest.raises(json.JSONDecodeError, match="Unexpected UTF-8 BOM"):
        json.loads((codecs.BOM_UTF8 + json.dumps(TINY).encode()).decode("utf-8"))


@pytest.mark.parametrize("bom, kind", [(codecs.BOM_UTF8, "UTF-8"), (codecs.BOM_UTF16_LE, "UTF-16")])
def test_a_config_with_a_byte_order_mark_is_refused_naming_it(tmp_path, bom, kind):
    body = json.dumps(TINY).encode("utf-16-le" if kind == "UTF-16" else "utf-8")
    (tmp_path / "config.json").write_bytes(bom + body)
    r = runner.invoke(whole_app(), ["fit", str(tmp_path), "--gpu", "h100", "--ctx", "1k"])
    one_line_error(r, 2, f"config.json starts with a {kind} byte-order mark, which transformers (and so vLLM and "
                   "SGLang) refuses as invalid JSON; save it as UTF-8 without one")


def test_a_safetensors_index_with_a_byte_order_mark_is_refused_naming_it(tmp_path):
    index = {"weight_map": {"lm_head.weight": "model-00001-of-00001.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_bytes(codecs.BOM_UTF8 + json.dumps(index).encode())
    with pytest.raises(KvplanError, match="index.json starts with a UTF-8 byte-order mark"):
        local_weights(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_bytes(b"{" + codecs.BOM_UTF8 + b"}")  # not at the start: JSON's
    with pytest.raises(KvplanError, match="not valid JSON"):
        local_weights(tmp_path)


# --- a FIFO whose writer starts late: waited on, read whole ------------------------------------------------------

TRACE = Path(__file__).parent / "fixtures" / "traces" / "bailian_schema_40.jsonl"


def _write_later(fifo: Path, data: bytes | None, delay: float = 0.3) -> threading.Thread:
    def write():
        time.sleep(delay)  # the reader has opened the FIFO by now, with no writer on it
        with open(fifo, "wb") as f:  # blocks until the reader is there: it is
            if data:
                f.write(data)
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_a_fifo_whose_writer_starts_late_reads_as_the_file(tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    writer = _write_later(fifo, TRACE.read_bytes())
    assert load_trace(str(fifo)) == load_trace(str(TRACE))  # before: "empty trace" (EOF read before the writer came)
    writer.join(5)


def test_a_fifo_its_writer_opens_and_closes_is_an_empty_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "FIFO_WAIT_S", 5.0)
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    writer = _write_later(fifo, None)
    start = time.monotonic()
    with pytest.raises(KvplanError, match="empty trace"):
        load_trace(str(fifo))
    assert time.monotonic() - start < 4  # the close ended the wait, not the 5 s
    writer.join(5)


def _read_with_late_writer(r: int, w: int, data: bytes, delay: float):
    """load_trace of pipe `r` while a thread writes `data` to its end `w` after `delay` seconds, then closes it."""
    def write():
        time.sleep(delay)
        os.write(w, data)
        os.close(w)
    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        return load_trace(f"/proc/self/fd/{r}")
    finally:
        t.join(5)
        os.close(r)


def test_a_pipe_whose_writer_holds_it_past_the_wait_streams(monkeypatch):
    # `--trace <(sort big.jsonl)`: the writer holds the pipe open and writes its first byte after the wait; review
    # found it refused as "no writer opened it"; now the held pipe (EAGAIN, not end of file) is read on to its end
    monkeypatch.setattr(traces, "FIFO_WAIT_S", 0.2)
    r, w = os.pipe()
    assert _read_with_late_writer(r, w, TRACE.read_bytes(), 0.6) == load_trace(str(TRACE))


def test_bytes_that_arrive_as_the_wait_ends_are_kept(monkeypatch):
    # the race the non-blocking read after the wait can meet: bytes already in the pipe (select reported it not ready
    # a moment before) are read then, and must lead the stream, not be lost: the first 1,000 bytes here
    monkeypatch.setattr(traces, "FIFO_WAIT_S", 0.2)
    monkeypatch.setattr(traces.select, "select", lambda *a: ([], [], []))
    data = TRACE.read_bytes()
    r, w = os.pipe()
    os.write(w, data[:1000])
    assert _read_with_late_writer(r, w, data[1000:], 0.3) == load_trace(str(TRACE))


def test_a_fifo_no_writer_opens_is_refused_after_the_wait(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "FIFO_WAIT_S", 0.2)
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(KvplanError, match="no writer opened it"):
        load_trace(str(fifo))


# --- a new user's mistakes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("model, tp, sizes", [
    # Llama-3.1-8B: 32 attention heads, 8 KV heads: every divisor of 32 splits the 8 KV heads or replicates them
    ("llama-3.1-8b", 3, "(tp 1, 2, 4, 8, 16 or 32 does)"),
    # Qwen3-32B: 64 attention heads, 8 KV heads: the divisors of 64
    ("qwen3-32b", 6, "(tp 1, 2, 4, 8, 16, 32 or 64 does)"),
])
def test_a_tp_the_heads_do_not_divide_names_the_sizes_that_work(model, tp, sizes):
    r = runner.invoke(whole_app(), ["fit", model, "--gpu", "h100", "--tp", str(tp), "--ctx", "8k"])
    one_line_error(r, 2, f"tp={tp} does not divide the ")
    assert sizes in r.stderr


def test_a_long_option_with_one_dash_is_named(monkeypatch, capsys):
    # `-gpu h100`: Click reads -g with the value "pu", then h100 as an extra argument; the error says why
    cli_main = importlib.import_module("kvplan.cli.main")  # (kvplan.cli's `main` is the entry function)
    monkeypatch.setattr("sys.argv", ["kvplan", "fit", "llama-3.1-8b", "-gpu", "h100"])
    with pytest.raises(SystemExit) as info:
        cli_main.main()
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "long options take two dashes: --gpu; see: " in err, err
