"""Optional: kvplan's llama.cpp cache rules against a real llama.cpp loading a tiny random-weight GGUF.

Where `llama-cpp-python` (which compiles llama.cpp) and `gguf` are installed, this writes a 4-layer
GQA Llama and a 4-layer Gemma 2 (sliding window, iSWA cache) with random weights, creates llama.cpp
contexts with several `n_ctx`, sequence counts and cache types, reads the cache lines llama.cpp logs
(`llama_kv_cache_unified: size = X MiB ( N cells, L layers, S/T seqs), K (t): a MiB, V (t): b MiB`,
vendored llama.cpp `4227c9be` src/llama-kv-cache-unified.cpp L190) and compares them with
`kvplan.engines.llamacpp.engine.layout` for the matching era: cells, layers and streams exactly, MiB within
the two decimals llama.cpp prints. Elsewhere the module skips with the reason.

The size line is read here rather than with kvplan.engines.logparse, whose pattern expects one space after
`size =` while llama.cpp pads the figure to 7 characters (`size =    1.38 MiB`).
"""

from __future__ import annotations

import ctypes
import re

import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (optional llama.cpp check)")
gguf = pytest.importorskip("gguf", reason="gguf is not installed (optional llama.cpp check)")
np = pytest.importorskip("numpy")

from kvplan.readers.configs import spec_from_config  # noqa: E402
from kvplan.core.dtypes import KV_DTYPES  # noqa: E402
from kvplan.engines.llamacpp import engine as llamacpp  # noqa: E402
from kvplan.model.layers import ChunkedLocal, SlidingWindow  # noqa: E402
from kvplan.engines.logparse import parse_log  # noqa: E402
from kvplan.planning.deploy import Deployment  # noqa: E402
from kvplan.planning.plan import Request  # noqa: E402

# llama-cpp-python release -> the llama.cpp era kvplan models (the commit it vendors).
ERAS = {"0.3.16": "2025-08"}  # vendor/llama.cpp 4227c9be (Aug 2025)
ERA = ERAS.get(llama_cpp.__version__)
if ERA is None:
    pytest.skip(f"llama-cpp-python {llama_cpp.__version__} is not mapped to a kvplan llama.cpp era "
                f"(mapped: {', '.join(ERAS)})", allow_module_level=True)

GGML_TYPE = {"fp16": 1, "q4_0": 2, "q8_0": 8}  # ggml.h enum ggml_type
N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_LAYER, N_FF, N_SWA = 256, 4, 2, 64, 4, 512, 100
VOCAB = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [f"w{i}" for i in range(61)]  # 320
CONFIGS = {  # the same models as HF-style config.json dicts, for kvplan
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": N_EMBD,
              "num_attention_heads": N_HEAD, "num_key_value_heads": N_HEAD_KV, "num_hidden_layers": N_LAYER,
              "intermediate_size": N_FF, "vocab_size": len(VOCAB), "max_position_embeddings": 4096},
    "gemma2": {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_size": N_EMBD,
               "num_attention_heads": N_HEAD, "num_key_value_heads": N_HEAD_KV, "head_dim": HEAD_DIM,
               "num_hidden_layers": N_LAYER, "intermediate_size": N_FF, "vocab_size": len(VOCAB),
               "max_position_embeddings": 4096, "sliding_window": N_SWA},
}


