"""SGLang before 0.4.6 runs a DeepSeek MLA extend absorbed once a prompt of the batch reuses a cached prefix
(kvplan.speed.mlaform.ABSORBS_WITH_PREFIX).

Read from the wheels as published on PyPI: sglang 0.4.2.post4 `srt/models/deepseek_v2.py` L503-516 and 0.4.3.post2
L511-531 (`forward`: forward_normal only where `forward_batch.extend_prefix_lens.sum() == 0`, forward_absorb
otherwise), 0.4.4 L553-568 and 0.4.5 L695-715 (`no_absorb`, the same test on the Triton and FlashInfer paths). The radix
cache is on by default (0.4.3.post2 `srt/server_args.py` L139 `disable_radix_cache: bool = False`) and matches any
number of leading tokens (`srt/mem_cache/radix_cache.py` match_prefix L100-121), so a served DeepSeek run's prompts,
each starting with the tokenizer's BOS token, reuse a prefix from the second request on.

DeepSeek-R1's config (deepseek-ai/DeepSeek-R1 config.json, ../shared/configs): 61 layers, 128 heads, kv_lora_rank 512,
qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128.
"""

from types import SimpleNamespace

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import prefix_cache
from kvplan.speed.model import absorbed_prefill
from kvplan.speed.shape import shape_for

H200 = find_gpu("h200-sxm")
R1 = find_in_catalog("deepseek-r1")


def test_sglang_0_4_prefills_deepseek_absorbed_with_its_radix_cache_on():
    # absorbed, at tp 8 (16 heads a rank): 4 x 16 x (512 + 64) = 36,864 FLOPs a pair a layer, x 61 = 2,248,704, and
    # no cached token decompressed; under DP attention (dp 8, tp 1 a replica: 128 heads) 4 x 128 x 576 x 61 = 17,989,632
    s = shape_for(R1, H200, tp=8, engine="sglang", version="0.4.3.post2")
    assert (s.attn_prefill_flops_per_pair, s.decompress_flops) == (2_248_704, 0)
    dp = shape_for(R1, H200, tp=1, dp=8, engine="sglang", version="0.4.3.post2")
    assert dp.attn_prefill_flops_per_pair == dp.attn_flops_per_pair == 17_989_632


def test_decompressed_without_the_cache_and_where_a_later_release_s_backend_decompresses():
    # decompressed MHA at tp 8: (2 x 16 x (128 + 64) + 2 x 16 x 128) x 61 = 10,240 x 61 = 624,640 a pair;
    # kv_b_proj a cached token: 2 x 512 x 16 x (128 + 128) x 61 = 255,852,544. From 0.4.6 the backend decides
    # (tests/test_speed_sglang_mla_backend.py): fa3, SGLang's default on H200 from 0.4.6, is priced decompressed,
    # trtllm_mla, its default on B200 from 0.5.6, decompresses
    b200 = find_gpu("b200")
    for version, cache, gpu in (("0.4.3.post2", False, H200), ("0.4.6", True, H200), ("0.5.9", True, H200),
                                (None, True, H200), ("0.5.6.post1", True, b200), (None, True, b200)):
        s = shape_for(R1, gpu, tp=8, engine="sglang", version=version, prefix_cache=cache)
        assert (s.attn_prefill_flops_per_pair, s.decompress_flops) == (624_640, 255_852_544), version
    assert absorbed_prefill("sglang", "0.4.5", True) and not absorbed_prefill("sglang", "0.4.5", False)
    assert not absorbed_prefill("vllm", "0.7.3", True)  # vLLM's V0 MLA prefill decompresses (_forward_prefill_flash)
    assert absorbed_prefill("llama.cpp")  # every batch, whatever the release


def test_a_run_that_turns_the_radix_cache_off_keeps_the_decompressed_prefill():
    # the corpus's flags read as the engine's (dashes as underscores): SGLang's --disable-radix-cache
    assert not prefix_cache(SimpleNamespace(engine="sglang", flags={"disable_radix_cache": True}))
    assert prefix_cache(SimpleNamespace(engine="sglang", flags={"enable_dp_attention": True}))
    assert prefix_cache(SimpleNamespace(engine="vllm", flags={"disable_radix_cache": True}))  # not a vLLM flag
