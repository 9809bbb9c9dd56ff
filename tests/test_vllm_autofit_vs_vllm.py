"""Optional: kvplan's `--max-model-len auto` against vLLM's own functions, where vLLM's Python code imports.

vLLM is not a kvplan dependency, so this module is skipped without it. To run it, put a vLLM release's
Python sources and their imports on the path (a wheel unpacked is enough: no GPU is needed), e.g.
    pip download --no-deps vllm==0.19.0 -d /tmp/w && unzip -q /tmp/w/vllm-0.19.0-*.whl 'vllm/*' -d /tmp/v19
    PYTHONPATH=/tmp/v19:DEPS .venv/bin/python -m pytest -q tests/test_vllm_autofit_vs_vllm.py
(DEPS: pydantic, transformers<5, msgspec and the other modules its imports name). It builds vLLM's
KVCacheSpec objects layer by layer from each model's geometry, lets vLLM group them
(`get_kv_cache_groups`, `_project_kv_cache_groups_to_worker`) and run `_auto_fit_max_model_len` on the
same budgets, and compares the length vLLM sets with kvplan.engines.vllm.autofit's. Checked by hand with
the 0.16.0, 0.17.0 and 0.19.0 wheels (all agree, pipeline stages included).
"""

from __future__ import annotations

import types

import pytest

kcu = pytest.importorskip("vllm.v1.core.kv_cache_utils", reason="vLLM's Python sources are not importable")
iface = pytest.importorskip("vllm.v1.kv_cache_interface")
torch = pytest.importorskip("torch")

from kvplan.sources.catalog import find_in_catalog  # noqa: E402
from kvplan.planning.deploy import Deployment, split_layers  # noqa: E402
from kvplan.core.dtypes import KV_DTYPES  # noqa: E402
from kvplan.engines.vllm import engine as vllm  # noqa: E402
from kvplan.engines.vllm.autofit import auto_fit  # noqa: E402
from kvplan.engines.vllm.pool import cache_specs, unified_page  # noqa: E402
from kvplan.hardware.gpus import find_gpu  # noqa: E402
from kvplan.model.layers import Kind  # noqa: E402
from kvplan.planning.plan import Request  # noqa: E402

GIB = 2**30
BF16 = KV_DTYPES["bf16"]


def _version() -> str:
    from vllm._version import __version__

    return ".".join(__version__.split(".")[:3]).split("+")[0]


def _config(max_len: int, mnbt: int):
    ns = types.SimpleNamespace
    return ns(model_config=ns(max_model_len=max_len, original_max_model_len=-1),
              scheduler_config=ns(max_num_batched_tokens=mnbt, disable_hybrid_kv_cache_manager=False),
              parallel_config=ns(decode_context_parallel_size=1, prefill_context_parallel_size=1),
              cache_config=ns(mamba_cache_mode="none", num_gpu_blocks_override=None))


def _vllm_specs(m, st):
    """vLLM spec objects for each cached layer part: (name, spec), from kvplan's keys (kind, span, bytes);
    a token's K and V are one head of size bytes / 4 in bf16; the attention block is vLLM's hybrid one."""
    keys = cache_specs(m.layers, 1, BF16, BF16, st)
    block, page = unified_page(dict.fromkeys(k for k, _ in keys), st.block_size)
    out = []
    for n, (key, i) in enumerate(keys):
        kind, span, nbytes = key
        common = dict(block_size=block, num_kv_heads=1, head_size=nbytes // 4, dtype=torch.bfloat16)
        if kind == Kind.STATE:
            spec = iface.MambaSpec(block_size=block, shapes=((nbytes // 2,),), dtypes=(torch.bfloat16,),
                                   page_size_padded=page)
        elif kind == Kind.SLIDING:
            spec = iface.SlidingWindowSpec(sliding_window=span, **common)
        else:
            spec = iface.FullAttentionSpec(**common)
        out.append((f"layers.{i}.{n}", i, spec))
    return out


@pytest.mark.parametrize("name,pp,budgets", [
    ("gpt-oss-120b", 1, [4 * GIB]), ("gpt-oss-120b", 2, [3 * GIB, 2 * GIB]),
    ("gemma-3-27b-it", 2, [8 * GIB, 6 * GIB]), ("gemma-2-9b", 1, [GIB // 4]),
    ("qwen3-next-80b-a3b-thinking", 1, [2 * GIB]), ("llama-4-scout-17b-16e-instruct", 2, [36 * GIB, 29 * GIB]),
    ("qwen3-8b", 1, [3 * GIB]), ("ai21-jamba-1.5-mini", 2, [GIB, GIB // 2]),
])
def test_same_length_as_vllm(name, pp, budgets):
    version = _version()
    m, dep = find_in_catalog(name), Deployment(1, pp)
    st = vllm.settings(m, find_gpu("h100-sxm"), dep, Request(context=4096), version, {}, {})
    ours = auto_fit(m, dep, budgets, st, BF16, BF16)
    if isinstance(ours, str):
        pytest.skip(f"kvplan refuses {name} on {version}: {ours}")
    specs = _vllm_specs(m, st)
    cfg = _config(m.max_context, st.in_flight_tokens)
    groups = kcu.get_kv_cache_groups(cfg, {n: s for n, _, s in specs})
    workers = [{n: s for n, i, s in specs if a <= i < b} for a, b in split_layers(m.num_layers, pp)]
    if hasattr(kcu, "_project_kv_cache_groups_to_worker"):  # 0.17.0 on
        kcu._auto_fit_max_model_len(cfg, [kcu._project_kv_cache_groups_to_worker(groups, w) for w in workers],
                                    budgets)
    else:
        kcu._auto_fit_max_model_len(cfg, groups, budgets)
    assert cfg.model_config.max_model_len == ours.tokens
