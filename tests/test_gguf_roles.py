"""A GGUF file's weights by role are its own tensors' bytes (issue 22): the embedding and output head at the types the
file stores them in, not the quantization mix's rule; a split model (llama.cpp's gguf-split) read from all its parts;
a GGUF file known by its magic bytes whatever its name. The files are written here (conftest.write_gguf), sparse.

Block sizes (ggml-org/ggml src/ggml-common.h, QK_K = 256): q4_K 144 B / 256 values, q5_K 176 / 256, q6_K 210 / 256,
q8_0 34 / 32; f32 4 B a value.
"""

from __future__ import annotations

import json

import pytest
from conftest import F32, Q4_K, Q6_K, Q8_0, gguf_tensor as t, llama_31_8b_gguf, one_line_error, write_gguf, unwrapped
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.model.weights import weight_bytes
from kvplan.sources.gguf import spec_from_gguf
from kvplan.sources.gguf_file import read_gguf

runner = CliRunner()
Q5_K = 13  # ggml_type GGML_TYPE_Q5_K (ggml include/ggml.h)
H70, L70, FF70, V70, KV70 = 8192, 80, 28672, 128256, 1024


def _q5k(name, dims):
    n = dims[0] * dims[1]
    return name, dims, Q5_K, n // 256 * 176


def llama_31_70b(path, table):
    """Llama-3.1-70B as llama-quantize's Q4_K_M writes it (src/llama-quant.cpp llama_tensor_get_type): attn_v and
    ffn_down Q6_K on use_more_bits layers (i < 10, i >= 70, (i - 10) % 3 == 2: 40 of 80), attn_v Q5_K elsewhere (the
    70B rule: "8 heads sharing the same attn_v weights ... quantizing this tensor with more bits"), the rest Q4_K,
    norms F32; token_embd and output of `table` (Q4_K and Q6_K, or Q8_0 for both as bartowski's "_L" files)."""
    H, L, FF, V, KV = H70, L70, FF70, V70, KV70
    tensors = [t("token_embd.weight", (H, V), table[0])]
    for i in range(L):
        more, b = i < 10 or i >= 70 or (i - 10) % 3 == 2, f"blk.{i}"
        v = t(f"{b}.attn_v.weight", (H, KV), Q6_K) if more else _q5k(f"{b}.attn_v.weight", (H, KV))
        tensors += [t(f"{b}.attn_norm.weight", (H,), F32), t(f"{b}.attn_q.weight", (H, H), Q4_K),
                    t(f"{b}.attn_k.weight", (H, KV), Q4_K), v, t(f"{b}.attn_output.weight", (H, H), Q4_K),
                    t(f"{b}.ffn_norm.weight", (H,), F32), t(f"{b}.ffn_gate.weight", (H, FF), Q4_K),
                    t(f"{b}.ffn_up.weight", (H, FF), Q4_K), t(f"{b}.ffn_down.weight", (FF, H), Q6_K if more else Q4_K)]
    tensors += [t("output_norm.weight", (H,), F32), t("output.weight", (H, V), table[1]),
                t("rope_freqs.weight", (64,), F32)]
    meta = {"general.architecture": "llama", "general.file_type": 15, "llama.block_count": L,
            "llama.context_length": 131072, "llama.embedding_length": H, "llama.feed_forward_length": FF,
            "llama.attention.head_count": 64, "llama.attention.head_count_kv": 8, "llama.rope.freq_base": 500000.0}
    write_gguf(path, meta, tensors)


