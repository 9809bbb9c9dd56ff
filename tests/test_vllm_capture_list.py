"""vLLM's CUDA-graph capture list as the engine builds it, by release (kvplan.engines.vllm.capture_list; issue 22).

Sources: vLLM `config/vllm.py` _set_cudagraph_sizes (0.19.0 L1343-1503, 0.21.0 L1476-1640, 0.30.0 L2151-2360) and
`config/compilation.py` adjust_cudagraph_sizes_for_spec_decode (0.21.0 L1440-1480); the figures below are checked
against what users printed: vllm-project/vllm#32324 (2026-01-14), vllm-project/vllm#37865 (comment of 2026-09-02),
tonyd2wild/DeepSeek-v4-Flash-Vision-Exp-DSpark-1M-NVFP4-KV-2x-DGX-Spark#5 (2026-07-06), and the training log
club3090-104 (noonghunna/club-3090#104, 2026-05-09).
"""

from __future__ import annotations

import dataclasses

import pytest

from conftest import corpus_record, training_log
from kvplan.core.errors import KvplanError
from kvplan.engines.logparse import parse_log
from kvplan.engines.vllm import capture_list as cl
from kvplan.engines.vllm import cudagraphs as cg
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.planning.speculative import Speculative
from kvplan.sources.catalog import require_in_catalog

V19, V21, V30 = (0, 19, 0), (0, 21, 0), (0, 30, 0)


def _drafted(k: int, name: str = "qwen3-8b"):
    """A catalog model served with k speculative tokens (n-gram: no drafter layers, only the decode query length)."""
    return dataclasses.replace(require_in_catalog(name), speculative=Speculative(method="ngram",
                                                                                 num_speculative_tokens=k))


def test_the_grid_is_1_2_4_then_8s_then_16s():
    """vllm#37865 (ivanfioravanti, 2026-09-02): an explicit max 42 gives "[1, 2, 4, 8, 16, 24, 32, 40]" (42 is off
    the grid of 8s). Up to 512: 3 + 31 (8..248) + 17 (256..512) = 51; up to 300: 3 + 31 + 3 (256, 272, 288) = 37."""
    assert cl.grid(42) == [1, 2, 4, 8, 16, 24, 32, 40]
    assert len(cl.grid(512)) == 3 + 31 + 17 == 51
    assert cl.grid(300)[-3:] == [256, 272, 288] and len(cl.grid(300)) == 37


def test_a_drafter_multiplies_the_largest_capture():
    """vllm#32324 (2026-01-14): num_speculative_tokens 3 and max_num_seqs 40 give max_cudagraph_capture_size 320:
    min(40 x (1 + 3) x 2, 512) = 320. Without a drafter, min(40 x 2, 512) = 80."""
    plain = require_in_catalog("qwen3-8b")
    assert cl.largest(_drafted(3), 40, 8192, V21) == 40 * 4 * 2 == 320
    assert cl.largest(plain, 40, 8192, V21) == 80
    # the sizes: grid(320) is 3 + 31 + 5 (256..320) = 39; rounded up to multiples of 4 (FULL decode graphs), 1, 2
    # and 4 all become 4: 1 + 31 + 5 = 37; the FULL decode graphs are those from 4 to 4 x 40 = 160: 4, 8..160 = 21
    pw, full = cg.cudagraph_counts(_drafted(3), 40, 8192, V21)
    assert len(pw) == 37 and pw[0] == 4 and pw[-1] == 320
    assert len(full) == 1 + 20 and full[-1] == 160


def test_six_requests_three_drafts():
    """max_num_seqs 6, 3 speculative tokens, 0.21.0: min(6 x 4 x 2, 512, 8192) = 48; grid(48) = [1, 2, 4, 8, 16, 24,
    32, 40, 48], rounded up to multiples of 4 = [4, 8, 16, 24, 32, 40, 48] (7); FULL decode 4..24 = 4 graphs.
    Before this module kvplan captured min(2 x 6, 512) = 12: [1, 2, 4, 8], four of each mode."""
    pw, full = cg.cudagraph_counts(_drafted(3), 6, 8192, V21)
    assert pw == [4, 8, 16, 24, 32, 40, 48]
    assert full == [4, 8, 16, 24]


