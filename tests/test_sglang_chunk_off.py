"""SGLang's `--chunked-prefill-size -1` (chunked prefill off): planned for memory, refused by the step model."""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.scheduler import limits
from kvplan.engines.sglang import defaults, piecewise
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def _settings(version, opts, model="llama-3.1-8b", gpu="h100-sxm"):
    return resolve_engine("sglang", version, opts).settings(find_in_catalog(model), find_gpu(gpu), Deployment(1, 1),
                                                            Request(context=8192))


def test_minus_one_reserves_max_prefill_tokens_not_a_chunk():
    # sglang 0.5.7 wheel `srt/server_args.py` L909-921, on nvidia-smi's 81,559 MiB of an H100 SXM, tp 1, decode graph
    # max bs 256: chunked 8,192 (the default): 512 + max(8,192, 2,048) x 1.5 + 256 x 2 + 1 x 1 / 8 x 1,024
    # = 512 + 12,288 + 512 + 128 = 13,440 MiB -> (81,559 - 13,440) / 81,559 = 0.8352 -> 0.835.
    # chunked -1 ("else: reserved_mem += max(self.max_prefill_tokens, 2048) * 1.5", max_prefill_tokens 16,384):
    # 512 + 24,576 + 512 + 128 = 25,728 MiB -> (81,559 - 25,728) / 81,559 = 0.6845 -> 0.685.
    assert _settings("0.5.7", []).mem_fraction_static == round((81_559 - 13_440) / 81_559, 3) == 0.835
    st = _settings("0.5.7", ["chunked_prefill_size=-1"])
    assert st.mem_fraction_static == round((81_559 - 25_728) / 81_559, 3) == 0.685
    assert st.chunked_prefill_size == defaults.CHUNK_OFF == -1


def test_minus_one_captures_no_prefill_graph_at_0523():
    # 0.5.23 `arg_groups/memory_hook.py` L233-238: the prefill graph's max bs is the chunk, so at -1 no size is
    # captured (`generate_prefill_cuda_graph_batch_sizes` keeps s <= -1: none) and `reserve_for_graph_mb` adds
    # 0 x 8 MiB; the activation term is 1.5 x 16,384 = 24,576 (L304-307). H100 SXM, 81,559 MiB: 512 + 24,576 + 128
    # + 2 x 256 + 0 = 25,728 -> 0.685 (chunk 8,192: 13,440 + 58 graphs x 8 = 13,904 -> 0.830).
    assert piecewise.capture_sizes(-1) == []
    assert _settings("0.5.23", ["chunked_prefill_size=-1"]).mem_fraction_static == 0.685
    assert _settings("0.5.23", []).mem_fraction_static == 0.830


def test_any_non_positive_is_off_and_before_053_the_reserve_ignores_it():
    # the scheduler reads every value <= 0 as off (0.5.23 `srt/managers/scheduler.py` L1372-1373); 0.5.2's reserve is
    # by GPU memory only (80 GB class: 9.5 + tp / 2 = 10 GiB = 10,240 MiB -> (81,559 - 10,240) / 81,559 = 0.874).
    assert _settings("0.5.7", ["chunked_prefill_size=0"]).mem_fraction_static == 0.685
    assert _settings("0.5.7", ["chunked_prefill_size=-4"]).chunked_prefill_size == -1
    assert _settings("0.4.9", ["chunked_prefill_size=-1"]).mem_fraction_static == \
        _settings("0.4.9", []).mem_fraction_static == round((81_559 - 10_240) / 81_559, 3)


def test_plan_notes_it_and_the_step_model_refuses_it():
    eng = resolve_engine("sglang", "0.5.7", ["chunked_prefill_size=-1"])
    res = eng.result(find_in_catalog("llama-3.1-8b"), find_gpu("h100-sxm"), Deployment(1, 1), Request(context=8192))
    assert any("chunked prefill off" in n for n in res.capacity.notes)
    with pytest.raises(KvplanError, match="chunked prefill off"):
        limits("sglang", res.settings)
    assert limits("sglang", {"chunked_prefill_size": 8192}) == (4096, 8192)


def test_speed_fit_prices_a_chunk_off_run_plainly():
    # the speed fit's running() gives None (the fit's plain estimate) where the step model refuses the setting
    from types import SimpleNamespace

    from kvplan.bench.running import sized
    load = SimpleNamespace(bench="serve", isl=1024, osl=256, out_cv2=None, drawn=False, fixed=False, rate=None)
    case = SimpleNamespace(load=load, engine="sglang", version="0.5.7", flags={"chunked_prefill_size": -1}, dp=1,
                           tp=1, pp=1, ep=1, harness=None, kv_dtype=None, weight_dtype=None, max_seqs=None,
                           era="sglang")
    assert sized(case, find_in_catalog("llama-3.1-8b"), find_gpu("h100-sxm")) is None
    case.flags = {"chunked_prefill_size": 8192}
    assert sized(case, find_in_catalog("llama-3.1-8b"), find_gpu("h100-sxm")).chunk == 8192
