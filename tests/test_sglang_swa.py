"""SGLang's hybrid SWA pool turned off by SGLang itself (kvplan/engines/sglang/swa.py): Gemma 2/3/3n in every 0.5
release kvplan plans (0.5.3 sdist srt/server_args.py L792-804, "Disable hybrid SWA memory for {arch} as it is not
yet supported"; 0.5.23 wheel srt/arg_groups/model_overrides/gemma2_gemma3.py), gpt-oss in 0.5.3 only (server_args.py
L781). Hand arithmetic from the published configs, not from kvplan's layer specs.
"""

from __future__ import annotations

import pytest

from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import engine_figures


def _cap(name: str, version: str):
    res = resolve_engine("sglang", version).result(find_in_catalog(name), find_gpu("h100"), Deployment(1, 1),
                                                   Request(context=8192))
    return res.capacity, engine_figures(res)


@pytest.mark.parametrize("version", ["0.5.3", "0.5.23"])
def test_gemma3_priced_as_full_attention_in_every_layer(version):
    # google/gemma-3-27b-it text_config: 62 layers, 16 KV heads x head_dim 128, bf16: K + V = 2 x 16 x 128 x 2 B
    # = 8,192 B a layer, x 62 = 507,904 B a token in the one full pool (the SWA split was 10 x 8,192 = 81,920 full
    # + 52 x 8,192 = 425,984 SWA x 0.8); no SWA pool row, and a note says why
    cap, fig = _cap("gemma-3-27b-it", version)
    assert fig["cell per token"] == 507_904
    assert "SWA pool tokens" not in fig
    assert cap.tokens == int(fig["KV budget per GPU (rest)"] // 507_904)
    assert any("disable_hybrid_swa_memory" in n for n in cap.notes)


def test_gpt_oss_full_pool_in_053_hybrid_in_0523():
    # openai/gpt-oss-20b: 24 layers alternating sliding (128) and full, 8 KV heads x head_dim 64, bf16:
    # 2 x 8 x 64 x 2 = 2,048 B a layer; 0.5.3 (disable_hybrid_swa_memory): 24 x 2,048 = 49,152 B in one pool;
    # 0.5.23: 12 x 2,048 = 24,576 B full + 24,576 B SWA x 0.8
    _, old = _cap("gpt-oss-20b", "0.5.3")
    _, new = _cap("gpt-oss-20b", "0.5.23")
    assert old["cell per token"] == 49_152
    assert new["cell per token"] == (24_576, 24_576, 0.8)
