"""A sliding-window layer's attention FLOPs stop at its window (kvplan.speed.shape.attention_flops, the `attn` term).

FlashAttention runs a local layer with `window_size` = (window - 1, 0) (vllm-project/vllm@0084b783:vllm/v1/attention/
backends/flash_attn.py, FlashAttentionImpl), so a query forms at most `window` query-key pairs there, whatever the
context; kvplan capped such a layer's KV reads at its window already and now caps its FLOPs the same way.

gpt-oss-20b's config (openai/gpt-oss-20b config.json): 24 layers alternating sliding_attention (sliding_window 128) and
full_attention, 64 query heads of head_dim 64.
"""

import pytest

from kvplan.model.layers import ChunkedLocal, FullAttention, SlidingWindow
from kvplan.speed.shape import attention_flops
from kvplan.speed.terms import TERMS, Shape, features

ATTN = TERMS.index("attn")
GPT_OSS = [SlidingWindow(8, 64, 128), FullAttention(8, 64)] * 12


def test_gpt_oss_20b_window_layers_capped_at_128_keys():
    # 4 x 64 heads x 64 = 16,384 FLOPs a pair a layer; 24 layers = 393,216 a pair, of which the 12 window layers'
    # 196,608 run for at most 128 keys a query
    decode, prefill, capped, decompress = attention_flops(GPT_OSS, 64, 1)
    assert decode == prefill == 393_216 and capped == ((196_608, 128),) and decompress == 0


def test_a_32k_prompt_pays_window_layers_for_128_keys_a_query():
    # one 32,768-token prompt: causal pairs 32,768 x 32,769 / 2 = 536,887,296 a layer;
    # full layers 196,608 x 536,887,296 = 1.05555e14 FLOPs; window layers 196,608 x 32,768 x 128 = 8.24634e11
    # (the exact causal count is 128 x 32,768 - 128 x 127 / 2, 0.02% less: the cap is the aggregate form)
    decode, prefill, capped, _ = attention_flops(GPT_OSS, 64, 1)
    s = Shape(dense_bytes=0, attn_flops_per_pair=decode, attn_prefill_flops_per_pair=prefill, attn_topk=capped,
              bf16_rate=1e15,
              bandwidth=1e12)
    pairs = 32_768 * 32_769 / 2
    attn = features(s, 32_768, 1, 0, pairs, prefill_pairs=pairs)[ATTN]
    assert attn == pytest.approx((196_608 * 536_887_296 + 196_608 * 32_768 * 128) / 1e15)


def test_llama4_chunked_layers_capped_at_their_chunk():
    # Llama 4 Scout: chunked local attention over 8,192 tokens on 3 of every 4 layers; 40 heads x 128:
    # 4 x 40 x 128 = 20,480 FLOPs a pair a layer; 36 chunked layers = 737,280, capped at 8,192 keys a query
    layers = ([ChunkedLocal(8, 128, 8192)] * 3 + [FullAttention(8, 128)]) * 12
    _, _, capped, _ = attention_flops(layers, 40, 1)
    assert capped == ((737_280, 8192),)
