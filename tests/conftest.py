"""Shared fixtures: where ../shared lives (absent in a user's clone: tests that need it skip)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

# One torch (OpenMP) thread, set before any test module imports torch: the tests' tensors are small, and on a
# shared 2-core machine a second thread mostly spin-waits (test_validate.py's per-family runs took 68 CPU-s with
# the default threads and 10 with one; see benchmarks/README.md, "The test suite"). Subprocesses inherit it.
# A value already set wins (OMP_NUM_THREADS=2 pytest ... runs them threaded).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Notes and warnings on stderr whole, one line each (kvplan.report.wrap): a test asserts a note's words, not where a
# terminal of 80 columns breaks them. tests/test_wrapped_lines.py runs the commands wrapped, as a user sees them, and
# KVPLAN_WRAP=1 pytest ... runs every test so.
os.environ.setdefault("KVPLAN_WRAP", "0")

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CONFIGS = SHARED / "configs"


def load_script(relpath: str, name: str | None = None):
    """A benchmark or script of the repository (not a package) imported as a module, e.g. benchmarks/speed_corpus.py."""
    import importlib.util

    path = REPO / relpath
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


LOG_CORPUS = REPO / "tests" / "fixtures" / "logs" / "corpus"


@functools.cache
def _budget_corpus():
    return load_script("benchmarks/budget_corpus.py", "budget_corpus_for_tests")


@functools.cache
def corpus_index() -> tuple:
    """The memory corpus's index (benchmarks/budget_corpus.py load_index), read once per test process: every record,
    for a test about the corpus as a whole. Shared: read it, never change it."""
    return tuple(_budget_corpus().load_index())


def corpus_record(rec_id: str, held_out: bool = False) -> dict:
    """A record of the memory corpus's index. In the training split, unless the test says `held_out=True` at the call
    (one that reads what a held-out log prints), so no test reads a held-out record unseen."""
    rec = next(r for r in corpus_index() if r["id"] == rec_id)
    assert held_out or not _budget_corpus().is_held_out(rec), f"{rec_id} is held out"
    return rec


def corpus_log(rec_id: str, held_out: bool = False) -> str:
    """The text of a start-up log record of the memory corpus (corpus_record: the training split unless
    `held_out=True`)."""
    return (LOG_CORPUS / corpus_record(rec_id, held_out)["log"]).read_text()


def training_log(rec_id: str) -> str:
    """The text of a start-up log record of the memory corpus's training split; a held-out record is refused."""
    return corpus_log(rec_id)


def shared_config(name: str) -> dict:
    path = CONFIGS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"../shared/configs/{name}.json is not here (a user's clone has no ../shared)")
    return json.loads(path.read_text())


# Llama-3.1-8B's config.json shapes (meta-llama/Llama-3.1-8B-Instruct), for tests that quantize it by hand
LLAMA_31_8B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
               "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
               "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
               "tie_word_embeddings": False}


def llm_compressor_w8a8(kind: str) -> dict:
    """The quantization_config llm-compressor writes for a W8A8 scheme of `kind` "int" or "float": 8-bit weights per
    output channel, 8-bit activations per token, dynamic, lm_head kept (RedHatAI's *-quantized.w8a8 and *-FP8-dynamic
    checkpoints)."""
    fmt = {"int": "int-quantized", "float": "float-quantized"}[kind]
    eight = {"num_bits": 8, "type": kind, "symmetric": True}
    return {"quant_method": "compressed-tensors", "format": fmt, "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"],
                                          "weights": {**eight, "strategy": "channel", "dynamic": False},
                                          "input_activations": {**eight, "strategy": "token", "dynamic": True}}}}


def read_point(point: dict):
    """A speed-corpus point (a dict as tests/fixtures/speed/*.yaml writes one) read as the corpus reader reads it
    (kvplan.speed.corpus.case_of), asserted readable: the Case a test prices."""
    from kvplan.speed.corpus import case_of

    case, why = case_of(point, "test", "")
    assert case is not None, why
    return case


SPEED_CORPUS = REPO / "tests" / "fixtures" / "speed"


