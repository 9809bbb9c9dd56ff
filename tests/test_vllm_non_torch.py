"""vLLM's non-torch memory by release: the two source-derived terms (kvplan/engines/vllm_non_torch.py)."""

from __future__ import annotations

import pathlib
import sys

import yaml

from kvplan.engines import vllm_non_torch as nt

MIB = 2**20
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import budget_corpus

    return budget_corpus


def test_single_gpu_boundary_is_the_graph_profiling_of_0_18():
    # 0.18.0 runs profile_cudagraph_memory inside memory_profiling (gpu_worker.py determine_available_memory);
    # 0.17.0 does not. One GPU: 133 MiB up to 0.17 (0.13 GiB), 246 MiB from 0.18 (0.24 GiB), unless
    # --enforce-eager (no capture: the 0.17 figure) or ROCm (vLLM skips the profiling there).
    assert nt.non_torch(1, 1, (0, 17, 0), gpu_key="h100-sxm") == 133 * MIB
    assert nt.non_torch(1, 1, (0, 18, 0), gpu_key="h100-sxm") == 246 * MIB
    assert nt.non_torch(1, 1, (0, 19, 0), gpu_key="h100-sxm") == 246 * MIB
    assert nt.non_torch(1, 1, (0, 18, 0), eager=True, gpu_key="h100-sxm") == 133 * MIB
    assert nt.non_torch(1, 1, (0, 19, 0), gpu_key="mi300x") == 133 * MIB


def test_llmd_version_sweep_held_out_follows_the_boundary():
    # llm-d's sweep of Qwen3-14B on one H100 (held out: never fitted) prints non-torch 0.13 GiB on
    # 0.15, 0.16 and 0.17 and 0.25 GiB on 0.18; kvplan: 133 MiB = 0.130 GiB, then 246 MiB = 0.240 GiB.
    b = _bench()
    index = yaml.safe_load((ROOT / "tests/fixtures/logs/corpus/index.yaml").read_text())
    for minor, printed in ((15, 0.13), (16, 0.13), (17, 0.13), (18, 0.25)):
        rec = next(r for r in index if r["id"] == f"llmd-sweep-qwen3-14b-vllm-v0-{minor}-0-h100")
        assert b.is_held_out(rec)
        pred = b.predict(rec, b.parsed(rec))["non_torch"] / 2**30
        assert abs(pred - printed) / printed <= 0.05, (minor, pred)


def test_flashinfer_allreduce_workspace_by_release_gpu_and_layout():
    # trtllm_create_ipc_workspace_for_all_reduce_fusion: 3 buffers per rank (data, flags, Lamport), each a
    # SymmDeviceMemory rounded up to the 512 MiB multicast granularity: 3 x 512 = 1536 MiB. On by default
    # from 0.17.0 (-O2 fuse_allreduce_rms) for tp > 1, pp == dp == 1, SM90/SM100 on NVSwitch, not eager.
    assert nt.FI_AR_WORKSPACE == 1536 * MIB
    h100 = "h100-sxm"
    assert nt.fi_allreduce_workspace((0, 16, 0), 2, gpu_key=h100) == 0  # off at every -O level in 0.16
    assert nt.fi_allreduce_workspace((0, 17, 0), 2, gpu_key=h100) == 1536 * MIB
    assert nt.fi_allreduce_workspace((0, 19, 0), 4, gpu_key="b200") == 1536 * MIB
    assert nt.fi_allreduce_workspace((0, 19, 0), 2, pp=2, gpu_key=h100) == 0  # tp-pp: fusion off
    assert nt.fi_allreduce_workspace((0, 19, 0), 2, dp=2, gpu_key=h100) == 0  # tp-dp: fusion off
    assert nt.fi_allreduce_workspace((0, 19, 0), 2, eager=True, gpu_key=h100) == 0  # no torch.compile
    assert nt.fi_allreduce_workspace((0, 19, 0), 2, gpu_key="a100-sxm-80") == 0  # SM80: not enabled
    assert nt.fi_allreduce_workspace((0, 19, 0), 2, gpu_key="h100-pcie") == 0  # no NVSwitch multicast
    assert nt.fi_allreduce_workspace((0, 19, 0), 1, gpu_key=h100) == 0


def test_tensor_parallel_non_torch_adds_the_workspace():
    # tp 2 on H100: v0.19 620 + 1536 = 2156 MiB = 2.105 GiB (llm-d's v0.19 tp 2 logs print 2.06-2.11 GiB,
    # tp 4 2.13-2.21: the workspace does not grow with tp); v0.17 563 + 1536 = 2099; v0.16 563 (no fusion);
    # A100 on v0.19: 620, no workspace.
    assert nt.non_torch(2, 1, (0, 19, 0), gpu_key="h100-sxm") == (620 + 1536) * MIB
    assert nt.non_torch(4, 1, (0, 19, 0), gpu_key="h100-sxm") == (620 + 1536) * MIB
    assert nt.non_torch(2, 1, (0, 17, 0), gpu_key="h100-sxm") == (563 + 1536) * MIB
    assert nt.non_torch(2, 1, (0, 16, 0), gpu_key="h100-sxm") == 563 * MIB
    assert nt.non_torch(2, 1, (0, 19, 0), gpu_key="a100-sxm-80") == 620 * MIB
    assert nt.non_torch(2, 1, (0, 19, 0), eager=True, gpu_key="h100-sxm") == 563 * MIB


def test_fit_settings_carry_the_layout_gpu_and_eager_into_the_term():
    # The same rules through vLLM's settings (vllm.settings -> vllm_overhead.overhead_terms): Llama 3.1 8B
    # on 0.19.0 at tp 2: H100 SXM 620 + 1536 MiB; --enforce-eager 563 (no compile pass, no graph capture);
    # one GPU with --enforce-eager 133.
    from kvplan.catalog import find_in_catalog
    from kvplan.deploy import Deployment
    from kvplan.engines.vllm import settings
    from kvplan.engines.vllm_overhead import overhead_terms
    from kvplan.hardware import find_gpu
    from kvplan.plan import Request

    model, req, h100 = find_in_catalog("llama-3.1-8b-instruct"), Request(context=8192), find_gpu("h100")

    def term(dep, gpu=h100, **opts):
        st = settings(model, gpu, dep, req, "0.19.0", {k: str(v) for k, v in opts.items()})
        return overhead_terms(model, dep, st)["non_torch"] // MIB

    assert term(Deployment(tp=2)) == 620 + 1536
    assert term(Deployment(tp=2), enforce_eager="true") == 563
    assert term(Deployment(tp=2), gpu=find_gpu("a100-80")) == 620
    assert term(Deployment()) == 246 and term(Deployment(), enforce_eager="true") == 133
