"""A GGUF file planned from the file alone (issue 22): its header parsed as ggml-org/ggml docs/gguf.md and
src/gguf.cpp lay it out, its tensors' exact bytes as the weights, its metadata as the layout; hostile and truncated
files refused in one line. The files are written here (conftest.write_gguf), their data sections sparse.

Block sizes used in the hand arithmetic (ggml-org/ggml src/ggml-common.h static_asserts, QK_K = 256):
q4_K 2 halves + scales[12] + qs[128] = 144 B / 256 values; q6_K ql[128] + qh[64] + scales[16] + half = 210 / 256;
q8_0 half + qs[32] = 34 / 32; f32 4 B a value.
"""

from __future__ import annotations

import json
import math
import struct

import pytest
from conftest import F16, F32, Q4_K, Q6_K, Q8_0, gguf_tensor as _t, llama_31_8b_gguf as llama_31_8b, unwrapped
from conftest import one_line_error, shared_config, write_gguf
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.readers.configs import spec_from_config
from kvplan.sources.gguf import spec_from_gguf
from kvplan.sources.gguf_file import read_gguf

runner = CliRunner()
# Llama-3.1-8B Q4_K_M by hand: 16 of 32 layers have Q6_K attn_v and ffn_down (0-3, 28-31, and i = 6, 9, ..., 27:
# 8 more). Q4_K values: embedding 4096 x 128256 = 525,336,576; per layer q 16,777,216 + k 4,194,304 + o 16,777,216
# + gate/up 2 x 58,720,256 = 155,189,248, x 32 = 4,966,055,936; attn_v 4,194,304 + ffn_down 58,720,256 = 62,914,560
# on 16 layers = 1,006,632,960. Q4_K total 6,498,025,472 values / 256 x 144 = 3,655,139,328 B. Q6_K values: output
# 525,336,576 + 1,006,632,960 = 1,531,969,536 / 256 x 210 = 1,256,693,760 B. F32: 65 x 4096 + 64 = 266,304 values
# = 1,065,216 B. Sum 4,912,898,304 B = 4.575 GiB (llama.cpp's tools/quantize/README.md: Llama-3.1-8B Q4_K_M 4.58 GiB).
LLAMA_Q4_K_M_BYTES = 3_655_139_328 + 1_256_693_760 + 1_065_216


def test_weights_are_the_sum_of_each_tensors_whole_blocks(tmp_path):
    # a 4096 x 4096 Q4_K tensor = 4096 x 4096 / 256 x 144 = 9,437,184 B; a 4096 x 1024 Q6_K = 3,440,640 B;
    # 4096 x 4096 Q8_0 = 4096 x 4096 / 32 x 34 = 17,825,792 B; a 4096 F32 norm 16,384 B
    path = tmp_path / "m.gguf"
    write_gguf(path, {"general.architecture": "llama"}, [
        ("a", (4096, 4096), Q4_K, 9_437_184), ("b", (4096, 1024), Q6_K, 3_440_640),
        ("c", (4096, 4096), Q8_0, 17_825_792), ("d", (4096,), F32, 16_384)])
    header = read_gguf(path)
    assert [t.nbytes for t in header.tensors] == [9_437_184, 3_440_640, 17_825_792, 16_384]
    assert header.total_bytes == 30_720_000 and header.version == 3
    assert header.metadata == {"general.architecture": "llama"}