@functools.cache
def speed_corpus() -> tuple:
    """(file name, document) of every tests/fixtures/speed/*.yaml, parsed once per test process with libyaml's
    safe loader where PyYAML has it (the documents kvplan.speed.corpus.read_corpus reads; 3.4 MB, ~2 CPU-s, not
    the pure-Python loader's ~15 each time a test walked it). Shared: read it, never change it."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple((f.name, yaml.load(f.read_text(), Loader=loader)) for f in sorted(SPEED_CORPUS.glob("*.yaml")))


@functools.cache
def speed_cases() -> tuple:
    """(cases, {reason: points skipped}) of tests/fixtures/speed as kvplan.speed.corpus.read_corpus reads it, once per
    test process (each read parses the 3.4 MB corpus and makes its cases again; some forty tests read it). Shared: a
    test changes a case through dataclasses.replace, never in place."""
    from types import MappingProxyType

    from kvplan.speed.corpus import read_corpus

    cases, skipped = read_corpus(SPEED_CORPUS)
    return tuple(cases), MappingProxyType(skipped)


def speed_corpus_points():
    """(file name, point with its file's defaults) of every point of speed_corpus()."""
    for name, doc in speed_corpus():
        for point in doc.get("points") or ():
            yield name, {**(doc.get("defaults") or {}), **point}


@pytest.fixture
def kvplan_home(tmp_path, monkeypatch):
    """An empty user catalog, so tests never see the developer's own imports."""
    monkeypatch.setenv("KVPLAN_HOME", str(tmp_path / "kvplan-home"))
    return tmp_path / "kvplan-home"


def engine_figures(source) -> dict:
    """An engine's printed figures by label: a Capacity's lines (or an EngineResult's), or a `fit --json` plan's
    engine table (the plan, or its `engine` object). The one reading every test shares."""
    if isinstance(source, dict):
        return {f["label"]: f["value"] for f in source.get("engine", source)["figures"]}
    return {f.label: f.value for f in getattr(source, "capacity", source).lines}


def one_line_error(result, code: int, needle: str = "") -> str:
    """A CliRunner result that failed the kvplan way: exit `code`, one `Error:` line on stderr, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def meta_param_count(cfg: dict, buffers: tuple[str, ...] = ()) -> int:
    """Parameters of transformers' own model for the config `cfg`, built on the meta device (shapes only,
    no memory), each tied tensor once, plus the buffers whose names end with one of `buffers` (tensors a
    checkpoint holds that transformers keeps as buffers). Skips without torch and the [transformers] extra,
    or when this transformers has no such model_type."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", reason="needs the [transformers] extra")
    try:
        hf = transformers.AutoConfig.for_model(**cfg)
    except (ValueError, KeyError):
        pytest.skip(f"this transformers ({transformers.__version__}) has no {cfg['model_type']}")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    counted = sum({id(p): p.numel() for p in model.parameters()}.values())
    return counted + sum(b.numel() for name, b in model.named_buffers() if buffers and name.endswith(buffers))


