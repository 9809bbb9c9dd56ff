"""vLLM V0 turns chunked prefill on by itself over a 32K max_model_len (kvplan.engines.vllm.v0_chunked).

Every expectation is read from the PyPI wheels' `vllm/engine/arg_utils.py` (`use_long_context = max_model_len >
32768`, then `self.enable_chunked_prefill = True` unless an exclusion holds) and `vllm/config.py` SchedulerConfig
(the budget where chunked prefill is on and max_num_batched_tokens was not given), not from kvplan's output:
  0.5.2        no rule (no `use_long_context` in arg_utils): max(max_model_len, 2048)
  0.5.3-0.6.4  512 tokens a step (0.5.3 config.py L805, 0.6.2 L985-988, 0.6.4 L1114); ROCm builds too
               (device_type "cuda": 0.6.2 config.py L1066-1069, platforms/interface.py L47-49)
  0.6.5-0.7.x  2,048 tokens a step (0.6.5 config.py L1344, 0.6.6 L1438, 0.7.3 L1532); not on ROCm
               (0.6.6 arg_utils L1081-1102: `and not current_platform.is_rocm()`)
  exclusions   sliding window, speculative model, LoRA everywhere; recurrent-state layers 0.5.4-0.6.2 (0.5.4
               L747-765, 0.6.2 L909-929, gone in 0.6.3 L936-952); multimodal from 0.6.2 (0.6.2 L916)
"""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.core.errors import KvplanError
from kvplan.engines.vllm import engine as vllm
from kvplan.engines.vllm.v0_chunked import chunk_budget, serve_flag, server_sized
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

LLAMA = find_in_catalog("llama-3.1-8b-instruct")  # max_position_embeddings 131,072, no window, text only
H100 = find_gpu("h100")


def batch(version: str, gpu="h100", opts=None, context: int = 131072) -> tuple[int, int]:
    st = vllm.settings(LLAMA, find_gpu(gpu), Deployment(), Request(context=context), version, opts or {}, {})
    return st.max_num_batched_tokens, st.max_num_seqs


def test_066_chunks_a_128k_llama_at_2048():
    # 0.6.6: 131,072 > 32,768, CUDA, no window / drafter / LoRA -> chunked on, SchedulerConfig L1438: 2,048.
    # Before: max(131,072, 2048) = 131,072 tokens profiled in one step.
    assert batch("0.6.6") == (2048, 256)
    assert batch("0.7.3") == (2048, 256)  # the same block (arg_utils L1164-1186, config.py L1532)


@pytest.mark.parametrize("version", ["0.5.3", "0.6.2", "0.6.4"])
def test_before_065_the_budget_is_512(version):
    assert batch(version) == (512, 256)  # config.py: "max_num_batched_tokens = 512" where chunked prefill is on


def test_the_threshold_is_strictly_above_32k_and_052_has_no_rule():
    assert batch("0.6.6", context=32768) == (32768, 256)  # 32,768 is not > 32,768: max(32,768, 2048)
    assert batch("0.6.6", context=32769) == (2048, 256)
    assert batch("0.5.2") == (131072, 256)  # no use_long_context block yet
    assert batch("0.8.5") == (8192, 1024)  # V1 from 0.8.0: its own tiers (0.8.5 L1596-1609), untouched


def test_rocm_keeps_it_until_065():
    # MI300X (vendor AMD): 0.6.4 tests device_type == "cuda" only, which ROCm builds report; 0.6.5 adds
    # `not current_platform.is_rocm()`, so 0.6.6 profiles max(131,072, 2048).
    assert batch("0.6.4", "mi300x") == (512, 256)
    assert batch("0.6.6", "mi300x") == (131072, 256)


def test_explicit_flags_decide():
    # enable_chunked_prefill=false: max(131,072, 2048); =true at an 8K context: the budget all the same;
    # an explicit max_num_batched_tokens replaces the budget (SchedulerConfig sets one only where it is None).
    assert batch("0.6.6", opts={"enable_chunked_prefill": "false"}) == (131072, 256)
    assert batch("0.6.6", opts={"enable_chunked_prefill": "true"}, context=8192) == (2048, 256)
    assert batch("0.6.2", opts={"enable_chunked_prefill": "true"}, context=8192) == (512, 256)
    assert batch("0.6.6", opts={"max_num_batched_tokens": "4096"}) == (4096, 256)
    with pytest.raises(KvplanError):
        batch("0.6.6", opts={"enable_chunked_prefill": "maybe"})