# The table: 8,192 x 128,256 = 1,050,673,152 values; Q4_K 591,003,648 B, Q6_K 861,880,320 B, Q8_0 1,116,340,224 B.
# The layers: q and o 2 x 67,108,864 Q4_K = 75,497,472 B; k 8,388,608 Q4_K = 4,718,592 B; gate and up 2 x
# 234,881,024 Q4_K = 264,241,152 B; norms 2 x 8,192 x 4 = 65,536 B; per layer 344,522,752 B, x 80 = 27,561,820,160 B.
# On the 40 use_more_bits layers attn_v Q6_K 6,881,280 B and ffn_down Q6_K 192,675,840 B (199,557,120 B), on the
# other 40 attn_v Q5_K 5,767,168 B and ffn_down Q4_K 132,120,576 B (137,887,744 B): 7,982,284,800 + 5,515,509,760.
# output_norm and rope_freqs 32,768 + 256 B. All but the table: 41,059,647,744 B.
REST = 27_561_820_160 + 40 * 199_557_120 + 40 * 137_887_744 + 33_024
Q4_K_M_BYTES = REST + 591_003_648 + 861_880_320  # 42,512,526,912 B = 42.51 GB
Q4_K_L_BYTES = REST + 2 * 1_116_340_224  # 43,292,328,192 B = 43.29 GB


def test_the_embedding_and_head_are_the_files_own_bytes(tmp_path):
    # bartowski's Llama-3.1-70B table ("Q4_K_L ... 43.30GB ... Uses Q8_0 for embed and output weights", "Q4_K_M ...
    # 42.52GB"; as quoted at https://ozeki.chat/p_8590-understanding-ai-model-files.html, read 2026-12-06): the two
    # files differ only in token_embd and output, by (1,116,340,224 - 591,003,648) + (1,116,340,224 - 861,880,320) =
    # 779,796,480 B, the 0.78 GB between the listings. kvplan gave both files the Q4_K_M mix's Q4_K table before.
    for table, total, gb in [((Q4_K, Q6_K), Q4_K_M_BYTES, 42.52), ((Q8_0, Q8_0), Q4_K_L_BYTES, 43.30)]:
        path = tmp_path / f"m-{table[0]}.gguf"
        llama_31_70b(path, table)
        spec, notices = spec_from_gguf(path, "m")
        w = weight_bytes(spec)
        assert w.total == spec.checkpoint_bytes == read_gguf(path).total_bytes == total
        assert abs(total / 1e9 - gb) / gb < 0.001, total
        assert (w.embedding, w.lm_head) == {Q4_K: (591_003_648, 861_880_320), Q8_0: (1_116_340_224,) * 2}[table[0]]
        assert w.experts == 0 and w.replicated == 80 * 2 * 8192 * 4 + 8192 * 4 + 64 * 4  # norms, rope_freqs
        assert f"token_embd {w.embedding:,}, output {w.lm_head:,}" in notices[-1]
    assert Q4_K_L_BYTES - Q4_K_M_BYTES == 779_796_480


