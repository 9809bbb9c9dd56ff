"""vLLM 0.21+ loads its weights under PyTorch's max_split_size_mb:20 (kvplan.engines.vllm.load_split): tensors of
20 MiB or more keep their whole 2 MiB-rounded segment, which "Model loading took" counts.

Sources: vllm `v1/worker/gpu_worker.py` `load_model` wrapped in `_scoped_allocator_max_split(max_split_size_mb=20)`
(0.21.0 L338-345; 0.30.0 L500-506; absent from the 0.20.0-0.20.2 wheels; vllm-project/vllm#41268, 2026-04-29);
`current_platform.is_cuda()` through 0.30.0, `is_cuda_alike()` from 0.31.0. PyTorch: c10/cuda/CUDACachingAllocator.cpp
@001074d2 `should_split` (large pool: `size < max_split_size() && remaining > kSmallSize`), `get_free_block` (no
cached block of the limit or more for a request under it; none `kLargeBuffer` or more past a request of it or more),
`get_allocation_size`; c10/core/AllocatorConfig.h @007b9bc0 (max_split_size_ unlimited, max_non_split_rounding_size_
kLargeBuffer by default). The log: tests/fixtures/logs/corpus/vllm-llmlab-qwen25-15b-t4-v030.log (eslam-ahmed43/
llm-lab@0f01b470 logs/vllm_server.log, training split), "Model loading took 2.98 GiB".
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kvplan.core.caching_allocator import allocated_bytes, allocated_rounding, reserved_bytes
from kvplan.engines import resolve_engine
from kvplan.engines.logparse import parse_log
from kvplan.engines.reconcile import reconcile
from kvplan.engines.vllm.load_split import SPLIT_LIMIT, split_limit
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.planning.tensors import rank_tensors
from kvplan.readers.rope import rope_table_bytes
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20
GIB = 2**30
LOG = Path(__file__).parent / "fixtures" / "logs" / "corpus" / "vllm-llmlab-qwen25-15b-t4-v030.log"


def test_a_tensor_of_the_limit_or_more_keeps_its_whole_segment():
    # 52.5 MiB gets a 54 MiB segment (2 MiB rounding): the default rule splits the 1.5 MiB off (> 1 MiB), the limit
    # does not (52.5 >= 20); a 6 MiB request under the limit still splits its 20 MiB segment
    gate_up, qkv = 55_050_240, 6 * MIB
    assert allocated_bytes((gate_up,)) == gate_up
    assert allocated_bytes((gate_up,), SPLIT_LIMIT) == 54 * MIB
    assert allocated_bytes((qkv,), SPLIT_LIMIT) == qkv
    # the segments taken are the same either way (no cached block holds the large request): reserved unchanged
    assert reserved_bytes((gate_up, qkv)) == (54 + 20) * MIB


def test_get_free_block_limits():
    # a request under the limit takes no cached block of 20 MiB or more; one of the limit or more none 20 MiB
    # (max_non_split_rounding_size's default, kLargeBuffer) or more past its size; no limit: best fit alone
    from kvplan.core.caching_allocator import _fits

    assert _fits(6 * MIB, 20 * MIB, None) and _fits(6 * MIB, 14 * MIB, SPLIT_LIMIT)
    assert not _fits(6 * MIB, 20 * MIB, SPLIT_LIMIT)
    assert _fits(26 * MIB, 45 * MIB, SPLIT_LIMIT) and not _fits(26 * MIB, 46 * MIB, SPLIT_LIMIT)
    assert allocated_rounding((24 * MIB + MIB // 2,), SPLIT_LIMIT) == 3 * MIB // 2  # 24.5 MiB keeps its 26 MiB
    assert allocated_rounding((24 * MIB + MIB // 2,)) == 0  # the default rule splits the 1.5 MiB off


def test_qwen25_1_5b_on_a_t4_at_0_30_matches_model_loading_took():
    """Qwen2.5-1.5B-Instruct fp16, tp 1 (hidden 1536, 12 heads, 2 KV heads x 128, MLP 8960, 28 layers, vocabulary
    151,936, tied): 1,543,714,304 parameters x 2 B = 3,087,428,608 B; RoPE table 32,768 x 128 x 2 B = 8,388,608 B;
    the embedding 445.125 MiB keeps its 446 MiB segment (0.875 MiB, under either rule); qkv 6 MiB and o 4.5 MiB share
    20 MiB segments, five blocks keeping a 0.5 MiB tail (2.5 MiB, either rule); under the limit gate_up 52.5 MiB keeps
    54 and down 26.25 MiB keeps 28: 3.25 MiB x 28 = 91 MiB. Total 3,087,428,608 + 8,388,608 + 917,504 + 2,621,440 +
    95,420,416 = 3,194,776,576 B = 2.97537 GiB, printed 2.98 (the log: "Model loading took 2.98 GiB", so 2.975 to
    2.985 GiB); without the limit 3,099,356,160 B = 2.8865 GiB, -3.1%."""
    model = find_in_catalog("qwen2.5-1.5b-instruct")
    tensors = rank_tensors(model, rope_bytes=rope_table_bytes(model))
    assert allocated_rounding(tensors, SPLIT_LIMIT) - allocated_rounding(tensors) == 91 * MIB
    t4 = find_gpu("t4")
    loaded = {v: resolve_engine("vllm", v).result(model, t4, Deployment(), Request(context=4096)).plan
              .weight_bytes_per_gpu for v in ("0.20.2", "0.21.0", "0.30.0")}
    assert loaded["0.21.0"] == loaded["0.30.0"] == 3_087_428_608 + 8_388_608 + 917_504 + 2_621_440 + 95_420_416
    assert loaded["0.20.2"] == loaded["0.30.0"] - 91 * MIB
    assert 2.975 * GIB <= loaded["0.30.0"] < 2.985 * GIB


def test_check_log_row_and_note():
    out = reconcile(parse_log(LOG.read_text()), find_in_catalog("qwen2.5-1.5b-instruct"), find_gpu("t4"))
    row = next(r for r in out.rows if r.quantity.startswith("weights per GPU"))
    assert (row.reported, row.predicted, row.ok) == ("2.98 GiB", "2.9754 GiB", True)
    note = next(n for n in out.notes if "max_split_size_mb:20" in n)
    assert "91.00 MiB" in note and "CUDA run assumed" not in note
    # no --gpu: the log's 14.56 GiB GPU, vendor unknown, priced as a CUDA run and said so
    bare = reconcile(parse_log(LOG.read_text()), find_in_catalog("qwen2.5-1.5b-instruct"), None)
    assert any("CUDA run assumed" in n for n in bare.notes)


def test_releases_and_vendors():
    nvidia, amd = find_gpu("h100-sxm"), find_gpu("mi300x")
    assert split_limit((0, 20, 2), nvidia) is None and split_limit((0, 21, 0), nvidia) == SPLIT_LIMIT
    assert split_limit((0, 30, 0), amd) is None and split_limit((0, 31, 0), amd) == SPLIT_LIMIT  # is_cuda_alike
    assert split_limit((0, 33, 0), SimpleNamespace(vendor="Intel")) is None
    assert split_limit((0, 21, 0), None) == SPLIT_LIMIT  # no profile: the CUDA rule


def test_llama_3_1_8b_is_unchanged_and_the_plan_says_nothing():
    # every Llama-3.1-8B tensor is a whole number of 2 MiB (qkv 48, o 32, gate_up 224, down 112, embedding and head
    # 1,002 MiB), so the limit adds nothing and no warning is printed
    model = find_in_catalog("llama-3.1-8b-instruct")
    h100 = find_gpu("h100-sxm")
    old, new = (resolve_engine("vllm", v).result(model, h100, Deployment(), Request(context=8192)) for v in
                ("0.20.2", "0.33.0"))
    assert old.plan.weight_bytes_per_gpu == new.plan.weight_bytes_per_gpu
    assert not any("max_split_size_mb" in w.message for w in new.plan.warnings)
