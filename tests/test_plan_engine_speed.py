"""A plan's speed follows the engine options it names, as the corpus fit prices a run stating the same flags.

SGLang's `--attention-backend` and `--disable-radix-cache` set the form of an MLA model's prefill (kvplan.speed.mlaform:
triton attends absorbed once a prompt reuses a cached prefix, fa3, SGLang's Hopper default, is priced decompressed; no
radix cache, no cached prefix, decompressed whatever the backend). The fit reads them off each corpus run
(kvplan.speed.corpus attention_backend / prefix_cache); a plan reads them off --engine-opt through the SGLang request
step (Request.attention_backend, Request.prefix_cache) and says which it priced.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan import api
from kvplan.bench.running import running
from kvplan.cli import app
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import Case
from kvplan.speed.eras import era_of
from kvplan.speed.fit import Built
from kvplan.speed.bench_load import Load
from kvplan.speed.model import prefill_seconds
from kvplan.speed.plan import DecodeSteps, plan_decode_seconds, plan_shape

V3, H200 = find_in_catalog("deepseek-v3"), find_gpu("h200")
PROMPT = 32768


def _ttft(tmp_path, *opts: str) -> tuple[float, str]:
    trace = tmp_path / "one.csv"
    trace.write_text(f"arrival,input_tokens,output_tokens\n0,{PROMPT},2\n")
    args = ["simulate", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--engine", "sglang", "--trace", str(trace),
            "--json"]
    for o in opts:
        args += [o] if o.startswith("--") else ["--engine-opt", o]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    out = r.stdout
    doc = json.loads(out[out.index("{"):])
    return doc["runs"]["paged"]["summary"]["latency_s"]["ttft"]["mean"], r.stderr


def test_attention_backend_option_changes_the_priced_ttft_of_an_mla_prefill(tmp_path):
    # DeepSeek-V3 (61 MLA layers, 128 heads, qk_nope 128, rope 64, v 128, kv_lora_rank 512) at tp 8: 16 heads a rank.
    # Per query-key pair a layer (kvplan.speed.shape.attention_flops, the rule of vLLM's and SGLang's MLA backends):
    #   absorbed:     4 x 16 x (512 + 64)       = 36,864 FLOPs
    #   decompressed: 2 x 16 x (128 + 64 + 128) = 10,240 FLOPs, plus kv_b_proj again over each cached token a chunk
    #                 attends to: 2 x 512 x 16 x (128 + 128) = 4,194,304 FLOPs a token.
    # One 32,768-token prompt, causal: 32,768 x 32,769 / 2 = 536,887,296 pairs; SGLang 0.5.23's 8,192-token chunks on an
    # H200 re-decompress 0 + 8,192 + 16,384 + 24,576 = 49,152 cached tokens. Absorbed minus decompressed, a rank:
    #   61 x (536,887,296 x 26,624 - 49,152 x 4,194,304) = 61 x (1.4294e13 - 2.0616e11) = 8.594e14 FLOPs,
    # at most the datasheet bf16 rate (the attn coefficient is >= 1: kvplan.speed.fit.FLOOR), so the priced TTFT under
    # attention_backend=triton (absorbed: the radix cache is on) exceeds SGLang's default fa3 (decompressed) by at least
    # 8.594e14 / peak.
    default, said = _ttft(tmp_path)
    triton, said_triton = _ttft(tmp_path, "attention_backend=triton")
    no_radix, said_off = _ttft(tmp_path, "attention_backend=triton", "disable_radix_cache=true")
    extra = 61 * (PROMPT * (PROMPT + 1) // 2 * 26_624 - 49_152 * 4_194_304)
    peak = float(H200.dense_flops["bf16"])
    assert triton - default >= 0.99 * extra / peak  # 8.594e14 / 9.89e14 = 0.87 s at least
    assert no_radix == default  # no radix cache, no cached prefix: decompressed, as fa3's
    assert "priced decompressed" in said and "attention backend fa3 (sglang's default at its current release" in said
    assert "priced absorbed" in said_triton and "attention backend triton (named by the engine option)" in said_triton
    assert "prefix cache off (as asked: the engine option disable_radix_cache=true" in said_off
    assert "prefix caching off: sglang 0.5.23's options turn its prefix cache off" in said_off  # the simulator's too
    # simulate's own switch turns the cache off for the speed figures too: no cached prefix, decompressed
    assert _ttft(tmp_path, "attention_backend=triton", "--no-prefix-caching")[0] == default


@pytest.mark.parametrize("version,flags", [
    (None, {"attention_backend": "triton"}),
    ("0.5.3", {"attention_backend": "triton"}),
    ("0.5.3", {"attention_backend": "triton", "disable_radix_cache": "true"}),
    ("0.4.3", {}),
    ("0.5.23", {"attention_backend": "flashinfer"}),
])
def test_plan_and_corpus_price_the_same_run_identically(version, flags):
    # The same run, once as a corpus case (its flags) and once as a plan (--engine-opt): one Shape, one prefill time.
    # Releases before 0.5.14 take the older era's coefficients ("sglang<0.5.14", Engine.speed_key) and SGLang's own
    # rules at that release (kvplan.speed.model.rules_key); 0.4.3 absorbs at any cached prefix on every backend.
    case = Case("t", "t-1", "sglang", "h200-sxm", "deepseek-v3", tp=8, ep=1, dp=1, gpus=8, weight_dtype=None,
                kv_dtype=None, load=Load(PROMPT, 2, 1), version=version, flags=dict(flags),
                era=era_of("sglang", version))
    built = Built(case, running)  # as the fit builds it: the engine's rules (its prefill graph among them)
    assert case.era == ("sglang<0.5.14" if version in ("0.5.3", "0.4.3") else "sglang")
    opts = tuple(f"{k}={v}" for k, v in flags.items())
    plan = api.plan("deepseek-v3", "h200", tp=8, context="8k", engine="sglang", engine_version=version,
                    engine_opts=opts)
    shape = plan_shape(plan, V3, H200, case.era, version)
    assert shape == built.shape
    assert prefill_seconds(shape, case.era, PROMPT) == prefill_seconds(built.shape, case.era, PROMPT)
    step = plan_decode_seconds(plan, V3, H200, case.era, version=version)
    assert abs(DecodeSteps(case.era, version=version).seconds(plan, V3, H200) - step) < 1e-12


def test_an_older_era_plan_reads_its_engines_rules():
    # SGLang 0.5.3 is priced with the "sglang<0.5.14" coefficient set; its shape rules are SGLang's (custom all-reduce
    # below its size limit, the MLA prefill form by backend), not none at all, as they were before rules_key.
    plan = api.plan("deepseek-v3", "h200", tp=8, context="8k", engine="sglang", engine_version="0.5.3",
                    engine_opts=("attention_backend=triton",))
    era = plan_shape(plan, V3, H200, "sglang<0.5.14", "0.5.3")
    assert era == plan_shape(plan, V3, H200, "sglang", "0.5.3")
    assert era.oneshot_max_bytes > 0 and era.decompress_flops == 0  # triton with the radix cache: absorbed


def test_a_bad_radix_cache_value_is_one_line():
    r = CliRunner().invoke(app, ["fit", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--engine", "sglang",
                                 "--engine-opt", "disable_radix_cache=maybe"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "disable_radix_cache must be true or false" in r.output


def test_enforce_eager_is_said_where_the_speed_figures_cannot_follow_it():
    # The fit skips every corpus run stating vLLM's enforce_eager (kvplan.speed.fields.GRAPHS_OFF), so a plan naming it
    # is priced as a graph run: said as a plan warning, not left silent; a plan without it says nothing of the sort.
    eager = api.plan("llama-3.1-8b", "h100", context="8k", engine="vllm", engine_opts=("enforce_eager=true",))
    graphs = api.plan("llama-3.1-8b", "h100", context="8k", engine="vllm")
    said = [w.message for w in eager.warnings if "enforce_eager" in w.message]
    assert len(said) == 1 and "priced as the speed corpus's runs ran, with graphs" in said[0]
    assert not [w for w in graphs.warnings if "enforce_eager" in w.message]


def test_the_python_api_prices_the_same_forms(tmp_path):
    # api.simulate takes the same options and its own prefix_caching switch: triton with the radix cache absorbs, with
    # it off (the engine option, or prefix_caching=False) the prefill is decompressed, as fa3's default is; the
    # simulator then reuses no prefix (Limits.prefix_cache) and an offload tier, which keeps evicted prefixes, is
    # refused
    trace = tmp_path / "one.csv"
    trace.write_text(f"arrival,input_tokens,output_tokens\n0,{PROMPT},2\n")

    def ttft(opts=(), **kw):
        run = api.simulate("deepseek-v3", "h200", tp=8, engine="sglang", engine_opts=opts, trace=str(trace), **kw)
        return run.summary["latency_s"]["ttft"]["mean"], run

    default, _ = ttft()
    triton, _ = ttft(("attention_backend=triton",))
    off, run = ttft(("attention_backend=triton", "disable_radix_cache=true"))
    assert triton > default and off == default and not run.limits.prefix_cache
    assert ttft(("attention_backend=triton",), prefix_caching=False)[0] == default
    with pytest.raises(api.KvplanError, match="needs the engine's prefix cache"):
        ttft(("disable_radix_cache=true",), offload="cpu:64GiB")
