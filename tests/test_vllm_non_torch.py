"""vLLM's non-torch memory by release: the two source-derived terms (kvplan/engines/vllm/non_torch.py)."""

from __future__ import annotations

import pathlib
import sys

import yaml

from kvplan.engines.vllm import non_torch as nt
from kvplan.hardware.gpus import GPU, find_gpu

MIB = 2**20
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import budget_corpus

    return budget_corpus


def test_single_gpu_boundary_is_the_graph_profiling_of_0_18():
    # 0.18.0 runs profile_cudagraph_memory inside memory_profiling (gpu_worker.py determine_available_memory);
    # 0.17.0 does not. Which fitted constant applies (their values are checked against logs below):
    # the 0.11 one up to 0.17, the 0.19 one from 0.18, --enforce-eager included (the corpus's one eager
    # 0.19 log balances with it; see vllm_non_torch's docstring).
    old, new = nt.NON_TORCH_SINGLE_V011, nt.NON_TORCH_SINGLE
    H100 = find_gpu("h100-sxm")
    assert old < new
    assert nt.non_torch(1, 1, (0, 17, 0), gpu=H100) == old
    assert nt.non_torch(1, 1, (0, 18, 0), gpu=H100) == new
    assert nt.non_torch(1, 1, (0, 19, 0), gpu=H100) == new
    assert nt.non_torch(1, 1, (0, 18, 0), eager=True, gpu=H100) == new
    assert nt.non_torch(1, 1, (0, 16, 0), eager=True, gpu=H100) == old


def test_each_side_of_the_boundary_on_training_logs():
    # One H100, tp 1, on each side of the 0.18 boundary (training split; llm-d's 0.15-0.18 sweep of Qwen3-14B is held
    # out, scored by benchmarks/budget_corpus.py, not here): llm-d-benchmark's vLLM 0.11.0 Llama-3.1-8B prints
    # non-torch 0.13 GiB, llm-d-planner's 0.19.0 Qwen2.5-7B-Instruct 0.24 GiB. The first check is which fitted
    # constant each side takes (the constants are fitted on these logs, so not evidence); the evidence is the
    # printed figure, within 5%.
    b = _bench()
    index = yaml.safe_load((ROOT / "tests/fixtures/logs/corpus/index.yaml").read_text())
    for rid, printed, side in (("llmdbench-llama-3-1-8b", 0.13, nt.NON_TORCH_SINGLE_V011),
                               ("llmd-qwen-qwen2-5-7b-instruct-h100-80gb-tp1pp1dp1-8192", 0.24, nt.NON_TORCH_SINGLE)):
        rec = next(r for r in index if r["id"] == rid)
        assert not b.is_held_out(rec)
        pred = b.predict(rec, b.parsed(rec))["non_torch"]
        assert pred == side and b.parsed(rec).reported["non_torch_gib"].value == printed
        assert abs(pred / 2**30 - printed) / printed <= 0.05, (rid, pred)


