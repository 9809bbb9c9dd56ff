"""trtllm-bench's settings as the tool reads the checkpoint (kvplan.engines.trtllm.bench): an untuned quantization
algorithm runs BuildConfig's defaults, and "the parameters" are the safetensors' element count, in which a packed
NVFP4 weight is 9/16 of an element. Hand arithmetic from NVIDIA/TensorRT-LLM@000a01de66f0eab4ab05640711f0253f50f5209c:
tensorrt_llm/bench/build/build.py (TUNED_QUANTS), @008b2b8d23af95e4e19fa6f354f9c5f6349b2bfc:tensorrt_llm/builder.py
(BuildConfig max_batch_size 2048, max_num_tokens 8192), @04cba882084a25665e7f80f5bda71b35b9790b6f:
tensorrt_llm/bench/build/dataclasses.py (get_param_count) and tuning.py, and the GPU profiles' NVML totals."""

from __future__ import annotations

from kvplan.bench.running import running
from kvplan.engines.trtllm.bench import BenchSettings, bench_settings, stored_elements
from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import case_of

LLAMA8 = find_in_catalog("llama-3.1-8b-instruct")
LLAMA70 = find_in_catalog("llama-3.3-70b-instruct")
OSS20 = find_in_catalog("gpt-oss-20b")  # OpenAI's MXFP4 checkpoint: quantization method mxfp4
H100 = find_gpu("h100-sxm")  # NVML total 85,520,809,984 B
B200 = find_gpu("b200")  # NVML total 192,265,846,784 B = 179.0625 GiB


def test_a_packed_nvfp4_weight_is_9_16_of_a_safetensors_element():
    # Llama-3.1-8B: 8,030,261,248 parameters, of them the embedding and LM head 2 x 128,256 x 4,096 = 1,050,673,152
    # and the norms 65 x 4,096 = 266,240 stay 16-bit (one element each); the 6,979,321,856 linear weights are stored
    # as uint8 pairs [N, K/2] plus fp8 scales [N, K/16]: 6,979,321,856 x 9 / 16 = 3,925,868,544 elements.
    assert stored_elements(LLAMA8, "nvfp4") == 3_925_868_544 + 1_050_673_152 + 266_240 == 4_976_807_936
    # FP8 and 16-bit checkpoints store one element a weight: the parameter count
    assert stored_elements(LLAMA8, "fp8") == stored_elements(LLAMA8, "bf16") == 8_030_261_248


def test_nvfp4_llama_70b_on_b200_sized_at_the_stored_elements():
    # Llama 3.3 70B: 70,553,706,496 parameters; 16-bit 2 x 1,050,673,152 + 1,318,912 = 2,102,665,216, linear
    # 68,451,041,280 x 9 / 16 = 38,503,710,720: 40,606,375,936 elements x 0.5 B (NVFP4) = 18.9088 GiB.
    # Room (179.0625 - 18.9088) x 0.90 = 144.1384 GiB; FP8 KV 2 x 80 x 8 x 128 x 1 B = 163,840 B a token, x (1,024 +
    # 8,192) = 1.40625 GiB a request: 102.5 requests -> 128 (< 256: up to 32s); tokens 102.5 x 1.125 -> 2,048.
    # Read as every parameter at 0.5 B (32.854 GiB) it was 93.6 requests -> 96.
    got = bench_settings(LLAMA70, B200.memory_smi_bytes, tp=1, pp=1, isl=1024, osl=8192, weight_dtype="nvfp4",
                         kv_dtype="fp8")
    assert got == BenchSettings(128, 2048)


def test_an_untuned_quantization_runs_buildconfigs_defaults():
    # gpt-oss's MXFP4 is no TUNED_QUANTS algorithm (W4A16_MXFP4 / W4A8_MXFP4_MXFP8): max_batch_size 2,048,
    # max_num_tokens 8,192 whatever the memory, then get_settings' floor ISL + max_batch_size (chunked prefill off)
    assert bench_settings(OSS20, H100.memory_smi_bytes, tp=1, pp=1, isl=1000, osl=1000, weight_dtype=None,
                          kv_dtype=None) == BenchSettings(2048, 8192)
    assert bench_settings(OSS20, H100.memory_smi_bytes, tp=1, pp=1, isl=8192, osl=1024, weight_dtype="mxfp4",
                          kv_dtype=None) == BenchSettings(2048, 8192 + 2048)
    # AWQ-style int4 likewise (W4A16_AWQ)
    assert bench_settings(LLAMA8, H100.memory_smi_bytes, tp=1, pp=1, isl=1000, osl=1000, weight_dtype="int4",
                          kv_dtype=None) == BenchSettings(2048, 8192)


def test_a_gpt_oss_trtllm_bench_point_steps_at_8192_tokens():
    # the dev-guide page's gpt-oss-20b H100 1024/1024 cell: the engine's pool (about 630 requests of 2,048 tokens)
    # binds under the tool's 2,048, and a step takes up to 8,192 tokens (before: the tuned 512 / 2,048)
    p = {"engine": "trtllm", "version": "1.0", "gpu": "h100-sxm", "isl": 1024, "osl": 1024, "request_rate": "inf",
         "num_prompts": 3000, "kvplan_model": "gpt-oss-20b", "gpus": 1, "tp": 1, "weight_dtype": "mxfp4",
         "harness": "trtllm-bench", "metrics": {"output_throughput": 1000}}
    case, why = case_of(p, "test", "")
    assert case is not None, why
    got = running(case, OSS20, H100)
    assert got.chunk == 8192 and 512 < got.cap < 2048