def test_fit_plans_a_gguf_file_from_the_file_alone(tmp_path):
    path = tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    llama_31_8b(path)
    res = runner.invoke(app, ["fit", str(path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "32k",
                              "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)["plans"][0]
    assert plan["weight_bytes"] == LLAMA_Q4_K_M_BYTES == 4_912_898_304
    # K and V of 8 heads x 128 in f16 (llama.cpp's default cache type) on 32 layers: 2 x 1024 x 2 x 32 = 131,072 B
    assert plan["kv_bytes_per_token"] == 131_072
    assert "weights: 4,912,898,304 B in 292 tensors of the file (file type Q4_K_M" in " ".join(res.stderr.split())
    # a folder holding that one file plans the same
    res = runner.invoke(app, ["fit", str(tmp_path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "32k",
                              "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["plans"][0]["weight_bytes"] == LLAMA_Q4_K_M_BYTES
    (tmp_path / "other.gguf").write_bytes(path.read_bytes()[:4096])  # a second GGUF: which one is not guessed
    one_line_error(runner.invoke(app, ["fit", str(tmp_path), "--gpu", "rtx-4090", "--ctx", "8k"]), 2,
                   "holds 2 GGUF files")


def _matrices(cfg: dict, kind=F16) -> list:
    """The weight matrices of a llama-family config as convert_hf_to_gguf.py names them (norms and biases, under 1 %
    of the parameters, left out)."""
    H, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // heads
    E = cfg.get("num_experts") or cfg.get("num_local_experts", 0)
    FF = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    out = [_t("token_embd.weight", (H, V), kind)]
    if not cfg.get("tie_word_embeddings", cfg["model_type"].startswith("gemma")):  # Gemma ties by default
        out.append(_t("output.weight", (H, V), kind))
    for i in range(L):
        b = f"blk.{i}"
        out += [_t(f"{b}.attn_q.weight", (H, heads * hd), kind), _t(f"{b}.attn_k.weight", (H, kv * hd), kind),
                _t(f"{b}.attn_v.weight", (H, kv * hd), kind), _t(f"{b}.attn_output.weight", (heads * hd, H), kind)]
        if cfg.get("attention_bias"):  # gpt-oss: q, k, v and output biases (llama-model.cpp creates them)
            out += [_t(f"{b}.attn_q.bias", (heads * hd,), F32), _t(f"{b}.attn_k.bias", (kv * hd,), F32),
                    _t(f"{b}.attn_v.bias", (kv * hd,), F32), _t(f"{b}.attn_output.bias", (H,), F32)]
        if E:
            out += [_t(f"{b}.ffn_gate_inp.weight", (H, E), F32), _t(f"{b}.ffn_gate_exps.weight", (H, FF, E), kind),
                    _t(f"{b}.ffn_up_exps.weight", (H, FF, E), kind), _t(f"{b}.ffn_down_exps.weight", (FF, H, E), kind)]
        else:
            out += [_t(f"{b}.ffn_gate.weight", (H, FF), kind), _t(f"{b}.ffn_up.weight", (H, FF), kind),
                    _t(f"{b}.ffn_down.weight", (FF, H), kind)]
    return out


def _metadata(arch: str, cfg: dict) -> dict:
    """What convert_hf_to_gguf.py writes for `cfg` (TextModel.set_gguf_parameters: the keys of llama-arch.cpp)."""
    meta = {"general.architecture": arch, "general.file_type": 1, f"{arch}.block_count": cfg["num_hidden_layers"],
            f"{arch}.context_length": cfg["max_position_embeddings"], f"{arch}.embedding_length": cfg["hidden_size"],
            f"{arch}.feed_forward_length": cfg["intermediate_size"],
            f"{arch}.attention.head_count": cfg["num_attention_heads"],
            f"{arch}.attention.head_count_kv": cfg["num_key_value_heads"]}
    if cfg.get("head_dim"):
        meta[f"{arch}.attention.key_length"] = meta[f"{arch}.attention.value_length"] = cfg["head_dim"]
    if cfg.get("num_experts") or cfg.get("num_local_experts"):
        meta.update({f"{arch}.expert_count": cfg.get("num_experts") or cfg["num_local_experts"],
                     f"{arch}.expert_used_count": cfg["num_experts_per_tok"]})
    if cfg.get("moe_intermediate_size"):
        meta[f"{arch}.expert_feed_forward_length"] = cfg["moe_intermediate_size"]
    if cfg.get("sliding_window") and arch.startswith(("gemma", "cohere2", "gpt-oss", "phi3")):
        meta[f"{arch}.attention.sliding_window"] = cfg["sliding_window"]
    if arch == "gpt-oss":  # convert_hf_to_gguf.py GptOssModel: the expert width and YaRN
        meta.update({"gpt-oss.expert_feed_forward_length": cfg["intermediate_size"],
                     "gpt-oss.rope.scaling.type": "yarn", "gpt-oss.rope.scaling.factor": 32.0,
                     "gpt-oss.rope.scaling.original_context_length": 4096})
    return meta


@pytest.mark.parametrize("name, arch", [("Qwen__Qwen3-8B", "qwen3"), ("meta-llama__Llama-3.1-8B-Instruct", "llama"),
                                        ("Qwen__Qwen2.5-7B-Instruct", "qwen2"), ("google__gemma-2-9b", "gemma2"),
                                        ("Qwen__Qwen3-30B-A3B", "qwen3moe"), ("google__gemma-3-1b-it", "gemma3"),
                                        ("mistralai__Mixtral-8x7B-v0.1", "llama"),
                                        ("mistralai__Mistral-Nemo-Instruct-2407", "llama"),
                                        ("microsoft__phi-4", "phi3"), ("microsoft__Phi-3-mini-4k-instruct", "phi3"),
                                        ("CohereForAI__c4ai-command-r-v01", "command-r"),
                                        ("openai__gpt-oss-20b", "gpt-oss"), ("openai__gpt-oss-120b", "gpt-oss")])
def test_the_layout_read_from_gguf_metadata_is_the_config_jsons(tmp_path, name, arch):
    # the real config.json (../shared/configs) and a GGUF of the same model agree layer by layer: kinds, heads,
    # head widths, windows; the context limit and the parameter count by role. A phi3 file runs without its window in
    # llama.cpp ("Phi SWA is currently disabled", ggml-org/llama.cpp@00342301 src/llama-model.cpp LLM_ARCH_PHI3):
    # Phi-3-mini-4k's 2047-token window (its config's sliding_window) is not planned from the GGUF
    cfg = shared_config(name)
    path = tmp_path / f"{name}.gguf"
    write_gguf(path, _metadata(arch, cfg), _matrices(cfg))
    ours, _ = spec_from_gguf(path, "g")
    theirs, _ = spec_from_config(cfg, "c")
    if arch == "phi3":
        theirs = theirs.without_windows()
    assert ours.layers == theirs.layers
    assert (ours.max_context, ours.vocab_size, ours.hidden_size) == (theirs.max_context, theirs.vocab_size,
                                                                     theirs.hidden_size)
    assert ours.params == theirs.params and ours.quantization.method == "fp16"


def _fit_error(tmp_path, data: bytes, needle: str):
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    return one_line_error(runner.invoke(app, ["fit", str(path), "--gpu", "h100", "--ctx", "8k"]), 2, needle)


def _head(version=3, n_tensors=0, n_kv=1) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _s(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


ARCH_KV = _s("general.architecture") + struct.pack("<I", 8) + _s("llama")


@pytest.mark.parametrize("data, needle", [
    (_head(version=1), "version 1"),
    (_head(version=4), "version 4"),
    (_head(version=3 << 16), "big-endian"),
    (_head(n_tensors=2**62), "a tensor count of"),
    (_head(n_kv=2**40), "a metadata count of"),
    (_head() + struct.pack("<Q", 2**60), "runs past the end"),  # a key 2^60 bytes long
    (_head() + _s("k") + struct.pack("<IIQ", 9, 4, 2**59), "runs past the end"),  # an array of 2^59 uint32
    (_head() + _s("k") + struct.pack("<IIQ", 9, 9, 1), "array of arrays"),
    (_head() + _s("k") + struct.pack("<IB", 7, 2), "bool of value 2"),
    (_head() + _s("k") + struct.pack("<I", 13), "unknown value type 13"),
    (_head(n_kv=2) + ARCH_KV + ARCH_KV, "appears twice"),
    (_head()[:-3], "runs past the end"),  # cut short inside the header
    (_head(n_tensors=1) + ARCH_KV + _s("t" * 64) + struct.pack("<I", 1), "64 bytes or longer"),
    (_head(n_tensors=1) + ARCH_KV + _s("t") + struct.pack("<I5Q", 5, *[1] * 5), "5 dimensions"),
    (_head(n_tensors=1) + ARCH_KV + _s("t") + struct.pack("<IQIQ", 1, 256, 4, 0), "ggml type 4"),
    (_head(n_tensors=1) + ARCH_KV + _s("t") + struct.pack("<IQIQ", 1, 100, Q4_K, 0), "not whole q4_k blocks"),
    (_head(n_tensors=1) + ARCH_KV + _s("t") + struct.pack("<IQIQ", 1, 256, Q4_K, 32), "has offset 32, expected 0"),
])
def test_hostile_or_truncated_headers_are_one_line_errors(tmp_path, data, needle):
    _fit_error(tmp_path, data, needle)


def test_a_file_cut_short_in_its_tensor_data_is_refused_naming_the_tensor(tmp_path):
    path = tmp_path / "cut.gguf"
    size = write_gguf(path, {"general.architecture": "llama"}, [("a", (4096, 4096), Q4_K, 9_437_184)])
    with open(path, "r+b") as f:
        f.truncate(size - 1)
    with pytest.raises(KvplanError, match=r"tensor 'a' ends at byte .* \(a download cut short\?\)"):
        read_gguf(path)


@pytest.mark.parametrize("meta, needle", [
    ({"general.architecture": "mamba"}, "llama.cpp architecture 'mamba' is not one kvplan reads"),
    ({"llama.block_count": None}, "llama.block_count is missing"),
    ({"llama.attention.head_count_kv": [8] * 31 + [4]}, "llama.attention.head_count_kv differs by layer"),
    ({"llama.attention.value_length": 64, "llama.attention.key_length": 128}, "value_length differs"),
    ({"llama.attention.kv_lora_rank": 512}, "llama.attention.kv_lora_rank declares a layout"),
    ({"llama.rope.scaling.type": "longrope"}, "rope.scaling.type 'longrope'"),
    ({"split.count": 3}, "split into 3 files"),
    ({"general.type": "adapter"}, "general.type is 'adapter'"),
    ({"llama.feed_forward_length": 1024}, "kvplan does not read this file's layout right"),
])
def test_a_layout_kvplan_does_not_read_is_refused_naming_the_key(tmp_path, meta, needle):
    path = tmp_path / "m.gguf"
    llama_31_8b(path)
    full = read_gguf(path).metadata
    full = {k: v for k, v in {**full, **meta}.items() if v is not None and not k.startswith("tokenizer")}
    write_gguf(path, full, [(t.name, t.dims, {"q4_k": Q4_K, "q6_k": Q6_K, "f32": F32}[t.type_name], t.nbytes)
                            for t in read_gguf(path).tensors])
    one_line_error(runner.invoke(app, ["fit", str(path), "--gpu", "rtx-4090", "--ctx", "8k"]), 2, needle)


def test_llama_cpp_is_told_to_load_the_file_itself(tmp_path):
    # llama-server -m takes a GGUF file (llama.cpp tools/server README); the plan's weights are that file's own, so
    # -m names it, not a "<name>-Q4_K_M.gguf" to be made; another weight type asks for another file, as before
    path = tmp_path / "Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    llama_31_8b(path)
    base = ["fit", str(path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "32k", "--emit", "llama.cpp"]
    res = runner.invoke(app, base)
    assert res.exit_code == 0, res.output
    assert f"llama-server -m {path.resolve()} -c 32768 -np 1" in unwrapped(res.stdout)
    res = runner.invoke(app, [*base, "--weight-dtype", "q8_0"])
    assert res.exit_code == 0 and "llama-server -m Llama-3.1-8B-Instruct-Q4_K_M-Q8_0.gguf" in unwrapped(res.stdout)


def test_long_string_arrays_are_stepped_over_and_what_follows_is_read_right(tmp_path):
    # 200,000 strings of 1-12 bytes (about 3.4 MB: several 1 MiB read chunks, strings straddling their edges) and one
    # of 2 MiB (longer than a chunk), then a scalar and a tensor: both read as written, the array kept as its length;
    # in a short array, kept, a string over 1 MiB is kept as None (its length stepped over)
    path = tmp_path / "m.gguf"
    tokens = ["t" * (1 + i % 12) for i in range(200_000)]
    tokens[1500] = "z" * (2 << 20)
    write_gguf(path, {"tokenizer.ggml.tokens": tokens, "big": ["x" * (2 << 20), "y"], "general.architecture": "llama",
                      "after": 7}, [("a", (256, 2), Q4_K, 288)])
    header = read_gguf(path)
    assert header.metadata["tokenizer.ggml.tokens"].length == 200_000
    assert header.metadata["big"] == [None, "y"]
    assert header.metadata["after"] == 7 and header.metadata["general.architecture"] == "llama"
    assert [(t.name, t.dims, t.nbytes) for t in header.tensors] == [("a", (256, 2), 288)]
    # a string in a long array whose length runs past the end of the file
    raw = path.read_bytes()
    at = raw.index(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 4 + 4 + 8 + 8 * 1000 + sum(
        len(t) for t in tokens[:1000])
    path.write_bytes(raw[:at] + struct.pack("<Q", 2**60) + raw[at + 8:])
    with pytest.raises(KvplanError, match="tokenizer.ggml.tokens runs past the end of the file"):
        read_gguf(path)


def test_rope_scaling_keys_are_the_configs_rope_scaling(tmp_path):
    # convert_hf_to_gguf.py writes a YaRN config.json's rope_scaling {rope_type yarn, factor 4,
    # original_max_position_embeddings 32768} as {arch}.rope.scaling.type / .factor / .original_context_length
    cfg = shared_config("Qwen__Qwen3-8B")
    path = tmp_path / "q.gguf"
    meta = {**_metadata("qwen3", cfg), "qwen3.rope.scaling.type": "yarn", "qwen3.rope.scaling.factor": 4.0,
            "qwen3.rope.scaling.original_context_length": 32768, "qwen3.context_length": 131072}
    write_gguf(path, meta, _matrices(cfg))
    spec, _ = spec_from_gguf(path, "q")
    assert (spec.rope_scaling.kind, spec.rope_scaling.factor, spec.rope_scaling.original) == ("yarn", 4.0, 32768)
    assert spec.max_context == 131072


def test_a_gpt_oss_mxfp4_file_is_planned_from_its_own_bytes(tmp_path):
    # gpt-oss-20b as llama-quantize's MXFP4_MOE (general.file_type 38) writes it: the routed experts MXFP4 (ggml
    # block_mxfp4: e + qs[16] = 17 B per 32 values), everything else Q8_0 here (34 B per 32). Per layer the experts hold
    # 32 x 3 x 2,880 x 2,880 = 796,262,400 values = 423,014,400 B; x 24 layers = 10,152,345,600 B, the experts' role to
    # the byte; the weight dtype is kvplan's experts-only mxfp4, and llama.cpp's -m is the file itself
    from conftest import gguf_nbytes

    cfg = shared_config("openai__gpt-oss-20b")
    MXFP4 = 39  # GGML_TYPE_MXFP4 (ggml include/ggml.h)
    tensors = []
    for name, dims, kind, nbytes in _matrices(cfg, Q8_0):
        n = math.prod(dims)
        if "_exps" in name:
            tensors.append((name, dims, MXFP4, n // 32 * 17))
        elif len(dims) == 1 or name.endswith("ffn_gate_inp.weight"):
            tensors.append((name, dims, F32, gguf_nbytes(F32, n)))
        else:
            tensors.append((name, dims, kind, nbytes))
    path = tmp_path / "gpt-oss-20b-mxfp4.gguf"
    write_gguf(path, {**_metadata("gpt-oss", cfg), "general.file_type": 38}, tensors)
    spec, _ = spec_from_gguf(path, "g")
    assert (spec.quantization.method, spec.quantization.experts_only) == ("mxfp4", True)
    from kvplan.model.weights import weight_bytes

    w = weight_bytes(spec)
    assert w.experts == 24 * 423_014_400 == 10_152_345_600 and w.total == read_gguf(path).total_bytes
    res = runner.invoke(app, ["fit", str(path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "8k",
                              "--emit", "llama.cpp"])
    assert res.exit_code == 0, res.output
    assert f"llama-server -m {path.resolve()} " in unwrapped(res.stdout)


def test_phi3_longrope_factors_are_refused_by_name(tmp_path):
    # Phi-3.5-mini and Phi-3-mini-128k carry LongRoPE factor tensors (rope_factors_long / _short), a RoPE kvplan does
    # not read from a GGUF file: refused naming the tensor, not planned as a plain phi3
    cfg = shared_config("microsoft__Phi-3.5-mini-instruct")
    path = tmp_path / "phi.gguf"
    write_gguf(path, _metadata("phi3", cfg), [*_matrices(cfg), _t("rope_factors_long.weight", (48,), F32)])
    one_line_error(runner.invoke(app, ["fit", str(path), "--gpu", "rtx-4090", "--ctx", "8k"]), 2,
                   "tensor rope_factors_long.weight declares a layout kvplan does not read")


def test_cohere2_slides_on_three_layers_of_four(tmp_path):
    # Command R7B (cohere2): llama.cpp's load_hparams sets set_swa_pattern(4) with the file's sliding_window
    # (ggml-org/llama.cpp@00342301 src/llama-model.cpp LLM_ARCH_COHERE2): layer il slides when il % 4 < 3, so of 32
    # layers 24 slide over 4,096 tokens and 8 (3, 7, ..., 31) attend fully. Its config (CohereForAI/c4ai-command-r7b:
    # hidden 4096, 32 layers, 32 heads, 8 KV heads, vocab 256,000, tied) as the common decoder reads it
    cfg = {"model_type": "cohere2", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 256000,
           "max_position_embeddings": 8192, "sliding_window": 4096, "tie_word_embeddings": True}
    path = tmp_path / "r7b.gguf"
    write_gguf(path, {**_metadata("cohere2", cfg), "cohere2.attention.sliding_window": 4096}, _matrices(cfg))
    spec, _ = spec_from_gguf(path, "r7b")
    kinds = [layer.kind.value for layer in spec.layers]
    assert kinds == ["sliding", "sliding", "sliding", "full"] * 8
    assert {layer.window for layer in spec.layers if layer.kind.value == "sliding"} == {4096}
    assert spec.layers == spec_from_config(cfg, "c")[0].layers
