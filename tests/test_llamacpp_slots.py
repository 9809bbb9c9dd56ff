"""llama.cpp's pool row against its concurrency (issue 22): llama-server allocates the cells its -c / -np ask for,
whatever memory is left (kvplan/engines/llamacpp/engine.py: llama.cpp `0c1e5709` llama-context.cpp L290-306,
n_ctx_seq = GGML_PAD(n_ctx / n_seq, 256)), while the concurrency is the slots memory would hold if -c were raised.
The rows say which is which, and the -c / -np for that concurrency is printed (engine table, note, --json).

Hand arithmetic (Qwen3-32B's config.json: 64 layers, 8 KV heads of 128, f16 cache): a layer's cell is
K + V = 2 x 8 x 128 x 2 B = 4,096 B. At pp 2 llama.cpp puts layer i on device i x 2 // 65 (its layer split at
equal free memory over 64 layers + the output slot, kvplan.engines.stage_split): layers 0-32 on the first GPU, 33 x
4,096 = 135,168 B a token; a 32k slot is 32,768 x 135,168 = 4,429,185,024 B (4.125 GiB) there. Within
--kv-cache-memory 40GiB a GPU: 42,949,672,960 / 4,429,185,024 = 9.7, so 9 slots (about 30 GiB of weights and 0.45
of buffers beside it leave the 79.18 GiB usable on an H100 room for it).
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import engine_figures
from kvplan.cli import app

runner = CliRunner()
FIT = ["fit", "qwen3-32b", "--gpu", "h100", "--pp", "2", "--engine", "llama.cpp", "--kv-cache-memory", "40GiB"]


def _fit(*args: str) -> dict:
    res = runner.invoke(app, [*FIT, *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_pool_row_is_the_planned_c_and_the_concurrency_gets_its_own():
    out = _fit("--ctx", "32k")
    assert out["kv_pool_tokens_per_deployment"] == 32_768  # -c 32,768 -np 1: pad(32,768, 256) cells
    assert out["max_concurrency"] == 9  # 9 x 4.125 GiB = 37.1 GiB <= 40 GiB < 10 x 4.125 = 41.25 GiB
    assert out["request_tokens_at_context"] == 9 * 32_768 == 294_912
    assert engine_figures(out)["-c / -np"] == [32_768, 1]
    assert engine_figures(out)["-c / -np at max concurrency"] == [294_912, 9]
    assert out["engine"]["answer_labels"] == {"kv_pool_tokens_per_deployment": "KV cells at the planned -c / -np",
                                              "request_tokens_at_context": "tokens memory holds (-c raised)"}
    assert "-c 294,912 -np 9 (--batch 9)" in " ".join(out["engine"]["notes"])  # the note (LlamaCpp.result)


def test_at_the_printed_c_the_rows_agree():
    # the -c / -np printed for 9 slots, planned: the cells allocated are the tokens the 9 requests use
    out = _fit("--ctx", "32k", "--batch", "9")
    assert out["kv_pool_tokens_per_deployment"] == out["request_tokens_at_context"] == 294_912
    assert out["max_concurrency"] == 9 and out["fits"]
    assert engine_figures(out)["-c / -np at max concurrency"] == engine_figures(out)["-c / -np"] == [294_912, 9]


def test_several_slots_at_a_shorter_context():
    # 8k slots: 8,192 x 135,168 B = 1,107,296,256 B on the first GPU, so 38 of them in 40 GiB (38.8); --batch 4
    # plans -c 32,768 -np 4
    out = _fit("--ctx", "8k", "--batch", "4")
    assert out["kv_pool_tokens_per_deployment"] == 4 * 8_192  # 4 streams of pad(32,768 / 4, 256) = 8,192 cells
    assert out["max_concurrency"] == 38
    assert engine_figures(out)["-c / -np at max concurrency"] == [311_296, 38]


def test_the_table_labels_say_what_each_row_is():
    res = runner.invoke(app, [*FIT, "--ctx", "32k"], terminal_width=100)
    assert res.exit_code == 0, res.output
    assert "KV cells at the planned -c / -np" in res.stdout and "tokens memory holds (-c raised) @ 32k" in res.stdout
    assert "KV pool tokens (as engines count)" not in res.stdout
    assert "294,912 / 9" in res.stdout
