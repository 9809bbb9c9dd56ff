"""SGLang's `--kv-cache-dtype auto` on a checkpoint that declares its KV quantization, by release (wheels read).

* to 0.5.1.post3: the model dtype (sglang-0.5.1.post3 wheel, sglang/srt/model_executor/model_runner.py L1168-1169:
  `if self.server_args.kv_cache_dtype == "auto": self.kv_cache_dtype = self.dtype`).
* from 0.5.3: the quant config's `kv_cache_quant_algo`, where it is "FP8", gives float8_e4m3fn (0.5.3 wheel,
  model_runner.py L1397-1409, init_memory_pool; 0.5.6 L1631-1643; 0.5.23 sglang/srt/mem_cache/kv_cache_dtype.py
  L49-59, configure_kv_cache_dtype); any other value (NVFP4) the model dtype. In 0.5.3 and 0.5.6 only ModelOpt's
  configs carry that attribute (layers/quantization/modelopt_quant.py; compressed_tensors has none).
* 0.5.18 adds Fp8Config: it reads a `kv_cache_quant_algo` key of the quantization_config (sglang-0.5.18 wheel,
  sglang/srt/layers/quantization/fp8.py L326-328, Fp8Config.from_config; 0.5.23 L366-385); 0.5.17's fp8.py has none.
* 0.5.19 adds compressed-tensors: CompressedTensorsConfig.kv_cache_quant_algo is "FP8" for a static, symmetric,
  per-tensor 8-bit float kv_cache_scheme (0.5.19 wheel, compressed_tensors/compressed_tensors.py L137-146,
  is_supported_scheme L1173; 0.5.23 L142-151, L1276-1285, the same test); 0.5.18's has no such property.
  Wheels read for both: 0.5.7, 0.5.10, 0.5.14, 0.5.15, 0.5.16, 0.5.17 (kv_cache_quant_algo in modelopt_quant.py, not
  in fp8.py or compressed_tensors.py), 0.5.18 to 0.5.23; the releases between two read ones that agree are
  planned as they do.
* a ModelOpt `kv_cache_scheme` written as a string (`scheme_word`), in config.json's flat form (`quant_algo` at the
  top; the nested form reads kv_cache_quant_algo alone), by the config SGLang picks for `quant_algo`
  (configs/model_config.py L1866-1869 in 0.5.23: "FP4" in it -> ModelOptFp4Config, "FP8" -> ModelOptFp8Config):
  - NVFP4: from 0.5.9 the string first, "FP8"/"FLOAT8" -> "FP8", "FP4"/"FLOAT4"/"NVFP4" -> "NVFP4", else "auto"
    (0.5.9 modelopt_quant.py L1015-1022, 0.5.23 L1629-1636); 0.5.8.post1 maps it the same but reads a
    kv_cache_quant_algo key first (L948-967); 0.5.3 reads that key, else calls `kv_cache_scheme.get` on the string
    (L601-604): an AttributeError at start-up, refused (0.5.4-0.5.8 unread, planned as 0.5.3).
  - FP8: to 0.5.8.post1 `kv_cache_scheme.get` on the string (0.5.3 L147-152, 0.5.8.post1 L263-268): refused;
    0.5.9-0.5.14 the string is skipped, no KV quantization (0.5.14 L451-457); from 0.5.15 the kv_cache_quant_algo key
    instead (0.5.15 L450-458, 0.5.23 L482-491).
  - any other algorithm's config (MIXED_PRECISION, MXFP8) with a string: not read here, refused.
  Then auto follows "FP8" alone (configure_kv_cache_dtype, above): an NVFP4 string is the model dtype.
* `--kv-cache-dtype` takes auto, fp8_e5m2, fp8_e4m3 in 0.5.3 (server_args.py L1462): a 16-bit cache of an FP8-KV
  checkpoint has no setting there; 0.5.4.post2 adds bf16 / bfloat16 (server_args.py L1987).

What `--kv-cache-dtype` takes (`check_flag`, `kv_flags`), the argparse choices in the wheels: auto and fp8_e5m2 in
0.4.0 (sglang/srt/server_args.py L296); fp8_e4m3 too in 0.4.3 and 0.4.9 (L374, L687) and 0.5.3 (L1462); 0.5.23 adds
mxfp8, bf16, bfloat16, nvfp4 and fp4_mx_block16 (sglang/srt/arg_groups/fields/model.py L209-218;
mem_cache/kv_cache_dtype.py configure_kv_cache_dtype raises "Unsupported kv_cache_dtype" past them). No release
read has int8, float16 or float32: such a cache is the model dtype's, through auto, or none at all (refused).
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.checkpoint_kv import KvRule
from kvplan.engines.emit import kv_dtype_arg
from kvplan.engines.versions import parse_version

E4M3_FLAG = (0, 4, 3)  # the first release read whose --kv-cache-dtype takes fp8_e4m3 (0.4.0: fp8_e5m2 alone)
FOLLOWS = (0, 5, 3)  # the first release read whose auto follows a declared FP8 cache (0.5.1.post3 does not)
BF16_FLAG = (0, 5, 4)  # the first release read whose --kv-cache-dtype takes bf16 (0.5.4.post2)
FP8_CONFIG = (0, 5, 18)  # the first release whose Fp8Config carries a kv_cache_quant_algo (0.5.17 has none)
COMPRESSED = (0, 5, 19)  # the first whose CompressedTensorsConfig does (0.5.18 has none)
STRING_READ = (0, 5, 8)  # 0.5.8.post1: the first read whose NVFP4 config maps a string kv_cache_scheme (0.5.3 fails)
STRING_FIRST = (0, 5, 9)  # from here the NVFP4 config reads the string before kv_cache_quant_algo; FP8's skips it
FP8_ALGO_KEY = (0, 5, 15)  # from here the FP8 config reads kv_cache_quant_algo beside a string (0.5.14 does not)
_FP4_WORDS = {"FP8": "FP8", "FLOAT8": "FP8", "FP4": "NVFP4", "FLOAT4": "NVFP4", "NVFP4": "NVFP4"}  # else "auto"


def _as_sglang(ckv, version: str):
    """The declaration with a string kv_cache_scheme read as SGLang `version`'s ModelOpt config reads it (module
    docstring): what it makes its kv_cache_quant_algo, as `algo`; a one-line refusal where the config fails on it."""
    if not ckv.scheme_word:
        return ckv
    v, algo, word = parse_version(version), ckv.algo, ckv.scheme_word
    plain = dataclasses.replace(ckv, scheme_word="")  # SGLang reads kv_cache_quant_algo alone
    if not ckv.flat_algo:  # hf_quant_config.json or a nested block: kv_cache_quant_algo alone
        return plain
    fails = (f"SGLang {version}'s ModelOpt config calls kv_cache_scheme.get(...) on the string \"{word}\" "
             "(modelopt_quant.py, 0.5.3 and 0.5.8.post1 read): an AttributeError at start-up")
    if "FP4" in ckv.flat_algo:
        if v < STRING_FIRST and algo:  # to 0.5.8.post1 a kv_cache_quant_algo key is read first
            return plain
        if v < STRING_READ:
            raise KvplanError(fails + " (0.5.8.post1 maps it)", EXIT_USAGE, param="model")
        return dataclasses.replace(plain, algo=_FP4_WORDS.get(word, "AUTO"))
    if ckv.flat_algo == "FP8":
        if v < STRING_FIRST:
            raise KvplanError(fails + " (0.5.9 skips it)", EXIT_USAGE, param="model")
        return plain if v >= FP8_ALGO_KEY else dataclasses.replace(plain, algo="")
    raise KvplanError(f"SGLang's {ckv.flat_algo} ModelOpt config with a string kv_cache_scheme (\"{word}\") is not "
                      "read in kvplan (its FP8 and NVFP4 configs are: kvplan/engines/sglang/cache_dtype.py)",
                      EXIT_USAGE, param="model")


def checkpoint_kv_rule(ckv, version: str) -> KvRule:
    """What SGLang `version`'s --kv-cache-dtype auto does with a checkpoint's declared KV cache (module docstring)."""
    read = _as_sglang(ckv, version)
    rule = _rule(read, version, parse_version(version))
    if not ckv.scheme_word:
        return rule
    as_algo = f"kv_cache_quant_algo {read.algo}" if read.algo else "no KV quantization"
    return rule._replace(why=f"{rule.why}; SGLang reads its kv_cache_scheme \"{ckv.scheme_word}\" as {as_algo}",
                         reads_as=read.algo)


def _rule(ckv, version: str, v) -> KvRule:
    if v < FOLLOWS:
        return KvRule(False, f"SGLang {version}'s --kv-cache-dtype auto is the model dtype (it follows a declared "
                             "FP8 cache from 0.5.3: model_runner.py init_memory_pool)")
    reads = (ckv.producer == "modelopt" or (v >= FP8_CONFIG and ckv.producer == "fp8")
             or (v >= COMPRESSED and ckv.producer == "compressed-tensors"))
    fp8 = ckv.kind == "FP8" and (ckv.producer != "compressed-tensors" or ckv.static_per_tensor)
    if reads and fp8:
        no_16bit = ("SGLang's --kv-cache-dtype takes auto, fp8_e5m2 or fp8_e4m3 in 0.5.3 (bf16 from 0.5.4) and its "
                    "auto is the checkpoint's FP8" if v < BF16_FLAG else "")
        return KvRule(True, f"SGLang {version}'s --kv-cache-dtype auto takes it (kv_cache_quant_algo FP8 -> "
                            "float8_e4m3fn: configure_kv_cache_dtype)", refuse_16bit=no_16bit)
    readers = ["ModelOpt"] + (["Fp8Config"] if v >= FP8_CONFIG else []) + (["compressed-tensors"] if v >= COMPRESSED
                                                                            else [])
    return KvRule(False, f"SGLang {version}'s --kv-cache-dtype auto follows a declared FP8 cache of "
                         f"{', '.join(readers)} alone (configure_kv_cache_dtype; Fp8Config's from 0.5.18, "
                         "compressed-tensors' static per-tensor FP8 from 0.5.19): the model dtype")


def kv_flags(version: str) -> dict[str, str]:
    """kvplan's cache dtypes that SGLang `version`'s --kv-cache-dtype names (module docstring), by its spelling:
    fp8 as fp8_e4m3 (fp8_e5m2 before 0.4.3, the same byte), bf16 from 0.5.4."""
    v = parse_version(version)
    return {"fp8": "fp8_e4m3" if v >= E4M3_FLAG else "fp8_e5m2", **({"bf16": "bfloat16"} if v >= BF16_FLAG else {})}


def check_flag(kv, model, version: str, auto: str | None) -> None:
    """Refuse a cache dtype SGLang `version` cannot be asked for: one its --kv-cache-dtype has no choice for where
    auto (the model dtype, or `auto`: a declared cache it follows) is not it (int8 in any release; fp32, fp16 or
    before 0.5.4 bf16 beside a model of another dtype). `kv`: None is auto."""
    wanted = kv_dtype_arg(kv, model, {}, auto)  # kvplan's name of the dtype a flag would have to ask for
    flags = kv_flags(version)
    if wanted is None or wanted in flags:
        return
    raise KvplanError(f"SGLang {version}'s --kv-cache-dtype has no {wanted} choice (server_args.py; see "
                      f"kvplan/engines/sglang/cache_dtype.py) and its auto is {auto or model.dtype} for this model; "
                      f"{arg('kv_dtype')} auto or {' or '.join(flags)}", EXIT_USAGE, param="kv_dtype", value=wanted,
                      allowed=("auto", *flags))
