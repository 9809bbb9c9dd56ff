"""SGLang's rules that read the server's context length (model_config.context_len: its --context-length, else the
model's own), priced at that length and not at a request's: in the speed corpus (kvplan.bench.running
`at_server_length`) and in `fit` (kvplan.engines.context.engine_length, the --context-length kvplan emits).

The rules, read in SGLang's source (docs/engines.md, "SGLang: what reads the server's context length"): aiter's cut of
mem_fraction_static by 0.85 where context_len > 8192 (0.4.7 `model_executor/model_runner.py` L423-425 on;
kvplan.engines.sglang.attention.aiter_cut), and the estimate of max_running_requests, clamp(max_total_num_tokens /
context_len x 512, 2048, 4096) (`init_memory_pool`; 0.5.23 `_resolve_max_num_reqs`), which kvplan prices where a
recurrent-state pool sets the running limit (kvplan.engines.sglang.mamba.max_running).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from kvplan.bench.running import running
from kvplan.cli import app
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.request import read_request
from kvplan.sources.catalog import find_in_catalog
from test_bench_running import LLAMA, case  # the corpus point as the corpus reader reads one

MI300X = find_gpu("mi300x")


def _cap(flags=None):
    # SGLang 0.5.23 on an MI300X, Llama-3.1-8B-Instruct, 1,000-token prompts and outputs: a first-wave request counts
    # 1,000 + 0.7 x 1,000 = 1,700 tokens (kvplan.engines.sglang.admission), far below 8,192
    return running(case("sglang", gpu="mi300x", version="0.5.23", isl=1000, osl=1000, flags=flags), LLAMA, MI300X).cap


def test_a_short_request_on_rocm_is_cut_at_the_models_length():
    # No --context-length: the server runs at Llama 3.1's own 131,072 (max_position_embeddings; rope_type llama3, to
    # which SGLang's get_context_length applies no factor), > 8,192, so ROCm's default aiter cuts the default fraction
    # 0.867 (tests/test_sglang_aiter.py's arithmetic for this GPU and release) to 0.867 x 0.85 = 0.73695. Stated at
    # 4,096 the server is not cut and keeps 0.867. SGLang's budget is (free before the weights) x fraction - weights,
    # free before = 196,592 MiB (the profile) - 512 MiB (tp 1's init, kvplan.engines.sglang.settings.INIT_BYTES_TP1),
    # so the cut takes 196,080 MiB x (0.867 - 0.73695) = 205,604,782,080 x 0.13005 = 26,738,901,909.5 B, at 131,072 B
    # a token (32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B) 204,001.2 tokens: 204,001 / 1,700 = 120.0 requests.
    # Before, the request's 1,700 tokens were taken for the server's length and the cut was never applied.
    assert LLAMA.max_context == 131_072
    model_length, stated_short = _cap(), _cap({"context-length": 4096})
    assert stated_short - model_length == pytest.approx(204_001 / 1_700, abs=2 / 1_700)


def test_the_stated_context_length_is_the_one_judged():
    # the test is context_len > 8192: a server stated at 8,193 is cut as the model's 131,072 is; at 8,192 it is not
    assert _cap({"context-length": 8193}) == pytest.approx(_cap())
    assert _cap({"context-length": 8192}) == pytest.approx(_cap({"context-length": 4096}))
    assert _cap({"context-length": 8192}) > _cap()


def test_a_cuda_point_is_not_moved():
    # no aiter off ROCm: the server's length changes nothing for an H100 point here (the estimate of
    # max_running_requests is kvplan's only for a state pool's limit)
    h100 = find_gpu("h100-sxm")
    at = [running(case("sglang", version="0.5.23", isl=1000, osl=1000, flags=f), LLAMA, h100).cap
          for f in (None, {"context-length": 4096})]
    assert at[0] == at[1]


def _fit(*extra):
    r = CliRunner().invoke(app, ["fit", "llama-3.1-8b", "--engine", "sglang", "--gpu", "mi300x", "--ctx", "4k",
                                 *extra, "--emit", "sglang"])
    assert r.exit_code == 0, r.output
    return r.output


def test_fit_judges_the_cut_by_the_length_it_emits():
    # fit emits --context-length at the plan's context, so the server runs at 4,096 and is not cut; with
    # --max-model-len 128k it emits 131,072 and plans the cut fraction, 0.73695, as the corpus now does
    short, long = _fit(), _fit("--max-model-len", "128k")
    assert "--context-length 4096 " in short and "in force" not in short
    assert "--context-length 131072 " in long and "0.73695 in force" in long


def test_a_state_pools_running_estimate_reads_the_servers_length():
    # Qwen3-Next-80B-A3B, SGLang 0.5.23, tp 8 on H100s, --max-mamba-cache-size 3500 with the radix cache off (one slot a
    # request): a pool of T tokens, the same at either length (sized before the estimate). SGLang's estimate is
    # clamp(int(T / context_len x 512), 2048, 4096), then min(that, T // 2, slots // 1). At the 1,024 tokens fit
    # serves without --max-model-len, any T over 8,192 clamps to 4,096, so the 3,500 slots bind. Served at the
    # model's 262,144 (--max-model-len) the estimate is int(T / 262,144 x 512), which binds below 3,500 (T under
    # 1,792,000 tokens: 262,144 x 3,500 / 512), though each request is 1,024.
    model = find_in_catalog("qwen3-next-80b-a3b")
    assert model.max_context == 262_144
    engine = resolve_engine("sglang", "0.5.23", ["max_mamba_cache_size=3500", "disable_radix_cache=true"])

    def capacity(served):  # the model as kvplan.engines.context.limited gives it at --max-model-len `served`
        spec = replace(model, max_model_len=served)
        return engine.result(spec, find_gpu("h100-sxm"), engine.deployment(Deployment(tp=8)),
                             read_request(spec, context=1024)).capacity
    short, long = capacity(0), capacity(262_144)
    tokens = short.tokens
    assert long.tokens == tokens and 8_192 < tokens < 262_144 * 3_500 // 512
    assert short.max_running == 3_500 and long.max_running == max(2_048, int(tokens / 262_144 * 512)) < 3_500
