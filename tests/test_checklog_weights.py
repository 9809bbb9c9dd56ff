"""`kvplan check-log` on quantized checkpoints (issue 22): the weights priced in the format the log states, never
bf16 in silence.

Real lines from the start-up corpus's training records (tests/fixtures/logs/corpus/index.yaml cites each; none held
out): llm-d planner's vLLM 0.19.0 sweep (llm-d-incubation/llm-d-planner@d3121e0, accuracy/results/v0.19.0/logs/,
2026-04-22) and AgentiviumAI/workflow-aware-prompt-cache@628a8f5:sglang.log.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from conftest import one_line_error
from kvplan.cli import app
from kvplan.engines.log_weights import log_weight_dtype, stated_format
from kvplan.engines.logparse import parse_log
from kvplan.model.weights import weight_bytes
from kvplan.sources.catalog import find_in_catalog

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"
W8A8 = CORPUS / "llmd-w8a8-redhatai-qwen2-5-7b-h100-80gb-tp1pp1dp1-8192.log"  # RedHatAI/...-quantized.w8a8
W4A16 = CORPUS / "llmd-w4a16-redhatai-lla-h100-80gb-tp1pp1dp1-8192-dtf16.log"
BF16 = CORPUS / "llmd-qwen-qwen2-5-7b-instruct-h100-80gb-tp1pp1dp1-8192.log"
SGL_AWQ = CORPUS / "sglang-agentivium-qwen25-7b-awq-16gb.log"
runner = CliRunner()


def test_the_logs_stated_method_is_read():
    # vLLM's engine-config line prints model_config.quantization, resolved from the checkpoint: "... dtype=torch.
    # bfloat16, ..., quantization=compressed-tensors, ..." (no --quantization in its non-default args)
    assert parse_log(W8A8.read_text()).settings["quantization"] == "compressed-tensors"
    assert parse_log(W4A16.read_text()).settings["quantization"] == "gptq_marlin"
    assert parse_log(BF16.read_text()).settings["quantization"] == "None"
    # SGLang: "Load weight end. elapsed=0.80 s, type=Qwen2ForCausalLM, quant=awq, bits=4, avail mem=9.83 GB, ..."
    s = parse_log(SGL_AWQ.read_text()).settings
    assert (s["quantization"], s["quant_bits"]) == ("awq", 4)


def test_v0_engine_line():
    # vLLM V0's format (vllm-project/vllm@1473f74:vllm/engine/llm_engine.py, LLMEngine.__init__: "Initializing an LLM
    # engine (v%s) with config: model=%r, ... disable_custom_all_reduce=%s, quantization=%s, enforce_eager=%s, ..."),
    # filled in as that call writes it, beside V0's block counts
    line = ("INFO 06-01 12:00:00 llm_engine.py:100] Initializing an LLM engine (v0.5.0) with config: model='m/q-AWQ', "
            "speculative_config=None, tokenizer='m/q-AWQ', tensor_parallel_size=1, disable_custom_all_reduce=False, "
            "quantization=awq_marlin, enforce_eager=False, kv_cache_dtype=auto\n"
            "INFO 06-01 12:00:09 gpu_executor.py:83] # GPU blocks: 2048, # CPU blocks: 512\n")
    assert parse_log(line).settings["quantization"] == "awq_marlin"


def test_methods_map_by_the_weight_dtype_aliases():
    assert stated_format("awq_marlin") == stated_format("gptq_marlin") == stated_format("awq") == "int4"
    assert stated_format("gptq", bits=8) == "int8"  # SGLang's bits=8 line
    assert stated_format("fp8") == "fp8" and stated_format("NVFP4") == "nvfp4"
    # the bits of these are the checkpoint's quantization_config's, not the method's: never guessed
    assert stated_format("compressed-tensors") is None and stated_format("modelopt") is None


def test_w8a8_weights_hand_arithmetic():
    # Qwen2.5-7B-Instruct (config.json: hidden 3584, 28 layers, MLP 18944, 28 heads / 4 KV heads of 128, vocab
    # 152064, embeddings untied). Per layer: q and o 3584*3584 each, k and v 3584*512 each, gate/up/down 3*3584*18944:
    # 25,690,112 + 3,670,016 + 203,685,888 = 233,046,016 int8 bytes; x28 = 6,525,288,448. Embedding and lm_head
    # 152064*3584 = 544,997,376 each, bf16: 2,179,989,504 B. Norms and q/k/v biases (7168 + 4608) * 28 + 3584 final
    # = 333,312 bf16: 666,624 B. Total 8,705,944,576 B = 8.108 GiB; bf16 would be 15,231,233,024 B (+75%).
    w = weight_bytes(find_in_catalog("qwen2.5-7b-instruct"), "int8")
    assert (w.sharded, w.embedding + w.lm_head, w.replicated) == (6_525_288_448, 2_179_989_504, 666_624)


def _weights_row(args) -> tuple[dict, dict]:
    r = runner.invoke(app, ["check-log", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    rows = {row["quantity"].split(" (")[0]: row for row in data["rows"]}
    return rows, data


def test_w8a8_log_without_the_checkpoint_uses_its_name_and_says_so():
    # compressed-tensors alone does not fix the bits; the checkpoint's name ".w8a8" does, and the note says which
    rows, data = _weights_row([W8A8, "-m", "qwen2.5-7b-instruct"])
    assert any("quantization=compressed-tensors" in n and "counted as int8" in n for n in data["notes"]), data["notes"]
    # vLLM printed "Model loading took 8.14 GiB" (bf16 pricing was +75.05%); the CUDA-graph estimate 0.81 GiB
    # (bf16: -24.29%, without the W8A8 surcharge)
    assert abs(rows["weights per GPU"]["error"]) < 0.005
    assert abs(rows["CUDA graphs"]["error"]) < 0.01


def test_weight_dtype_option_is_an_assumption_printed():
    rows, data = _weights_row([W8A8, "-m", "qwen2.5-7b-instruct", "--weight-dtype", "w8a8"])
    assert any("counted as int8, as given (--weight-dtype)" in n for n in data["notes"]), data["notes"]
    assert abs(rows["weights per GPU"]["error"]) < 0.005
    rows, _ = _weights_row([W8A8, "-m", "qwen2.5-7b-instruct", "--weight-dtype", "bf16"])
    assert rows["weights per GPU"]["error"] > 0.7  # as asked: the user's word wins, and shows +75%


def test_gptq_marlin_priced_as_int4():
    rows, data = _weights_row([W4A16, "-m", "llama-3.1-8b-instruct"])
    assert any("counted as int4: the log states quantization=gptq_marlin" in n for n in data["notes"])
    assert abs(rows["weights per GPU"]["error"]) < 0.01  # printed 5.38 GiB; bf16 pricing was +178.6%


def test_sglang_quant_line_prices_awq():
    rows, data = _weights_row([SGL_AWQ, "-m", "qwen2.5-7b"])
    assert any("quantization=awq" in n for n in data["notes"]), data["notes"]
    assert abs(rows["weights per GPU"]["error"]) < 0.01  # "mem usage=5.25 GB"; bf16 pricing was +173%


def test_a_quantized_checkpoint_wins_and_a_disagreement_is_said():
    spec = find_in_catalog("gpt-oss-120b")  # quantization_config: mxfp4 experts
    notes: list = []
    assert log_weight_dtype(spec, "mxfp4", None, "openai/gpt-oss-120b", notes) is None and notes == []
    assert log_weight_dtype(spec, "fp8", None, "openai/gpt-oss-120b", notes) is None
    assert "quantization_config is mxfp4" in notes[0]


def test_unsized_method_and_no_name_is_said_not_guessed():
    notes: list = []
    spec = find_in_catalog("qwen2.5-7b-instruct")
    assert log_weight_dtype(spec, "compressed-tensors", None, "org/my-model", notes) is None
    assert "only the checkpoint's quantization_config says" in notes[0] and "weight_dtype" in notes[0]


def test_bad_weight_dtype_is_one_line():
    r = runner.invoke(app, ["check-log", str(W8A8), "-m", "qwen2.5-7b-instruct", "--weight-dtype", "int3"])
    one_line_error(r, 2, "unknown weight dtype 'int3'")


def test_weight_dtype_on_a_llamacpp_log_is_refused():
    log = Path(__file__).parent / "fixtures" / "logs" / "llamacpp_qwen3_30b_a3b_rowsplit.log"
    r = runner.invoke(app, ["check-log", str(log), "--weight-dtype", "int4"])
    one_line_error(r, 2, "does not apply")


ONLINE_FP8 = CORPUS / "vllm-35289-qwen35-27b-fp8-online.log"  # vllm-project/vllm#35289 (2026-02-26), training split


def test_online_quantization_asked_on_the_command_line_or_in_non_default_args():
    # mlaplan32: a log with no engine-config line states an online quantization only as the run asked it: the
    # command line (`--quantization fp8`, or its alias -q: EngineArgs.add_cli_args, vllm-project/vllm@99d7eb5d:
    # vllm/engine/arg_utils.py) or the dict vLLM logs at start-up (log_non_default_args, vllm-project/vllm@00fc8809:
    # vllm/entrypoints/utils.py: "non-default args: {...}")
    assert parse_log(ONLINE_FP8.read_text()).settings["quantization"] == "fp8"
    tail = "INFO 02-26 05:55:51 [gpu_worker.py:405] Available KV cache memory: 10.00 GiB\n"
    args = ("INFO 02-26 05:55:00 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3.5-27B', "
            "'quantization': 'fp8', 'max_model_len': 8192}\n")
    assert parse_log(args + tail).settings["quantization"] == "fp8"
    serve = "vllm serve Qwen/Qwen3.5-27B -q fp8 --max-model-len 8192\n"
    assert parse_log(serve + tail).settings["quantization"] == "fp8"
    assert "quantization" not in parse_log("pip install -q vllm\n" + tail).settings  # -q only on vLLM's own line
    # the engine-config line, the method vLLM resolved, wins over what was asked
    engine = ("INFO 02-26 05:55:01 [core.py:77] Initializing a V1 LLM engine (v0.16.0) with config: "
              "model='Qwen/Qwen3.5-27B', quantization=None, enforce_eager=True\n")
    assert parse_log(args + engine + tail).settings["quantization"] == "None"


def test_online_fp8_log_prices_fp8_weights():
    # Qwen3.5-27B (config.json: hidden 5120, vocab 248,320, untied): attention 7,237,795,840 + MLP 17,112,760,320 =
    # 24,350,556,160 parameters in fp8, 1 B each; embedding and LM head 2 x 248,320 x 5,120 = 2,542,796,800 params
    # and the vision tower 460,730,096, norms 2,645,504, all bf16: 2 x 3,006,172,400 = 6,012,344,800 B. Total
    # 30,362,900,960 B = 28.28 GiB beside vLLM's printed "Model loading took 28.0 GiB"; bf16 pricing was 50.96 GiB
    # (+82%)
    rows, data = _weights_row([ONLINE_FP8, "-m", "qwen3.5-27b"])
    assert any("counted as fp8: the log states quantization=fp8" in n for n in data["notes"]), data["notes"]
    assert abs(rows["weights per GPU"]["error"]) < 0.02