def test_exclusions_by_release():
    gemma2 = find_in_catalog("gemma-2-9b")  # alternating 4,096-token sliding layers
    windowed = dataclasses.replace(LLAMA, layers=gemma2.layers)
    assert chunk_budget((0, 6, 6), windowed, H100, 131072, None, None)[0] is None
    assert chunk_budget((0, 6, 6), LLAMA, H100, 131072, object(), None)[0] is None  # LoRA on
    jamba = find_in_catalog("ai21-jamba-1.5-mini")  # Mamba layers: seqlen-agnostic
    assert chunk_budget((0, 6, 2), jamba, H100, 262144, None, None)[0] is None  # excluded 0.5.4-0.6.2
    assert chunk_budget((0, 5, 3), jamba, H100, 262144, None, None)[0] == 512  # not yet in 0.5.3
    assert chunk_budget((0, 6, 4), jamba, H100, 262144, None, None)[0] == 512  # dropped in 0.6.3
    vision = dataclasses.replace(LLAMA, params=dataclasses.replace(LLAMA.params, vision=400_000_000))
    assert chunk_budget((0, 6, 1), vision, H100, 131072, None, None)[0] == 512  # multimodal chunked until 0.6.1
    budget, note = chunk_budget((0, 6, 2), vision, H100, 131072, None, None)
    assert budget is None and "multimodal" in note and "131,072 tokens a step" in note


def test_fit_says_so():
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b-instruct", "--gpu", "h100", "--engine", "vllm",
                                           "--engine-version", "0.6.6"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "V0 turns chunked prefill on by itself at max_model_len 131,072 > 32,768: 2,048 tokens a step" in out


def test_rocm_chunked_prefill_is_said_to_be_unpriced():
    # ROCm's V0 backend runs a chunked prefill's attention in the Triton prefix-prefill kernel (vllm#11146, which
    # turned the default off on ROCm from 0.6.5): the note says the speed figures leave it out, on AMD only, and
    # only where chunked prefill is on (0.6.4 by itself over 32K; 0.6.6 as asked, its default off on ROCm).
    mi300x = find_gpu("mi300x")
    assert "prefix-prefill" in chunk_budget((0, 6, 4), LLAMA, mi300x, 131072, None, None)[1]
    assert "prefix-prefill" in chunk_budget((0, 6, 6), LLAMA, mi300x, 8192, None, True)[1]
    assert "prefix-prefill" not in chunk_budget((0, 6, 4), LLAMA, H100, 131072, None, None)[1]
    budget, note = chunk_budget((0, 6, 6), LLAMA, mi300x, 131072, None, None)  # off by default from 0.6.5
    assert budget is None and "ROCm is excluded" in note and "prefix-prefill" not in note
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b-instruct", "--gpu", "mi300x", "--engine", "vllm",
                                           "--engine-version", "0.6.4"])
    assert res.exit_code == 0, res.output
    assert "Triton prefix-prefill kernel" in " ".join(res.output.split())


def test_the_flag_is_v0s_and_the_command_carries_it():
    with pytest.raises(KvplanError, match="V0"):  # V1 (0.8.0 on): not this option
        batch("0.8.5", opts={"enable_chunked_prefill": "false"})
    deepseek = find_in_catalog("deepseek-v2-lite")  # MLA: kvplan.engines.vllm.v0_mla's unchunked profile
    with pytest.raises(KvplanError, match="MLA"):
        chunk_budget((0, 7, 3), deepseek, H100, 163840, None, True)
    assert serve_flag((0, 5, 2), True) == ["--enable-chunked-prefill"]  # store_true (0.5.2 arg_utils L482-485)
    assert serve_flag((0, 5, 2), False) == []
    assert serve_flag((0, 6, 6), False) == ["--enable-chunked-prefill=False"]  # StoreBoolean from 0.5.3
    assert serve_flag((0, 6, 6), None) == []
    res = CliRunner().invoke(whole_app(), ["fit", "llama-3.1-8b-instruct", "--gpu", "h100", "--engine", "vllm",
                                           "--engine-version", "0.6.6", "--engine-opt",
                                           "enable_chunked_prefill=false", "--emit", "vllm"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "--enable-chunked-prefill=False" in out and "max(max_model_len, 2048) = 131,072 tokens a step" in out


def test_the_speed_side_sizes_v0_by_the_server():
    # V0's budget is max(max_model_len, 2048) or this rule's, both the server's length (config.py SchedulerConfig),
    # not a request's; V1 (0.8.0 on) and other engines keep their own step budgets.
    assert server_sized("vllm", "0.7.3") and server_sized("vllm", "0.5.0")
    assert not server_sized("vllm", "0.8.0") and not server_sized("sglang", "0.4.0") and not server_sized("vllm", None)
