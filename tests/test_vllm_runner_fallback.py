"""A vLLM log that says its V2 model runner fell back to V1 is reconciled on V1's terms, and says so.

The line is vLLM's own (`config/vllm.py` VllmConfig.use_v2_model_runner, read in the wheels: 0.22.0 L501-513
"Model runner v2 requires Triton; using the v1 model runner instead." and "Model runner v2 does not yet support %s;
using the v1 model runner instead."; capitalised "Model Runner V2 ... V1" in 0.24.0 L533-545, 0.25.0 L540-552,
0.28.0 L651-663, 0.29.0 L662-674, 0.33.0 L752-764). No corpus record prints it: the excerpts below are hand-written
around that text (the "(APIServer pid=..) WARNING .. [vllm.py:549]" prefix as vLLM's logger formats it), with the
ngram reason a public report quotes ("Model Runner V2 does not yet support ngram/ngram_gpu speculative decoding;
using the V1 model runner instead.").
"""

from __future__ import annotations

from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.engines.vllm import overhead, runner
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

_FELL_BACK = ("(APIServer pid=4101) WARNING 10-02 09:14:03 [vllm.py:549] Model Runner V2 does not yet support "
              "ngram/ngram_gpu speculative decoding; using the V1 model runner instead.\n")
_LOG = ("(EngineCore_DP0 pid=4188) INFO 10-02 09:14:10 [core.py:93] Initializing a V1 LLM engine (v0.25.0) with "
        "config: model='meta-llama/Llama-3.1-8B-Instruct', max_seq_len=8192, tensor_parallel_size=1\n"
        "(EngineCore_DP0 pid=4188) INFO 10-02 09:15:02 [gpu_worker.py:300] Available KV cache memory: 52.00 GiB\n"
        "(EngineCore_DP0 pid=4188) INFO 10-02 09:15:02 [kv_cache_utils.py:1100] GPU KV cache size: "
        "425,984 tokens\n")


def test_the_fallback_line_is_read_in_both_spellings():
    assert parse_log(_FELL_BACK + _LOG).settings["runner_fallback"] == (
        "does not yet support ngram/ngram_gpu speculative decoding")
    old = "WARNING 07-01 10:00:00 [vllm.py:503] Model runner v2 requires Triton; using the v1 model runner instead.\n"
    assert parse_log(old + _LOG).settings["runner_fallback"] == "requires Triton"
    assert "runner_fallback" not in parse_log(_LOG).settings  # no line, no fallback assumed


def _terms(opts: dict) -> tuple:
    m, g = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    st = vllm_settings(m, g, Deployment(), Request(context=8192), "0.25.0", opts)
    return st, overhead.overhead_terms(m, Deployment(), st)


def test_a_fallen_back_run_is_priced_as_v1():
    # Llama 3.1 8B on 0.25.0 runs V2 by default (every dense model). Fallen back, its profile run samples as V1's:
    # V1's 14.12 B x 1024 rows x 128,256 vocab = 1,854,438,113 B plus the Triton top-k/top-p buffer 132 SMs x 128,256
    # x 4 B = 67,719,168 B, against V2's (2 + 4) x 1024 x 128,256 = 788,004,864 B: 1,134,152,417 B more
    v2, t2 = _terms({})
    v1, t1 = _terms({"model_runner": "v1"})
    assert abs(t1["activation_peak"] - t2["activation_peak"] - 1_134_152_417) <= 2
    # and V1 subtracts its CUDA-graph estimate (0.20+, CUDA, graphs on), which V2 of 0.22-0.28 reports as 0
    assert v1.cudagraphs and not v2.cudagraphs and t1["cudagraphs"] > 0 == t2["cudagraphs"]
    m = find_in_catalog("llama-3.1-8b")
    assert runner.runs_v2(m, (0, 25, 0)) and not runner.runs_v2(m, (0, 25, 0), fell_back=True)
    assert runner.runner_note(m, (0, 25, 0), fell_back=True).startswith("model runner: V1, as stated")


def test_check_log_reconciles_on_v1_and_notes_it():
    m, g = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    fell = reconcile(parse_log(_FELL_BACK + _LOG), m, g)
    plain = reconcile(parse_log(_LOG), m, g)
    said = [n for n in fell.notes if "used V1: reconciled on V1's terms" in n]
    assert said and "ngram/ngram_gpu" in said[0]
    assert not any("V1's terms" in n for n in plain.notes)
    gib = [float(next(r for r in x.rows if r.quantity.startswith("available KV")).predicted.split()[0])
           for x in (fell, plain)]
    # V1 leaves less KV room: at least its larger sampler, 1,134,152,417 B = 1.056 GiB (test above), and on top the
    # CUDA-graph estimate V2 of 0.25 puts at 0
    assert gib[1] - gib[0] > 1_134_152_417 / 2**30 + 0.005
