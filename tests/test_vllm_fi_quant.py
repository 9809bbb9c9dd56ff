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


class _St:
    def __init__(self, version, gpu=H100):
        self.version, self.v, self.gpu = ".".join(map(str, version)), version, gpu
        self.max_num_batched_tokens, self.eager = 8192, False


def test_the_mnnvl_workspace_is_said_where_vllm_builds_it():
    # `auto` resolves to MNNVL on one node from 0.25.0 (flashinfer_all_reduce.py 0.25.0 L116; 0.24.0 L110: trtllm),
    # over nodes from 0.19.0 (L98-101); 0.25.x adds trtllm's for the quant slot (L206-214), 0.26.0 shares one (L211-215)
    m = find_in_catalog("llama-3.1-8b-instruct")
    one = Deployment(tp=2)
    assert nt.mnnvl_note(m, one, _St((0, 24, 0))) is None
    assert "for the quant fusions, trtllm's" in nt.mnnvl_note(m, one, _St((0, 25, 0)))
    assert "instead of trtllm's" in nt.mnnvl_note(m, one, _St((0, 26, 0)))
    assert nt.mnnvl_note(m, one, _St((0, 26, 0), find_gpu("h100-pcie"))) is None  # no workspace booked, none said
    rack = find_gpu("gb200")
    assert nt.mnnvl_note(m, Deployment(tp=8, node_gpus=4), _St((0, 19, 0), rack)) is not None
    assert nt.mnnvl_note(m, Deployment(tp=8, node_gpus=4), _St((0, 18, 0), rack)) is None


def test_the_mnnvl_note_prints_the_bytes_booked():
    # B300 (capability 10.3) at tp 4, Llama 3.1 8B (H 4096, bf16), 0.26.0: FI_ALLREDUCE_FUSION_MAX_SIZE_MB 64 MiB
    # (allreduce_rms_fusion.py, 103 from 0.19.0) -> T = min(64 MiB / (4096 x 2), 8192) = 8192 tokens;
    # data 4 x 8192 x 4096 x 2 = 256 MiB (+2 KiB) -> 512; flags 4 x 256 x 4 B -> 512;
    # Lamport 3 x 256 = 768 MiB (+2 KiB) -> 1,024 at the 512 MiB granularity: 2,048 MiB, not 3 x 512
    m = find_in_catalog("llama-3.1-8b-instruct")
    note = nt.mnnvl_note(m, Deployment(tp=4), _St((0, 26, 0), find_gpu("b300")))
    assert "(2,048 MiB per GPU)" in note
    assert "(1,536 MiB per GPU)" in nt.mnnvl_note(m, Deployment(tp=2), _St((0, 26, 0)))  # H100 tp 2: 3 x 512