def test_flashinfer_allreduce_workspace_by_release_gpu_and_layout():
    # trtllm_create_ipc_workspace_for_all_reduce_fusion: 3 buffers per rank (data, flags, Lamport), each
    # rounded to 2 MiB, + a 2 KiB signal pad, then up to the 512 MiB multicast granularity (SymmDeviceMemory).
    # Llama 3.1 8B (H 4096, bf16) on H100 tp 2: T = min(64 MiB / (4096 x 2), 8192) = 8192; data 2 x 8192 x
    # 4096 x 2 = 128 MiB -> 512; Lamport 3 x 128 = 384 MiB -> 512; flags 2 x 256 x 4 B -> 512: 1536 MiB.
    # On by default from 0.17.0 (-O2 fuse_allreduce_rms) for tp 2/4/8, pp == dp == 1, not eager.
    from kvplan.sources.catalog import find_in_catalog

    h = find_in_catalog("llama-3.1-8b-instruct").hidden_size
    assert h == 4096

    def ws(version, tp, gpu="h100-sxm", hidden=h, **kw):
        gpu = find_gpu(gpu) if isinstance(gpu, str) else gpu
        return nt.fi_allreduce_workspace(version, tp, hidden, 2, 8192, gpu=gpu, **kw) // MIB

    assert ws((0, 17, 0), 2) == 1536 and ws((0, 19, 0), 4) == 1536 and ws((0, 19, 0), 8) == 1536
    assert ws((0, 16, 0), 2) == 0  # off at every -O level in 0.16
    assert ws((0, 19, 0), 2, pp=2) == 0 and ws((0, 19, 0), 2, dp=2) == 0  # tp-pp, tp-dp: fusion off
    assert ws((0, 19, 0), 2, eager=True) == 0  # --enforce-eager: no torch.compile, no pass
    assert ws((0, 19, 0), 2, "a100-sxm-80") == 0 and ws((0, 19, 0), 2, "h100-pcie") == 0  # SM80; no NVSwitch
    assert ws((0, 19, 0), 1) == 0
    # known only by its memory (a log without --gpu): no fabric, no workspace, unless the caller states the
    # corpus machine's facts (check-log does: an HGX H100, capability 9.0 over NVSwitch)
    log_gpu = GPU.of_memory("log", "GPU from the log", 80 * 2**30, "a log")
    assert ws((0, 19, 0), 2, log_gpu) == 0 and ws((0, 19, 0), 2, nt.corpus_gpu(log_gpu)) == 1536
    assert ws((0, 19, 0), 2, "h200") == ws((0, 19, 0), 2, "h20") == 1536  # the other HGX Hoppers
    assert ws((0, 19, 0), 2, "gh200") == ws((0, 19, 0), 2, "h100-nvl") == 0  # NVL2, NVLink bridge: no switch
    # B300 (SM 10.3): not enabled by 0.17/0.18 (is_device_capability(100)); 0.19 takes the SM10x family and
    # a 64 MiB limit at tp 4. Llama 3.1 70B (H 8192): T = 64 MiB / 16384 = 4096; data 4 x 4096 x 8192 x 2 =
    # 256 MiB -> 512; Lamport 3 x 256 = 768 MiB -> 1024; flags -> 512: 2048 MiB.
    assert ws((0, 18, 0), 4, "b300", 8192) == 0
    assert ws((0, 19, 0), 4, "b300", 8192) == 2048
    assert ws((0, 19, 0), 4, "b200", 8192) == 1536  # SM100 at tp 4: 32 MiB -> data 128, Lamport 384


def test_tensor_parallel_non_torch_adds_the_workspace():
    # tp 2 on H100: v0.19 620 + 1536 = 2156 MiB = 2.105 GiB (llm-d's v0.19 tp 2 logs print 2.06-2.11 GiB,
    # tp 4 2.13-2.21: the workspace does not grow with tp); v0.17 563 + 1536 = 2099; v0.16 563 (no fusion);
    # A100 on v0.19: 620, no workspace; --enforce-eager: no compile pass, so no workspace either.
    from kvplan.sources.catalog import find_in_catalog

    m = find_in_catalog("llama-3.1-8b-instruct")

    def term(tp, version, gpu="h100-sxm", eager=False):
        return nt.non_torch(tp, 1, version, eager, find_gpu(gpu), 1, m, 8192) // MIB

    fitted_019, fitted_011 = nt.NON_TORCH_TP // MIB, nt.NON_TORCH_TP_V011 // MIB  # fits, without the workspace
    assert term(2, (0, 19, 0)) == term(4, (0, 19, 0)) == fitted_019 + 1536  # 1536: the workspace, by hand above
    assert 2.06 <= term(2, (0, 19, 0)) / 1024 <= 2.11  # what llm-d's v0.19 tp 2 H100 logs print
    assert term(2, (0, 17, 0)) == fitted_011 + 1536
    assert term(2, (0, 16, 0)) == fitted_011
    assert term(2, (0, 19, 0), "a100-sxm-80") == fitted_019
    assert term(2, (0, 19, 0), eager=True) == fitted_019


def test_fit_settings_carry_the_layout_gpu_and_eager_into_the_term():
    # The same rules through vLLM's settings (vllm.settings -> vllm_overhead.overhead_terms): Llama 3.1 8B
    # on 0.19.0 at tp 2: H100 SXM 620 + 1536 MiB; --enforce-eager 620 (no compile pass, no workspace);
    # one GPU 246, with --enforce-eager too.
    from kvplan.sources.catalog import find_in_catalog
    from kvplan.planning.deploy import Deployment
    from kvplan.engines.vllm.engine import settings
    from kvplan.engines.vllm.overhead import overhead_terms
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.plan import Request

    model, req, h100 = find_in_catalog("llama-3.1-8b-instruct"), Request(context=8192), find_gpu("h100")

    def term(dep, gpu=h100, **opts):
        st = settings(model, gpu, dep, req, "0.19.0", {k: str(v) for k, v in opts.items()})
        return overhead_terms(model, dep, st)["non_torch"] // MIB

    assert term(Deployment(tp=2)) == 620 + 1536
    assert term(Deployment(tp=2), enforce_eager="true") == 620
    assert term(Deployment(tp=2), gpu=find_gpu("a100-80")) == 620
    assert term(Deployment()) == 246 and term(Deployment(), enforce_eager="true") == 246