def test_a_user_max_is_truncated_to_the_grid_then_rounded():
    """tonyd2wild/...-2x-DGX-Spark#5 (2026-07-06): max_num_seqs 6, 3 speculative tokens and
    --max-cudagraph-capture-size 6 print "Truncating max_cudagraph_capture_size to 4": grid(6) = [1, 2, 4], the
    user's max replaces the default (no drafter factor), and the rounding to 4 leaves [4]. vllm#37865's 42 with 6
    speculative tokens: grid(42) ends at 40; rounded up to 7 and kept to 40: 7, 14, 21, 28, 35 (40 -> 42 dropped)."""
    assert cl.capture_list(_drafted(3), 6, 8192, V21, asked=6) == [4]
    assert cl.capture_list(_drafted(6), 6, 8192, V21, asked=42) == [7, 14, 21, 28, 35]


def test_max_num_batched_tokens_clamps_and_from_0_21_is_captured():
    """max_num_seqs 256, max_num_batched_tokens 300: min(512, 512, 300) = 300, grid(300) = 37 sizes ending 288;
    0.21.0 appends 300 (config/vllm.py L1580-1585): 38 sizes, largest 300; 0.19.0 does not: 37, largest 288."""
    plain = require_in_catalog("qwen3-8b")
    assert cl.capture_list(plain, 256, 300, V21)[-2:] == [288, 300] and len(cl.capture_list(plain, 256, 300, V21)) == 38
    assert cl.capture_list(plain, 256, 300, V19)[-1] == 288 and len(cl.capture_list(plain, 256, 300, V19)) == 37


def test_0_30_raises_the_ceiling_on_capability_10():
    """0.30.0 L2214-2224: 1024 where the device is of the capability-10 family (B200: 10.0), else 512. At
    max_num_seqs 1024: grid(1024) = 3 + 31 + 49 (256..1024 by 16) = 83; on H100, or 0.21.0 anywhere, 51."""
    plain, b200, h100 = require_in_catalog("qwen3-8b"), find_gpu("b200"), find_gpu("h100")
    assert len(cl.capture_list(plain, 1024, 8192, V30, b200)) == 3 + 31 + 49 == 83
    assert len(cl.capture_list(plain, 1024, 8192, V30, h100)) == 51
    assert len(cl.capture_list(plain, 1024, 8192, V21, b200)) == 51


def test_0_30_appends_the_uniform_decode_batches():
    """2 speculative tokens (query length 3), max_num_seqs 20: min(20 x 3 x 2, 512) = 120. 0.21.0: grid(120) rounded
    up to 3 = 3, 6, 9, 18, 24, 33, 42, 48, 57, 66, 72, 81, 90, 96, 105, 114, 120 (17). 0.30.0 also appends n x 3 for
    the request grid [1, 2, 4, 8, 16] + [20]: 3, 6, 12, 24, 48, 60 (L2225-2302), so 12 and 60 join: 19."""
    d = _drafted(2)
    old = [3, 6, 9, 18, 24, 33, 42, 48, 57, 66, 72, 81, 90, 96, 105, 114, 120]
    assert cl.capture_list(d, 20, 8192, V21) == old
    assert cl.capture_list(d, 20, 8192, V30, find_gpu("h100")) == sorted(old + [12, 60])


def test_the_training_log_of_a_downgraded_spec_run():
    """club3090-104 (training; RTX 3090 x2, a drafter, FlashInfer): vLLM sets cudagraph_mode=PIECEWISE (no FULL decode
    graphs with spec-decode on FlashInfer's UNIFORM_SINGLE_TOKEN_DECODE) and prints "PIECEWISE=5 (largest=16)".
    The club's compose for this model serves max_num_seqs 2 with MTP 3 (its #295 args line, training record
    club3090-295): min(2 x 4 x 2, 512, 8192) = 16, grid [1, 2, 4, 8, 16] unrounded (PIECEWISE only) = 5, largest
    16, the log's shape. kvplan's rule before this module, min(2 x 2, 512) = 4, gave [1, 2, 4]: 3."""
    assert corpus_record("club3090-295-qwen36-27b-autoround-int4-2x3090")["flags"]["max_num_seqs"] == 2  # training
    rec = parse_log(training_log("club3090-104-qwen36-27b-autoround-2x3090"))
    assert rec.graph_shape == (("PIECEWISE", 5, 16),)
    sizes = cl.capture_list(_drafted(3), 2, 8192, V21, full_decode=False)
    assert (len(sizes), sizes[-1]) == (5, 16)