def test_llama_cpp_keeps_the_files_own_table_in_host_memory(tmp_path):
    # llama.cpp keeps token_embd in host memory (tests/test_llamacpp_host_embedding.py): the GPU holds the file less
    # its Q8_0 table, 1,116,340,224 B, not less the 591,003,648 B a Q4_K table would be
    path = tmp_path / "Llama-3.1-70B-Q4_K_L.gguf"
    llama_31_70b(path, (Q8_0, Q8_0))
    res = runner.invoke(app, ["fit", str(path), "--engine", "llama.cpp", "--gpu", "h100", "--ctx", "8k", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)["plans"][0]
    assert plan["weight_bytes"] == Q4_K_L_BYTES
    assert plan["weight_bytes_per_gpu"] == Q4_K_L_BYTES - 1_116_340_224


def test_rescaled_checkpoints_fall_back_to_the_computed_roles(tmp_path):
    # a spec whose checkpoint bytes something changed (the first n layers for a validation run) no longer has the
    # file's roles: computed from its parameters, never the file's total under another model's name
    path = tmp_path / "m.gguf"
    llama_31_8b_gguf(path)
    spec, _ = spec_from_gguf(path, "m")
    small = spec.with_layers(2)
    assert small.file_weights is None and weight_bytes(small).sharded < weight_bytes(spec).sharded // 10


def _split(path, parts: int, drop=None):
    """The Llama-3.1-8B Q4_K_M file split as gguf-split writes it: metadata in part 1 only, split.no (uint16),
    split.count (uint16) and split.tensors.count (int32) in every part, tensors in order."""
    tensors = llama_31_8b_gguf(path)
    meta = read_gguf(path).metadata
    meta = {k: v for k, v in meta.items() if not k.startswith("tokenizer")}
    path.unlink()
    size = -(-len(tensors) // parts)
    out = []
    for no in range(parts):
        keys = {"split.no": (2, no), "split.count": (2, parts), "split.tensors.count": (5, len(tensors))}
        name = path.with_name(f"{path.stem}-{no + 1:05d}-of-{parts:05d}.gguf")
        if no != drop:
            write_gguf(name, {**meta, **keys} if no == 0 else keys, tensors[no * size:(no + 1) * size])
        out.append(name)
    return out


def test_a_split_model_is_all_of_its_parts(tmp_path):
    from test_gguf import LLAMA_Q4_K_M_BYTES

    parts = _split(tmp_path / "Llama-3.1-8B-Q4_K_M.gguf", 3)
    base = ["--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "8k"]
    for named in (parts[0], parts[2], tmp_path):  # the first part, another, or the folder holding them
        res = runner.invoke(app, ["fit", str(named), *base, "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["plans"][0]["weight_bytes"] == LLAMA_Q4_K_M_BYTES
        assert "292 tensors of the 3 parts of the split file" in " ".join(res.stderr.split())
        res = runner.invoke(app, ["fit", str(named), *base, "--emit", "llama.cpp"])
        assert f"-m {parts[0].resolve()} " in unwrapped(res.stdout)  # llama.cpp loads a split model from its first part


def test_a_missing_part_is_refused_by_name(tmp_path):
    parts = _split(tmp_path / "m.gguf", 3, drop=1)
    one_line_error(runner.invoke(app, ["fit", str(parts[0]), "--gpu", "rtx-4090", "--ctx", "8k"]), 3,
                   "m-00002-of-00003.gguf: part 2 of the 3-file split GGUF is missing")


def test_a_part_in_the_wrong_place_or_a_short_count_is_refused(tmp_path):
    parts = _split(tmp_path / "m.gguf", 2)
    parts[1].rename(tmp_path / "x")
    parts[0].rename(parts[1])
    (tmp_path / "x").rename(parts[0])  # the two parts swapped
    with pytest.raises(KvplanError, match="split.no / split.count say part 2 of 2, not 1 of 2"):
        spec_from_gguf(parts[0], "m")


def test_a_gguf_file_is_known_by_its_magic_not_its_name(tmp_path):
    # llama-server -m takes any file name; kvplan reads the file as GGUF by its first four bytes and names it in -m
    path = tmp_path / "llama-model.bin"
    llama_31_8b_gguf(path)
    res = runner.invoke(app, ["fit", str(path), "--engine", "llama.cpp", "--gpu", "rtx-4090", "--ctx", "8k",
                              "--emit", "llama.cpp"])
    assert res.exit_code == 0, res.output
    assert f"llama-server -m {path.resolve()} " in unwrapped(res.stdout)
    other = tmp_path / "weights.bin"
    other.write_bytes(b"\x00" * 64)
    one_line_error(runner.invoke(app, ["fit", str(other), "--gpu", "rtx-4090", "--ctx", "8k"]), 2,
                   "neither a GGUF file (its first four bytes are not the magic 'GGUF') nor a config.json")


def test_norms_of_any_shape_are_replicated_and_a_renamed_part_is_refused(tmp_path):
    # Command R+'s q/k norms are (head_dim, heads) matrices (llama-arch.cpp blk.%d.attn_q_norm): norms, not weights
    # tensor parallelism splits
    from kvplan.sources.gguf_roles import role_of

    assert role_of("blk.3.attn_q_norm.weight", (128, 96)) == "replicated"
    assert role_of("blk.3.attn_q.weight", (12288, 12288)) == "sharded"
    assert role_of("blk.3.ffn_up_exps.weight", (2880, 2880, 32)) == "experts"
    assert role_of("blk.3.ffn_gate_inp.weight", (2880, 32)) == "replicated"
    parts = _split(tmp_path / "m.gguf", 2)
    parts[0].rename(tmp_path / "m-00001-of-00003.gguf")
    with pytest.raises(KvplanError, match="named as one of 3 parts, but its split.count is 2"):
        spec_from_gguf(tmp_path / "m-00001-of-00003.gguf", "m")