def write_safetensors(path, tensors: dict) -> None:
    """A real safetensors file of zeros (8-byte little-endian header length, the JSON header, the data):
    {name: (dtype, shape, bytes)}."""
    import json
    import struct

    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def write_gguf(path, metadata: dict, tensors: list, *, version: int = 3, alignment: int = 32) -> int:
    """A GGUF file laid out as ggml-org/ggml docs/gguf.md "File Structure" says (little-endian): magic, version,
    tensor and metadata counts, the metadata (int -> uint32, float -> float32, bool, str, a list of ints -> a uint32
    array, of str -> a string array; a (gguf type, value) pair for any other), the tensor infos (name, dims, ggml
    type id, offset) and the data section, aligned, left sparse (zeros that take no disk). `tensors`: [(name, dims
    with the row length first, ggml type id, bytes)]. Returns the file's size."""
    import struct

    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    def scalar(kind: int, v) -> bytes:
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        return string(v) if kind == 8 else struct.pack("<" + fmt[kind], v)

    def value(v) -> bytes:
        if isinstance(v, tuple):
            kind, v = v
        elif isinstance(v, list):
            item = 8 if v and isinstance(v[0], str) else 4
            return struct.pack("<IIQ", 9, item, len(v)) + b"".join(scalar(item, x) for x in v)
        else:
            kind = 7 if isinstance(v, bool) else 4 if isinstance(v, int) else 6 if isinstance(v, float) else 8
        return struct.pack("<I", kind) + scalar(kind, v)

    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)))
    for key, v in metadata.items():
        out += string(key) + value(v)
    offset = 0
    for name, dims, type_id, nbytes in tensors:
        out += string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, type_id, offset)
        offset += -(-nbytes // alignment) * alignment
    start = -(-len(out) // alignment) * alignment
    size = start + offset
    with open(path, "wb") as f:
        f.write(bytes(out))
        f.truncate(size)
    return size


F32, F16, Q8_0, Q4_K, Q6_K = 0, 1, 8, 12, 14  # ggml_type ids (ggml include/ggml.h, docs/gguf.md)


def gguf_nbytes(kind: int, n: int) -> int:
    return {F32: n * 4, F16: n * 2, Q8_0: n // 32 * 34, Q4_K: n // 256 * 144, Q6_K: n // 256 * 210}[kind]


def gguf_tensor(name, dims, kind):
    n = 1
    for d in dims:
        n *= d
    return (name, dims, kind, gguf_nbytes(kind, n))


def llama_31_8b_gguf(path, tied: bool = False, **extra_meta):
    """Llama-3.1-8B-Instruct as a Q4_K_M file: Q6_K output and, per llama_tensor_get_type's use_more_bits, Q6_K
    attn_v / ffn_down on layers 0-3, 28-31 and every third between; the rest Q4_K, norms F32. `tied`: no
    output.weight, and token_embd at the output's Q6_K as llama.cpp's quantizer stores a shared table
    (src/llama-quant.cpp llama_tensor_get_type, `!qs.has_output`)."""
    H, L, FF, V, KV = 4096, 32, 14336, 128256, 1024
    t = gguf_tensor
    tensors = [t("token_embd.weight", (H, V), Q6_K if tied else Q4_K)]
    for i in range(L):
        more, b = (Q6_K if i < 4 or i >= 28 or (i - 4) % 3 == 2 else Q4_K), f"blk.{i}"
        tensors += [t(f"{b}.attn_norm.weight", (H,), F32), t(f"{b}.attn_q.weight", (H, H), Q4_K),
                    t(f"{b}.attn_k.weight", (H, KV), Q4_K), t(f"{b}.attn_v.weight", (H, KV), more),
                    t(f"{b}.attn_output.weight", (H, H), Q4_K), t(f"{b}.ffn_norm.weight", (H,), F32),
                    t(f"{b}.ffn_gate.weight", (H, FF), Q4_K), t(f"{b}.ffn_up.weight", (H, FF), Q4_K),
                    t(f"{b}.ffn_down.weight", (FF, H), more)]
    tensors += [t("output_norm.weight", (H,), F32), *([] if tied else [t("output.weight", (H, V), Q6_K)]),
                t("rope_freqs.weight", (64,), F32)]
    meta = {"general.architecture": "llama", "general.name": "Llama 3.1 8B Instruct", "general.file_type": 15,
            "llama.block_count": L, "llama.context_length": 131072, "llama.embedding_length": H,
            "llama.feed_forward_length": FF, "llama.attention.head_count": 32, "llama.attention.head_count_kv": 8,
            "llama.rope.freq_base": 500000.0, "tokenizer.ggml.tokens": ["x"] * 70_000, **extra_meta}
    write_gguf(path, meta, tensors)
    return tensors


def unwrapped(text):
    """Output whose serve commands `fit --emit` broke at the terminal's width (backslash continuations,
    kvplan.report.disagg.wrapped) with each command on one line again, as tests read them."""
    if isinstance(text, bytes):
        return text.replace(b" \\\n  ", b" ")
    return text.replace(" \\\n  ", " ")
