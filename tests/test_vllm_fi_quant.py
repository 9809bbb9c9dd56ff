"""vLLM's FlashInfer fusion workspace is one per rank for an FP8 checkpoint too (kvplan/engines/vllm/non_torch.py)."""

from __future__ import annotations

from kvplan.engines.vllm import non_torch as nt
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.sources.catalog import find_in_catalog

MIB = 2**20
H100 = find_gpu("h100-sxm")


def test_an_fp8_checkpoint_books_the_one_workspace_once():
    # The quant patterns (AllReduceFusedRMSNormStaticQuantFP8Pattern, ...) take `_fi_ar_quant_workspace`, which is the
    # primary trtllm workspace itself through 0.24.x (flashinfer_all_reduce.py 0.17.0 L108-111, 0.19.0 L188-190,
    # 0.24.0 L191-193): Llama 3.1 405B FP8 (H 16384, activations bf16) on H100 tp 8, SM90 limit 0.5 MiB:
    # T = 0.5 MiB / (16384 x 2) = 16; data 8 x 16 x 16384 x 2 = 4 MiB -> 512; Lamport 3 x 4 MiB -> 512; flags -> 512:
    # 1536 MiB, the same as the bf16 checkpoint's, not twice it.
    fp8, bf16 = find_in_catalog("llama-3.1-405b-instruct-fp8"), find_in_catalog("llama-3.1-405b")
    assert fp8.quantization.method == "fp8" and fp8.hidden_size == bf16.hidden_size == 16384
    for version in ((0, 17, 0), (0, 19, 0), (0, 24, 0)):
        got = nt.non_torch(8, 1, version, gpu=H100, model=fp8, max_tokens=8192)
        assert got == nt.non_torch(8, 1, version, gpu=H100, model=bf16, max_tokens=8192)
        assert got - nt.non_torch(8, 1, version, gpu=H100) == 1536 * MIB  # no model: no workspace
