"""SGLang's default attention backend for a model without MLA on Blackwell, and the page it forces
(kvplan.engines.sglang.attention).

Read in the PyPI wheels (sglang/srt/server_args.py): from 0.5.6 a model without MLA defaults to trtllm_mha on
Blackwell (0.5.6.post1 L1329-1358, `is_blackwell()`: capability 10 or 12; 0.5.7 L1535-1542 and later
`is_sm100_supported()`: 10 only), and trtllm_mha moves a page outside 16 / 32 / 64 to 64 (0.5.6.post1 L1436-1449);
0.5.5 picks flashinfer there (L1130-1160). Before 0.5.6 GptOssForCausalLM (0.5.3 L734-741) and Olmo2ForCausalLM (0.5.4
L983-995) have their own SM100 trtllm_mha. From 0.5.17 K/V rows of two widths take fa4 (L5696-5701), whose page is
128 on SM100 whatever is given (`arg_groups/overrides.py` `_fa4_page_constraint` L2200-2218).

SGLang's own reference start-up log (its clean-startup-log skill, Qwen3-8B, tp 1, default flags, on an SM100 part;
tests/fixtures/logs/corpus/index.yaml, sglang-skill-cleanlog-qwen3-8b-sm100-178g and -276g) says trtllm_mha moved the
page from None to 64, and its pools are whole pages: 992,896 = 64 x 15,514 and 1,707,904 = 64 x 26,686 tokens.
"""

from __future__ import annotations

import pytest

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H200, B200, RTX5090 = find_gpu("h200-sxm"), find_gpu("b200"), find_gpu("rtx-5090")
QWEN3, GPT_OSS = find_in_catalog("qwen3-8b"), find_in_catalog("gpt-oss-120b")
MIMO, QWEN35 = find_in_catalog("mimo-v2-flash"), find_in_catalog("qwen3.5-27b")
REQ = Request(context=32768)


def _page(model, gpu, version, opts=(), tp=1):
    st = resolve_engine("sglang", version, list(opts)).settings(model, gpu, Deployment(tp), REQ)
    return st.page_size, st.page_why


@pytest.mark.parametrize("gpu, version, page", [
    (B200, "0.5.5", 1),  # flashinfer: 0.5.5 has no trtllm_mha default for Qwen3
    (B200, "0.5.6.post1", 64),
    (B200, "0.5.10", 64),
    (B200, "0.5.23", 64),
    (H200, "0.5.10", 1),  # fa3 on Hopper
    (RTX5090, "0.5.7", 1),  # capability 12: flashinfer from 0.5.7 (is_sm100_supported)
])
def test_qwen3_page_follows_the_blackwell_default(gpu, version, page):
    got, why = _page(QWEN3, gpu, version)
    assert got == page
    assert ("trtllm_mha" in why) == (page == 64)


def test_a_page_trtllm_mha_keeps_or_moves():
    assert _page(QWEN3, B200, "0.5.10", ["page_size=32"])[0] == 32  # 16, 32, 64 kept
    assert _page(QWEN3, B200, "0.5.10", ["page_size=8"])[0] == 64  # moved to 64
    assert _page(QWEN3, B200, "0.5.16", ["page_size=128"])[0] == 64  # 0.5.16 L1739: 16, 32 or 64
    assert _page(QWEN3, B200, "0.5.17", ["page_size=128"])[0] == 128  # 0.5.17 L2092: 128 kept too
    assert _page(QWEN3, B200, "0.5.10", ["attention_backend=flashinfer"])[0] == 1  # a named backend wins


def test_0_5_6_on_capability_12_does_not_start():
    # is_blackwell() takes 12, then trtllm_mha raises off SM100 (0.5.6.post1 L1440-1443)
    with pytest.raises(KvplanError, match="does not start"):
        _page(QWEN3, RTX5090, "0.5.6.post1")
    assert _page(QWEN3, RTX5090, "0.5.6.post1", ["attention_backend=flashinfer"])[0] == 1


def test_architectures_with_their_own_rule_and_the_exceptions():
    assert _page(GPT_OSS, B200, "0.5.4")[0] == 64  # GptOssForCausalLM's own SM100 rule (0.5.3 on)
    assert _page(QWEN3, B200, "0.5.4")[0] == 1  # the general default comes in 0.5.6
    assert _page(MIMO, B200, "0.5.16", tp=8)[0] == 64  # 192 / 128 K/V: trtllm_mha before 0.5.17
    assert _page(MIMO, B200, "0.5.17", tp=8, opts=["page_size=64"])[0] == 128  # fa4: 128 whatever is given
    assert _page(QWEN35, B200, "0.5.10")[0] == 1  # a hybrid's own SM100 backend: not read, page 1 as before


def test_the_reference_logs_pool_is_whole_pages_with_or_without_the_flag():
    # The skill's B200 log (0.5.10, default flags) prints 992,896 tokens, 64 x 15,514. Qwen3-8B's cell: 36 layers x
    # 8 KV heads x 128 x 2 (K, V) x 2 B = 147,456 B a token. Under flashinfer (page 1) the pool is budget // 147,456;
    # the default (trtllm_mha) and --page-size 64 both round that down to whole 64-token pages.
    def cap(opts):
        return resolve_engine("sglang", "0.5.10", opts).result(QWEN3, B200, Deployment(1), REQ).capacity
    default, flagged, page1 = cap([]), cap(["page_size=64"]), cap(["attention_backend=flashinfer"])
    assert default.bytes_per_token == 147_456 and default.block_size == 64 and page1.block_size in (1, None)
    assert page1.tokens == page1.kv_memory_bytes // 147_456
    assert default.tokens == flagged.tokens == page1.tokens // 64 * 64
    assert page1.tokens - default.tokens < 64 and default.tokens % 64 == 0


def test_an_architecture_with_its_own_rule_starts_on_capability_12_at_0_5_6():
    # GptOssForCausalLM picks its backend in _handle_model_specific_adjustments (0.5.6.post1 L1086-1097: trtllm_mha
    # on SM100, fa3 on SM90, else triton), so the general default that raises on capability 12 never runs for it
    assert _page(GPT_OSS, RTX5090, "0.5.6.post1")[0] == 1
