"""Which top-k/top-p vLLM's profile-run sampler took, as the log says it (kvplan.engines.vllm.overhead.sort_sampler,
`--engine-opt flashinfer_sampler`): the Ray two-node record that was 8.6% high.

dennislee22/vLLM-benchmarking's Qwen2-7B at tp 2 over two nodes (vLLM 0.10.1.1, A100 40GB, gmu 0.5) logs "FlashInfer is
not available. Falling back to the PyTorch-native implementation of top-p & top-k sampling" on both Ray workers;
its same-node runs log "Using FlashInfer for top-p & top-k sampling". The PyTorch path sorts the whole fp32 logits
(v1/sample/ops/topk_topp_sampler.py): the corpus's fitted 38.14 B per logit against 14.12 B.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kvplan.engines import resolve_engine
from kvplan.engines.logparse import parse_log
from kvplan.engines.vllm import overhead as vo
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"
GIB = 2**30
QWEN2_7B = find_in_catalog("qwen2-7b-instruct")


def _record(rid: str) -> dict:
    return next(r for r in yaml.safe_load((CORPUS / "index.yaml").read_text()) if r["id"] == rid)


def test_the_sort_path_by_hand():
    # 256 sequences (vLLM's max_num_seqs on an A100) x 152,064 logits = 38,928,384 logits;
    # (38.14 - 14.12) B x 38,928,384 = 935,059,783.68 B = 0.871 GiB more on the sort path
    v = (0, 10, 1)
    sort = vo.activation_peak(QWEN2_7B, 2, 2048, 256, version=v, flashinfer_sampler=False)
    fused = vo.activation_peak(QWEN2_7B, 2, 2048, 256, version=v, flashinfer_sampler=True)
    assert QWEN2_7B.vocab_size == 152_064
    assert abs((sort - fused) - 935_059_784) <= 2
    assert fused == vo.activation_peak(QWEN2_7B, 2, 2048, 256, version=v)  # 0.10's default: FlashInfer's kernel
    # from 0.17 a batch of 8 or more rows takes the Triton path without FlashInfer: no sort, and its buffer of
    # min(next_pow2(min(SMs, 256)), SMs) fp32 vocabulary rows; an A100's 108 SMs: 108 x 152,064 x 4 B = 65,691,648 B,
    # which FlashInfer's sampler (VLLM_USE_FLASHINFER_SAMPLER=1: forward_cuda -> flashinfer_sample) does not allocate
    a100 = find_gpu("a100-sxm-40")
    triton = vo.activation_peak(QWEN2_7B, 2, 2048, 256, version=(0, 19, 0), gpu=a100, flashinfer_sampler=False)
    assert triton == vo.activation_peak(QWEN2_7B, 2, 2048, 256, version=(0, 19, 0), gpu=a100)
    flashinfer = vo.activation_peak(QWEN2_7B, 2, 2048, 256, version=(0, 19, 0), gpu=a100, flashinfer_sampler=True)
    assert abs(triton - flashinfer - 65_691_648) <= 1


def test_the_log_says_which_sampler_ran():
    diff = parse_log((CORPUS / "dennislee22-7b-2gpua10040gb-0-5gram-diff-nodes.log").read_text())
    same = parse_log((CORPUS / "dennislee22-7b-2gpua10080gb-0-5gram-same-node.log").read_text())
    assert diff.settings["flashinfer_sampler"] is False and same.settings["flashinfer_sampler"] is True
    # the same author's gpt-oss-120b over Ray on four nodes, within 0.1 % of kvplan: FlashInfer was there
    ray120 = parse_log((CORPUS / "dennislee22-120b-4gpua10080gb-0-8gram-diff-nodes.log").read_text())
    assert ray120.settings["flashinfer_sampler"] is True


def test_two_node_record_within_one_percent_with_the_sampler_it_ran():
    rec = _record("dennislee22-7b-2gpua10040gb-0-5gram-diff-nodes")
    printed = float(rec["figures"]["available_kv_gib"]) * GIB  # 11.03 GiB
    flags = rec["flags"]

    def kv(*opts):
        engine = resolve_engine("vllm", rec["version"], [f"max_num_batched_tokens={flags['max_num_batched_tokens']}",
                                                        *opts], gpu_memory_utilization=flags["gpu_memory_utilization"])
        res = engine.result(QWEN2_7B, find_gpu(rec["gpu"]), Deployment(2, 1), Request(context=flags["max_model_len"]))
        return res.plan.kv_memory_bytes_per_gpu

    assert rec["flashinfer_sampler"] is False
    assert 0.08 < (kv() - printed) / printed < 0.09  # the release's default: 8.6 % high (the dangerous side)
    assert abs(kv("flashinfer_sampler=false") - printed) / printed < 0.01  # 11.12 GiB: +0.9 %


def test_a_sampler_option_that_changes_nothing_is_said():
    # before 0.8 (V0) there is no sampler term: the option is said to change nothing; on 0.8-0.16 it picks
    # FlashInfer or the sort, from 0.17 FlashInfer or the Triton kernel and its buffer (kvplan.engines.vllm.sampler)
    gpu, dep, req = find_gpu("a100-sxm-80"), Deployment(1, 1), Request(context=4096)
    for version, moves in (("0.6.6", False), ("0.11.0", True), ("0.19.1", True)):
        res = {fi: resolve_engine("vllm", version, [f"flashinfer_sampler={fi}"]).result(QWEN2_7B, gpu, dep, req)
               for fi in ("true", "false")}
        same = res["true"].plan.kv_memory_bytes_per_gpu == res["false"].plan.kv_memory_bytes_per_gpu
        said = [n for n in res["false"].capacity.notes if "flashinfer_sampler=false changes nothing" in n]
        assert same != moves and bool(said) != moves, (version, said)