def write_gguf(path, arch: str) -> None:
    """A random-weight model llama.cpp loads: f16 matrices, f32 norms, a byte-fallback SPM vocabulary."""
    T, M = gguf.TENSOR_NAMES, gguf.MODEL_TENSOR
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    if arch == "gemma2":
        w.add_sliding_window(N_SWA)
    w.add_tokenizer_model("llama")
    w.add_token_list(VOCAB)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(61)])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * 61)  # unknown, control, byte, normal
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def mat(rows, cols):  # numpy (rows, cols) is ggml {cols, rows}
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)

    q, kv = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    w.add_tensor(T[M.TOKEN_EMBD] + ".weight", mat(len(VOCAB), N_EMBD))
    w.add_tensor(T[M.OUTPUT_NORM] + ".weight", np.ones(N_EMBD, np.float32))
    if arch == "llama":
        w.add_tensor(T[M.OUTPUT] + ".weight", mat(len(VOCAB), N_EMBD))
    norms = [M.ATTN_NORM, M.FFN_NORM] + ([M.ATTN_POST_NORM, M.FFN_POST_NORM] if arch == "gemma2" else [])
    for i in range(N_LAYER):
        for t in norms:
            w.add_tensor(T[t].format(bid=i) + ".weight", np.ones(N_EMBD, np.float32))
        for t, shape in ((M.ATTN_Q, (q, N_EMBD)), (M.ATTN_K, (kv, N_EMBD)), (M.ATTN_V, (kv, N_EMBD)),
                         (M.ATTN_OUT, (N_EMBD, q)), (M.FFN_GATE, (N_FF, N_EMBD)), (M.FFN_UP, (N_FF, N_EMBD)),
                         (M.FFN_DOWN, (N_EMBD, N_FF))):
            w.add_tensor(T[t].format(bid=i) + ".weight", mat(*shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    out = {}
    for arch in CONFIGS:
        write_gguf(d / f"tiny-{arch}.gguf", arch)
        out[arch] = d / f"tiny-{arch}.gguf"
    return out


class LogCapture:
    """llama.cpp's log (model load and context creation) into a list, then the binding's own logger back."""

    def __enter__(self):
        self.parts: list[str] = []

        @llama_cpp.llama_log_callback
        def cb(level, text, user_data):
            self.parts.append(text.decode("utf-8", "replace"))

        self._cb = cb  # keep the ctypes callback alive while llama.cpp holds it
        llama_cpp.llama_log_set(cb, ctypes.c_void_p(0))
        return self

    def __exit__(self, *exc):
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))

    @property
    def text(self) -> str:
        return "".join(self.parts)


def load_low_level(path, n_ctx, n_seq, unified, type_k, type_v, fa, swa_full, n_ubatch=512) -> str:
    """Create a context through the C API (the only way to set n_seq_max / kv_unified); its log."""
    with LogCapture() as cap:
        mp = llama_cpp.llama_model_default_params()
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
        assert model, cap.text[-2000:]
        try:
            cp = llama_cpp.llama_context_default_params()
            cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_ubatch, n_ubatch, n_seq
            cp.kv_unified, cp.swa_full, cp.flash_attn = unified, swa_full, fa
            cp.type_k, cp.type_v = GGML_TYPE[type_k], GGML_TYPE[type_v]
            ctx = llama_cpp.llama_init_from_model(model, cp)
            assert ctx, cap.text[-2000:]
            llama_cpp.llama_free(ctx)
        finally:
            llama_cpp.llama_model_free(model)
    return cap.text


def load_llama_class(path, n_ctx, type_k, type_v, fa) -> str:
    """The binding's high-level `Llama` (one sequence; n_batch = n_ubatch = min(n_ctx, 512)); its log."""
    with LogCapture() as cap:
        llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, type_k=GGML_TYPE[type_k], type_v=GGML_TYPE[type_v],
                              flash_attn=fa, verbose=True)
        llm.close()
    return cap.text


# The line of vendored llama.cpp 4227c9be src/llama-kv-cache-unified.cpp L190:
# "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB"
SIZE_LINE = re.compile(r"size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\), "
                       r"K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB")


def cache_lines(text: str) -> list[dict]:
    """One record per cache llama.cpp built (iSWA: the non-SWA cache, then the SWA cache)."""
    return [dict(mib=float(m[0]), cells=int(m[1]), layers=int(m[2]), seqs=int(m[3]), streams=int(m[4]),
                 type_k=m[5], k_mib=float(m[6]), type_v=m[7], v_mib=float(m[8])) for m in SIZE_LINE.findall(text)]


def prints_as(mib: float, nbytes: int) -> bool:
    """Does `nbytes` print as `mib` with llama.cpp's two decimals (%7.2f)?"""
    return abs(nbytes / 2**20 - mib) <= 0.005 + 1e-9


