"""SGLang from 0.4.6 prefills an MLA model in the form its attention backend dispatches (kvplan.speed.mlaform).

Read from the wheels as published on PyPI (sglang 0.4.6, 0.4.7, 0.5.3, 0.5.6.post1, 0.5.7, 0.5.12): with the radix
cache on, each prompt reuses a cached one-token prefix (BOS) from the second request on; triton then runs the extend
absorbed (0.5.6.post1 `srt/models/deepseek_v2.py` handle_attention_triton L435-447: MHA only where
sum(extend_prefix_lens) == 0), as flashinfer does through 0.4.7 (0.4.6 L573-584, 0.4.7 L752-763); fa3 (0.4.6
L585-601) and flashinfer by 0.5.3 (_handle_attention_backend, 0.5.6.post1 L347-373) decompress again once the batch's
cached prefixes reach 8,192 tokens, where a long prompt's pairs are (priced decompressed); trtllm_mla decompresses
(MHA_CHUNKED_KV, L401-408), aiter at 0.5.7 too (L421-425). Defaults for an MLA model: fa3 on Hopper from 0.4.6 (0.4.6
`srt/model_executor/model_runner.py` L258-263, triton elsewhere), flashinfer on compute capability 10 and aiter on
ROCm at 16 or 128 heads a rank from 0.4.7 (0.4.7 model_runner L336-352), trtllm_mla on compute capability 10 from
0.5.4 for DeepseekV3ForCausalLM only (0.5.4 `srt/server_args.py` L879-888, `model_arch in ["DeepseekV3ForCausalLM"]`;
0.5.6.post1 L1040-1049), so DeepSeek-V2-Lite (DeepseekV2ForCausalLM) keeps flashinfer on a B200.

DeepSeek-R1's config (deepseek-ai/DeepSeek-R1 config.json, ../shared/configs): 61 layers, 128 heads, kv_lora_rank 512,
qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128. Per pair a layer a rank of h heads: absorbed 4 x h x
(512 + 64); decompressed 2 x h x (128 + 64) + 2 x h x 128 = 640 x h, and kv_b_proj 2 x 512 x h x 256 a cached token.
"""

from types import SimpleNamespace

from kvplan.hardware.gpus import find_gpu
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import attention_backend
from kvplan.speed.mlaform import default_backend
from kvplan.speed.shape import shape_for

H200, B200, MI300X = find_gpu("h200-sxm"), find_gpu("b200"), find_gpu("mi300x")
R1 = find_in_catalog("deepseek-r1")
# tp 8, 16 heads a rank: absorbed 4 x 16 x 576 x 61 = 2,248,704; decompressed 640 x 16 x 61 = 624,640 and
# 2 x 512 x 16 x 256 x 61 = 255,852,544 a cached token
ABSORBED, DECOMPRESSED = (2_248_704, 0), (624_640, 255_852_544)


def _form(gpu, version, tp=8, backend=None, cache=True):
    s = shape_for(R1, gpu, tp=tp, engine="sglang", version=version, prefix_cache=cache, attention_backend=backend)
    return s.attn_prefill_flops_per_pair, s.decompress_flops


def test_fa3_on_hopper_is_priced_decompressed_at_every_release():
    # gpustack's 0.5.3 and the cookbook's 0.5.6.post2 H200 runs: fa3 by default, MHA_CHUNKED_KV past 8,192 cached
    # tokens (a 32,000-token prompt's chunks after its first 8,192: (32,000^2 - 8,192^2) / 32,000^2 = 93% of its pairs)
    for version in ("0.4.6", "0.5.3", "0.5.6.post2", "0.5.12", None):
        assert default_backend("sglang", version, H200, 16) == "fa3"
        assert _form(H200, version) == DECOMPRESSED, version
    assert _form(H200, "0.5.3", backend="triton") == ABSORBED  # triton absorbs at any cached prefix
    assert _form(H200, "0.5.3", backend="triton", cache=False) == DECOMPRESSED  # --disable-radix-cache: MHA


