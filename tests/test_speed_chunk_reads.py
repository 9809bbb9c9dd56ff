"""A prefill in micro-batches reads the cached KV once a micro-batch (issue 21, round 43), by hand.

llama.cpp runs a batch as one graph a micro-batch (`llama_context::decode`'s loop over `mctx->get_ubatch()`,
ggml-org/llama.cpp@4c7103b96d720ea6057eec6ac11a49727f9ecd43 src/llama-context.cpp), and each graph's attention takes
the cache as a view of its first n_kv cells (`llama_kv_cache::get_k` / `get_v` / `get_n_kv`,
ggml-org/llama.cpp@3514e9f6e795d3b3cd88d6614f6c07e7ce6f916f src/llama-kv-cache.cpp), so every micro-batch reads all
the cells before it. Llama-3.1-8B in f16 caches 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B a token.
"""

from __future__ import annotations

import pytest

from kvplan.speed.model import prefill_features
from kvplan.speed.terms import TERMS, Shape

KV = TERMS.index("kv")
BPT = 131_072  # Llama-3.1-8B's f16 KV bytes a token
BW = 1e12  # bytes/s, a round bandwidth


def test_every_micro_batch_reads_the_cells_before_it():
    # pp512 after 32,768 cached tokens at -ub 2: 256 micro-batches; the j-th reads the 32,768 + 2j cells before it
    # and, as a one-step prefill always was, half its own (1): 256 x 32,768 + 2 x (0 + ... + 255) + 256 x 1
    # = 8,388,608 + 65,280 + 256 = 8,454,144 token reads, x 131,072 B = 1,108,101,562,368 B, 1.108 s at 1 TB/s
    s = Shape(dense_bytes=0, kv_bytes_per_token=BPT, bandwidth=BW)
    f = prefill_features(s, 512, depth=32_768, chunk=2, request=0.0)
    assert f[KV] == pytest.approx(8_454_144 * BPT / BW)
    assert 8_454_144 * BPT == 1_108_101_562_368


def test_one_micro_batch_reads_the_cache_once_as_before():
    # -ub 512: one micro-batch, 32,768 + 512 / 2 = 33,024 token reads (the read priced before this round)
    s = Shape(dense_bytes=0, kv_bytes_per_token=BPT, bandwidth=BW)
    assert prefill_features(s, 512, depth=32_768, chunk=512, request=0.0)[KV] == pytest.approx(33_024 * BPT / BW)


def test_a_window_caps_each_micro_batchs_read():
    # Gemma 4 26B-A4B: sliding layers of 1,024 tokens at 204,800 B a token (kvplan.speed.shape's kv_windows).
    # pp256 at -ub 2 after 32,768 tokens: 128 micro-batches, each reads the window whole: 128 x 1,024 = 131,072 reads;
    # after none: the j-th reads 2j + 1 (0 + 2 + ... + 254 = 16,256, + 128) = 16,384 = 128^2, under 131,072
    s = Shape(dense_bytes=0, kv_windows=((204_800, 1_024),), bandwidth=BW)
    deep = prefill_features(s, 256, depth=32_768, chunk=2, request=0.0)
    assert deep[KV] == pytest.approx(131_072 * 204_800 / BW)
    assert prefill_features(s, 256, depth=0, chunk=2, request=0.0)[KV] == pytest.approx(16_384 * 204_800 / BW)