def check(arch, text, n_ctx, n_seq, unified, type_k, type_v, fa, swa_full, n_ubatch=512):
    spec, _ = spec_from_config(CONFIGS[arch], f"tiny-{arch}")
    opts = {"n_ubatch": str(n_ubatch), "flash_attn": str(fa), "kv_unified": str(unified),
            "swa_full": str(swa_full), "type_v": type_v}
    st = llamacpp.settings(spec, None, Deployment(), Request(context=n_ctx, kv_dtype=KV_DTYPES[type_k]), ERA, opts)
    lay = llamacpp.layout(spec.layers, n_ctx, n_seq, st)
    is_swa = lambda l: isinstance(l, (SlidingWindow, ChunkedLocal))  # noqa: E731
    caches = [[l for l in spec.layers if not is_swa(l)]]
    if lay.cells_swa:
        caches.append([l for l in spec.layers if is_swa(l)])
    logged = cache_lines(text)
    assert len(logged) == len(caches), text[-3000:]
    parsed = parse_log(text)  # what `kvplan check-log` reads from the same real log
    assert parsed.engine == "llama.cpp" and parsed.reported["kv_self_mib"].value == logged[0]["mib"]
    for rec, layers, cells in zip(logged, caches, (lay.cells_base, lay.cells_swa)):
        part = llamacpp.layout(layers, n_ctx, n_seq, st)
        got = (rec["cells"], rec["layers"], rec["seqs"], rec["streams"], rec["type_k"], rec["type_v"])
        want = (cells, len(layers), n_seq, lay.n_stream, llamacpp._gg(st.type_k), llamacpp._gg(st.type_v))
        assert got == want, f"logged (cells, layers, seqs, streams, K, V) {got}, kvplan {want}"
        for key, nbytes in (("k_mib", part.k_bytes), ("v_mib", part.v_bytes), ("mib", part.total)):
            assert prints_as(rec[key], nbytes), \
                f"{key}: logged {rec[key]:.2f} MiB, kvplan {nbytes} B = {nbytes / 2**20:.4f} MiB"
    assert lay.n_stream == (1 if unified or n_seq == 1 else n_seq)
    assert abs(sum(rec["mib"] for rec in logged) - lay.total / 2**20) <= 0.005 * len(logged) + 1e-9


# n_ctx 700 and 1100 are no multiple of 32 or 256: 700 -> 704 (pad 32, no flash attention) or 768
# (pad 256, flash attention); 1100 -> 1120 / 1280. A quantized V cache needs flash attention.
@pytest.mark.parametrize("n_ctx,type_k,type_v,fa", [
    (700, "fp16", "fp16", False),
    (700, "q8_0", "q8_0", True),
    (1100, "q8_0", "fp16", False),
    (2048, "q4_0", "q4_0", True),
])
def test_llama_class_one_sequence(models, n_ctx, type_k, type_v, fa):
    text = load_llama_class(models["llama"], n_ctx, type_k, type_v, fa)
    check("llama", text, n_ctx, 1, False, type_k, type_v, fa, False, n_ubatch=min(n_ctx, 512))


# Several sequences: non-unified = n_seq streams of pad(ceil(n_ctx / n_seq)) cells (769 / 3 -> 257 -> 512
# with pad 256; the floor 256 would stay 256); unified = one stream of pad(n_ctx) cells.
@pytest.mark.parametrize("n_ctx,n_seq,unified,type_k,type_v,fa", [
    (769, 3, False, "fp16", "fp16", True),
    (1000, 3, False, "q8_0", "fp16", False),
    (1000, 3, True, "q4_0", "q4_0", True),
])
def test_llama_sequences(models, n_ctx, n_seq, unified, type_k, type_v, fa):
    text = load_low_level(models["llama"], n_ctx, n_seq, unified, type_k, type_v, fa, False)
    check("llama", text, n_ctx, n_seq, unified, type_k, type_v, fa, False)


# Gemma 2 (layers 0, 2 sliding, window 100; 1, 3 global): SWA cache min(base, pad(100 x (unified ? n_seq
# : 1) + n_ubatch)) cells: 1 sequence, pad 256 -> 768; 2 unified, pad 32 -> pad32(712) = 736.
@pytest.mark.parametrize("n_ctx,n_seq,unified,type_k,type_v,fa,swa_full", [
    (2048, 1, False, "fp16", "fp16", True, False),
    (600, 1, False, "q8_0", "q8_0", True, False),
    (2048, 2, True, "q8_0", "fp16", False, False),
    (2048, 2, False, "q4_0", "q4_0", True, False),
    (1100, 1, False, "fp16", "fp16", False, True),
])
def test_gemma2_iswa(models, n_ctx, n_seq, unified, type_k, type_v, fa, swa_full):
    text = load_low_level(models["gemma2"], n_ctx, n_seq, unified, type_k, type_v, fa, swa_full)
    check("gemma2", text, n_ctx, n_seq, unified, type_k, type_v, fa, swa_full)