def test_blackwell_by_release_flashinfer_absorbed_then_decompressed_and_trtllm_mla():
    assert default_backend("sglang", "0.4.6", B200, 16) == "triton"  # 0.4.6 names only Hopper
    assert _form(B200, "0.4.6") == ABSORBED
    assert default_backend("sglang", "0.4.7", B200, 16) == "flashinfer"
    assert _form(B200, "0.4.7") == ABSORBED  # 0.4.7's flashinfer: MHA only at no cached prefix
    assert default_backend("sglang", "0.5.3", B200, 16) == "flashinfer"
    assert _form(B200, "0.5.3") == DECOMPRESSED  # 0.5.3's: the fa3 threshold rule
    v3 = "DeepseekV3ForCausalLM"
    assert default_backend("sglang", "0.5.3", B200, 16, v3) == "flashinfer"  # 0.5.3 has no trtllm_mla default
    assert default_backend("sglang", "0.5.4", B200, 16, v3) == "trtllm_mla"  # 0.5.4 server_args L879-888
    assert default_backend("sglang", "0.5.6.post1", B200, 16, v3) == "trtllm_mla"
    assert default_backend("sglang", None, B200, 16, v3) == "trtllm_mla"
    assert default_backend("sglang", "0.5.6.post1", H200, 16, v3) == "fa3"  # capability 9: the table's fa3
    assert _form(B200, "0.5.6.post1") == DECOMPRESSED


def test_only_the_deepseek_family_defaults_to_trtllm_mla_on_blackwell():
    # DeepSeek-V2-Lite (DeepseekV2ForCausalLM) is not in 0.5.4-0.5.23's lists: flashinfer, which from 0.5.3 absorbs
    # only below 8,192 cached tokens (its long prompts' chunks decompressed, as 0.5.3's B200 runs above)
    for version in ("0.5.4", "0.5.6.post1", "0.5.12", None):
        assert default_backend("sglang", version, B200, 16, "DeepseekV2ForCausalLM") == "flashinfer", version
    # Kimi K2.5 from 0.5.9 (0.5.9 server_args L1197-1203), not at 0.5.8
    assert default_backend("sglang", "0.5.8", B200, 16, "KimiK25ForConditionalGeneration") == "flashinfer"
    assert default_backend("sglang", "0.5.9", B200, 16, "KimiK25ForConditionalGeneration") == "trtllm_mla"


def test_the_page_and_the_prefill_form_read_one_table(monkeypatch):
    # kvplan.engines.sglang.attention's page and this module's backend follow SM100_MLA alone: an architecture added
    # to it moves both (DeepSeek-V2-Lite on a B200 at 0.5.12: flashinfer, page 1 -> trtllm_mla, page 64)
    from kvplan.engines import resolve_engine
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request
    from kvplan.speed import mlaform
    lite = find_in_catalog("deepseek-v2-lite")

    def page():
        engine = resolve_engine("sglang", "0.5.12", [])
        return engine.settings(lite, B200, Deployment(1), Request(context=4096)).page_size
    assert (default_backend("sglang", "0.5.12", B200, 16, lite.architecture), page()) == ("flashinfer", 1)
    gpu, backend, rules = mlaform.SM100_MLA["sglang"]
    monkeypatch.setitem(mlaform.SM100_MLA, "sglang", (gpu, backend, rules + (((0, 5, 12), (lite.architecture,)),)))
    assert (default_backend("sglang", "0.5.12", B200, 16, lite.architecture), page()) == ("trtllm_mla", 64)
    assert _form(B200, "0.5.12", backend="triton") == ABSORBED  # a backend the run names wins


def test_rocm_aiter_decompresses_and_triton_at_other_head_counts_absorbs():
    assert default_backend("sglang", "0.5.7", MI300X, 16) == "aiter"
    assert _form(MI300X, "0.5.7") == DECOMPRESSED
    assert _form(MI300X, "0.4.6") == ABSORBED  # 0.4.6 has no aiter MLA default: triton
    # tp 2: 64 heads a rank, not one aiter takes: triton, absorbed 4 x 64 x 576 x 61 = 8,994,816
    assert default_backend("sglang", "0.5.7", MI300X, 64) == "triton"
    assert _form(MI300X, "0.5.7", tp=2)[0] == 8_994_816


def test_the_corpus_reads_the_backend_a_run_names():
    named = SimpleNamespace(engine="sglang", flags={"attention_backend": "trtllm_mla"})
    assert attention_backend(named) == "trtllm_mla"
    assert attention_backend(SimpleNamespace(engine="sglang", flags={})) is None
    assert attention_backend(SimpleNamespace(engine="vllm", flags={"attention_backend": "x"})) is None