def test_the_plan_says_the_list_and_prices_it():
    """fit's note names the list's size and largest; the estimate counts the rounded list. At 6 requests and 3
    drafts: 7 PIECEWISE and 4 FULL graphs, (7 - 1) + (4 - 1) = 9 further graphs; without the drafter [1, 2, 4, 8]
    and FULL [1, 2, 4]: 3 + 2 = 5. The first capture is the 209 MiB PIECEWISE constant either way (FA3's accumulator
    at 24 tokens, 32 x 4 x 24 x 32 heads x 128 = 12 MiB, is below it), so the drafter adds 4 graphs x 6 MiB (36
    layers x 0.126 MiB = 4.54, up to the 2 MiB page) = 24 MiB."""
    from kvplan.engines.vllm import engine as vllm
    from kvplan.engines.vllm.overhead import overhead_terms

    gpu = find_gpu("h100")
    plain = require_in_catalog("qwen3-8b")
    eng = vllm.Vllm("0.21.0", {"max_num_seqs": "6"}, {})
    st = eng.settings(plain, gpu, Deployment(), Request(context=8192))
    note = cg.capture_note(_drafted(3), st)[0]
    assert "7 sizes, largest 48" in note and "min(max_num_seqs 6 x 4 x 2, 512, max_num_batched_tokens" in note
    assert "4 sizes, largest 8" in cg.capture_note(plain, st)[0]
    extra = overhead_terms(_drafted(3), Deployment(), st)["cudagraphs"] - overhead_terms(plain, Deployment(), st)[
        "cudagraphs"]
    assert cg.per_graph_cost(plain, plain.num_layers) == 6 * 2**20
    assert extra == 4 * 6 * 2**20


def test_the_engine_option_is_read_from_0_19_and_emitted():
    from kvplan.engines.vllm import engine as vllm

    model, gpu = require_in_catalog("qwen3-8b"), find_gpu("h100")
    with pytest.raises(KvplanError, match="0.19.0"):
        vllm.Vllm("0.15.0", {"max_cudagraph_capture_size": "64"}, {}).settings(model, gpu, Deployment(),
                                                                              Request(context=8192))
    with pytest.raises(KvplanError, match="at least 1"):
        vllm.Vllm("0.21.0", {"max_cudagraph_capture_size": "0"}, {}).settings(model, gpu, Deployment(),
                                                                             Request(context=8192))
    st = vllm.Vllm("0.21.0", {"max_cudagraph_capture_size": "64"}, {}).settings(model, gpu, Deployment(),
                                                                              Request(context=8192))
    assert st.max_capture == 64
    # grid(64) = 1, 2, 4, 8..64: 3 + 8 = 11 PIECEWISE graphs, whatever max_num_seqs (the default's 1024)
    assert len(cg.cudagraph_counts(model, st.max_num_seqs, st.max_num_batched_tokens, st.v, gpu, 64)[0]) == 11


def test_fit_emits_the_flag_and_prints_the_list():
    """`kvplan fit ... --engine-opt max_cudagraph_capture_size=64 --emit vllm`: the serve command carries
    --max-cudagraph-capture-size 64 (arg_utils.py 0.21.0 L1384-1388), and the note says 11 sizes, largest 64."""
    import json
    import shlex

    from typer.testing import CliRunner

    from kvplan.cli import app

    r = CliRunner().invoke(app, ["fit", "qwen3-8b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm",
                                 "--engine-version", "0.21.0", "--engine-opt", "max_cudagraph_capture_size=64",
                                 "--emit", "vllm", "--json"])
    assert r.exit_code == 0, r.output
    args = shlex.split(json.loads(r.stdout)["emit"])
    assert args[args.index("--max-cudagraph-capture-size") + 1] == "64"
    assert "CUDA-graph capture list: 11 sizes, largest 64" in r.stdout
