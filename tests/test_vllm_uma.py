"""vLLM on a unified-memory GPU (kvplan/engines/vllm/uma.py): where its free memory comes from by release and
profile fields, its start-up check against the OS's share, and the host growth its budget counts.

Sources (the released wheels, read 2026-12-03): `vllm/utils/mem_utils.py` MemorySnapshot.measure (v0.11.0: no
branch; v0.12.0 L86-102 and v0.15.0 L105-122: compute capability 8.7 / 11.0 / 12.1 -> psutil's available;
v0.20.0 L109-116 and v0.30.0 L143-150: `current_platform.is_integrated_gpu`), `vllm/platforms/cuda.py` v0.30.0
L730-731 (torch's `is_integrated`), `vllm/platforms/interface.py` v0.30.0 L1075-1084 (False elsewhere, ROCm
included), `vllm/v1/worker/utils.py` v0.30.0 L534-554 (`request_memory`: ceil(total x gmu), refused when the
start-up free memory is less).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.engines.vllm import uma
from kvplan.engines.vllm.defaults import settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog
from conftest import unwrapped

GIB = 2**30


@pytest.fixture(scope="module")
def gb10():
    return find_gpu("gb10")


def _st(gpu, version="0.30.0", **opts):
    model = find_in_catalog("qwen3-8b")
    return settings(model, gpu, Deployment(1), Request(context=8192), version, {k: str(v) for k, v in opts.items()})


def _plan(gpu, gmu, *opts, version="0.30.0", model="qwen3-8b", context=8192):
    engine = resolve_engine("vllm", version, opts, gpu_memory_utilization=gmu)
    return engine.result(find_in_catalog(model), gpu, Deployment(1), Request(context=context))


def test_where_each_release_reads_free_memory(gb10):
    v = lambda text: tuple(int(x) for x in text.split("."))  # noqa: E731
    # GB10 is sm_121 and integrated: not before 0.12.0, by its capability 0.12-0.19, by the device flag from 0.20
    assert [uma.reads_meminfo(gb10, v(r)) for r in ("0.11.0", "0.12.0", "0.19.1", "0.20.0", "0.30.0")] == [
        False, True, True, True, True]
    # the same unified part with another capability: only the flag era reads MemAvailable (fields, not a name)
    other = dataclasses.replace(gb10, key="other", compute_capability="12.0")
    assert not uma.reads_meminfo(other, v("0.15.0")) and uma.reads_meminfo(other, v("0.30.0"))
    # ROCm's platform never reads it (MI300A); a discrete card never does
    assert not any(uma.reads_meminfo(find_gpu(k), v("0.30.0")) for k in ("mi300a", "h100-sxm", "gh200"))
    assert not uma.reads_meminfo(dataclasses.replace(gb10, vendor="AMD"), v("0.30.0"))


def test_requested_memory_is_what_gb10_users_quote(gb10):
    # vLLM's request_memory: math.ceil(total x gmu) of cudaMemGetInfo's total, 121.69 GiB on a GB10.
    # 130,663,055,360 x 0.87 = 113,676,858,163.2 -> 113,676,858,164 B = 105.87 GiB: "the check (wants 105.87 GiB)",
    # https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/issues/47 (2026-08-30);
    # x 0.84 = 109,756,966,502.4 -> 109,756,966,503 B = 102.22 GiB: "the 102.22 GiB that 0.84 x 121.69 demands",
    # https://github.com/tonyd2wild/GLM-5.3-Flash-NVFP4-DFlash2-2x-DGX-Spark/pull/19 (2026-09-03)
    total = gb10.memory_usable_bytes
    assert total == 130_663_055_360
    assert uma.requested(total, 0.87) == 113_676_858_164 and round(uma.requested(total, 0.87) / GIB, 2) == 105.87
    assert uma.requested(total, 0.84) == 109_756_966_503 and round(uma.requested(total, 0.84) / GIB, 2) == 102.22
    # what that leaves the OS and every other process at the corpus's utilisations: 0.80 -> 24.34 GiB, 0.85 -> 18.25
    assert round(uma.os_room(total, 0.80) / GIB, 2) == 24.34 and round(uma.os_room(total, 0.85) / GIB, 2) == 18.25


def test_the_start_up_check_with_the_os_share(gb10):
    # MiaAI #47 (above): free memory at boot 101.3-102.2 of 121.69 GiB, so the OS and the rest hold 19.49-20.39 GiB
    # ("we run at 0.82-0.83"); at 20.39 GiB held, 0.83 asks 101.00 GiB (starts), 0.87 asks 105.87 GiB (refused)
    held = f"os_memory={gb10.memory_usable_bytes - int(101.3 * GIB)}"
    ok, refused = _plan(gb10, 0.83, held), _plan(gb10, 0.87, held)
    assert ok.plan.fits and ok.plan.max_concurrency >= 1
    assert not refused.plan.fits and refused.plan.max_concurrency == 0 and refused.plan.max_context == 0
    assert any("refuse to start" in w.message for w in refused.plan.warnings)
    # the corpus's two GB10 runs of spark-vllm-docker#396 (held out: a check, nothing tuned on it) started at 0.80
    # and 0.85, so their OS held at most 18.25 GiB; a stated 18 GiB starts both
    assert all(_plan(gb10, g, "os_memory=18GiB").plan.fits for g in (0.80, 0.85))


def test_unstated_os_share_is_an_assumption_said(gb10):
    warned = [w for w in _plan(gb10, 0.8).plan.warnings if "os_memory=SIZE" in w.message]
    assert len(warned) == 1 and warned[0].values == (gb10.memory_usable_bytes, uma.requested(
        gb10.memory_usable_bytes, 0.8), uma.os_room(gb10.memory_usable_bytes, 0.8))
    assert "MemAvailable" in warned[0].message
    # before 0.12.0 vLLM measured the device's own count on it
    old = [w.message for w in _plan(gb10, 0.8, version="0.11.0").plan.warnings if "os_memory=SIZE" in w.message]
    assert len(old) == 1 and "torch.cuda.mem_get_info" in old[0]


def test_host_growth_comes_off_the_budget_byte_for_byte(gb10):
    # MemAvailable's drop from the worker's start counts as non-KV memory: a 4.4 GiB loader buffer left on the host
    # (MiaAI #204's InstantTensor arms) is 4.4 GiB less KV. max_num_seqs 32, below the ~60 8k requests both plans hold:
    # both emit --max-num-seqs 32, so the runner's host token table is the same 32 x 8,192 x 4 B in both
    base, grown = _plan(gb10, 0.8, "max_num_seqs=32"), _plan(gb10, 0.8, "max_num_seqs=32", "host_growth=4.4GiB")
    assert base.plan.kv_memory_bytes_per_gpu - grown.plan.kv_memory_bytes_per_gpu == int(4.4 * GIB)
    h100 = find_gpu("h100-sxm")
    a, b = _plan(h100, 0.9), _plan(h100, 0.9, "host_growth=4.4GiB", "os_memory=20GiB")
    assert a.plan.kv_memory_bytes_per_gpu == b.plan.kv_memory_bytes_per_gpu and b.plan.fits
    assert any("ignored" in w.message and "not unified" in w.message for w in b.plan.warnings)


def test_emit_says_the_os_room(gb10):
    r = _plan(gb10, 0.8, "os_memory=30GiB")
    engine = resolve_engine("vllm", "0.30.0", ("os_memory=30GiB",), gpu_memory_utilization=0.8)
    note = engine.emit_note(r, find_in_catalog("qwen3-8b"))
    assert "unified memory: at 0.8 vLLM starts only while the OS and other processes hold at most 24.34 GiB" in note
    # 121.69 - 30 = 91.69 GiB free: 0.75 asks ceil(0.75 x 121.69 GiB) = 91.27 GiB (starts), 0.76 asks 92.48 (refused)
    assert "would refuse to start: the most that starts is 0.75" in note
    assert uma.highest_starting(gb10.memory_usable_bytes, 30 * GIB) == 0.75
    assert "unified memory" not in (resolve_engine("vllm", "0.30.0").emit_note(
        _plan(find_gpu("h100-sxm"), 0.9), find_in_catalog("qwen3-8b")) or "")


def test_a_bad_size_is_one_line():
    with pytest.raises(KvplanError, match="os_memory must be a size"):
        _st(find_gpu("gb10"), os_memory="lots")
    out = subprocess.run([sys.executable, "-m", "kvplan", "fit", "qwen3-8b", "--gpu", "gb10", "--engine", "vllm",
                          "--engine-opt", "host_growth=-3GiB"], capture_output=True, text=True)
    assert out.returncode != 0 and "Traceback" not in out.stderr + out.stdout
    assert "host_growth must be a size" in out.stderr + out.stdout


def test_a_unified_gpus_graph_estimate_can_be_negative(gb10):
    # eugr/spark-vllm-docker#200 (training source; one DGX Spark, a vLLM build near 0.20.0): "Profiling CUDA graph
    # memory: PIECEWISE=51" then "Estimated CUDA graph memory: -4.74 GiB total". vLLM 0.20.0 (gpu_model_runner.py
    # L5990-6047) sums free-memory differences: first capture + max(second capture, 1 MiB) x (51 - 1). Printed to two
    # decimals, the total is below -4.735 GiB, and the per-graph term is at least 50 MiB, so the first capture's sample
    # is below -(4.735 x 2**30 + 50 x 2**20) = -5,136,596,337 B = -4.784 GiB: free memory (cudaMemGetInfo, which on a
    # unified GPU moves with the OS's free pages) rose by at least 4.78 GiB while a graph was captured, which graph
    # memory cannot do. So on such a GPU the estimate vLLM subtracts is not the graphs' memory (docs/engines.md 1.2c).
    import hashlib
    from pathlib import Path

    import yaml

    from kvplan.engines.logparse import parse_log

    corpus = Path(__file__).parent / "fixtures" / "logs" / "corpus"
    rec = next(r for r in yaml.safe_load((corpus / "index.yaml").read_text())
               if r["id"] == "spark-200-qwen36-35b-a3b-fp8-gb10-negative-graph-estimate")
    assert hashlib.sha256(f"{rec['repo']}#{rec['issue']}".encode()).digest()[0] >= 86  # the training side
    assert rec["gpu"] == "gb10" and uma.unified(gb10) and not rec.get("kvplan_model")  # evidence, never fitted
    printed = parse_log((corpus / rec["log"]).read_text()).reported["cudagraph_estimate_gib"]
    assert printed.text == "-4.74"
    graphs, per_graph_floor = 51, 2**20
    total_below = (printed.value + 0.005) * GIB  # -4.735 GiB: the largest total that prints as -4.74
    first_below = total_below - (graphs - 1) * per_graph_floor
    assert round(first_below) == -5136596337 and first_below / GIB < -4.78


def test_the_runners_token_table_is_non_kv_memory_on_a_unified_gpu(gb10):
    # vLLM's model runner, built after the snapshot its budget starts from, fills a host table with one token id per
    # request slot and position (uma.token_table_bytes): V1's int32 token_ids_cpu_tensor, plus its bool is_token_ids
    # mask from 0.12.0 (v1/worker/gpu_input_batch.py v0.11.0 L111, v0.12.0 L110-123); V2's pinned int32 all_token_ids
    # (v1/worker/gpu/states.py v0.29.0 L34-39). On GB10 that memory leaves the free count vLLM reads.
    # Qwen3-8B, --max-model-len 1024, --max-num-seqs 256 (the plans hold over 500 such requests, so the command
    # emits 256; 32,768-token ones, fewer than 256, would shrink the table to the emitted count: the next test):
    #   0.15.0 (V1 runner, mask):          256 x 1,024 x (4 + 1) = 1,310,720 B
    #   0.11.0 (V1 runner, no mask):       256 x 1,024 x 4       = 1,048,576 B
    #   0.30.0 (runner chosen by model):   256 x 1,024 x 4       = 1,048,576 B (the int32 table both runners hold)
    #   0.7.3 (the V0 engine), or an H100: 0
    def plan(gpu, version, *opts):
        return _plan(gpu, 0.8, "max_num_seqs=256", *opts, version=version, context=1024)

    discrete = dataclasses.replace(gb10, key="gb10-discrete", memory_unified=False)
    for version, table in (("0.15.0", 1310720), ("0.11.0", 1048576), ("0.30.0", 1048576)):
        got = plan(gb10, version, "page_cache=0").plan.kv_memory_bytes_per_gpu  # 0.11's page cache: its own test
        assert plan(discrete, version).plan.kv_memory_bytes_per_gpu - got == table, version
        assert plan(gb10, version).settings["overhead_host_token_table"] == table
    st = _st(gb10, version="0.7.3", max_num_seqs=256)
    assert not st.v1 and uma.token_table_bytes(gb10, st) == 0
    assert uma.token_table_bytes(find_gpu("h100-sxm"), _st(find_gpu("h100-sxm"), max_num_seqs=256)) == 0
    # a unified part on ROCm (MI300A's profile): vLLM reads it as a discrete GPU; not counted
    assert uma.token_table_bytes(find_gpu("mi300a"), _st(find_gpu("mi300a"), max_num_seqs=256)) == 0


def test_a_cold_loads_page_cache_is_non_kv_where_vllm_reads_the_device_count(gb10):
    # On an integrated GPU cudaMemGetInfo's free is MemFree, which counts the page cache as used (vLLM's comment,
    # utils/mem_utils.py v0.30.0 L143-150; unslothai/unsloth#10704 on a GB10: a 60 GiB write moved cuda_free
    # 103.25 -> 41.52 GiB, MemAvailable 115.85 -> 115.65). vLLM's default loader reads every tensor of every file on
    # every rank (model_loader/weight_utils.py safetensors_weights_iterator), after the snapshot the budget starts
    # from, so before 0.12.0 (no MemAvailable branch: utils/__init__.py v0.11.0 L2734) a cold load's whole checkpoint
    # is in the non-torch increase. Llama-3.1-8B's checkpoint: 16,060,522,496 B, the `total_size` of
    # meta-llama/Meta-Llama-3.1-8B's model.safetensors.index.json (14.96 GiB). From 0.12.0 GB10 reads MemAvailable,
    # which counts the cache as free: nothing. A discrete GPU: nothing.
    ckpt = 16_060_522_496

    def budget(gpu, version, *opts):
        # max_num_seqs 4, below the 32k requests every plan here holds: the emitted --max-num-seqs and the host
        # token table stay 4 x 32,768 x 4 B whatever the page cache leaves
        engine = resolve_engine("vllm", version, ["max_num_seqs=4", *opts], gpu_memory_utilization=0.8)
        res = engine.result(find_in_catalog("llama-3.1-8b"), gpu, Deployment(1), Request(context=32768))
        return res.plan.kv_memory_bytes_per_gpu, res.settings["overhead_page_cache"]

    cold, counted = budget(gb10, "0.11.0")
    assert counted == ckpt and budget(gb10, "0.11.0", "page_cache=0")[0] - cold == ckpt
    assert budget(gb10, "0.11.0", "page_cache=4GiB")[0] - cold == ckpt - 4 * GIB  # as stated
    assert budget(gb10, "0.15.0")[1] == 0 and budget(gb10, "0.30.0")[1] == 0  # MemAvailable
    # the same part at another capability reads the device count until 0.20.0 (the flag): counted at 0.15.0
    other = dataclasses.replace(gb10, key="other", compute_capability="12.0")
    assert budget(other, "0.15.0")[1] == ckpt and budget(other, "0.30.0")[1] == 0
    # MI300A (ROCm: the vendor's device count is not read) and a discrete H100: not counted
    assert budget(find_gpu("mi300a"), "0.11.0")[1] == 0 and budget(find_gpu("h100-sxm"), "0.11.0")[1] == 0


def test_the_plan_says_what_it_assumed_of_the_page_cache(gb10):
    def said(gpu, version, *opts):
        return " ".join(w.message for w in _plan(gpu, 0.8, *opts, version=version).plan.warnings)

    assert "counted as non-KV memory (a cold start" in said(gb10, "0.11.0")
    assert "counted as non-KV memory (as stated" in said(gb10, "0.11.0", "page_cache=0")
    assert "counted as free, as MemAvailable does" in said(gb10, "0.30.0")
    assert "page_cache ignored" in said(gb10, "0.30.0", "page_cache=1GiB")
    assert "is not read" in said(find_gpu("mi300a"), "0.30.0")
    assert "page_cache ignored" in said(find_gpu("h100-sxm"), "0.30.0", "page_cache=1GiB")


def test_token_table_and_command_follow_max_model_len_not_a_shorter_ctx(gb10):
    # The runner's table is max_num_seqs x max_model_len (v1/worker/gpu_input_batch.py v0.11.0 L111:
    # token_ids_cpu_tensor of (max_num_reqs, max_model_len)), whatever the requests' length: with --max-model-len 32k
    # and --ctx 8k vLLM starts at 32,768, so the budget is --ctx 32k's and the emitted command keeps 32768. vLLM 0.30.0,
    # Qwen3-8B on
    # GB10, max_num_seqs 8 (engine option, below the ~20 32k requests the plans hold, so every command emits 8): the
    # table 8 x 32,768 x 4 = 1,048,576 B against 8 x 8,192 x 4 = 262,144 B at 8k, so the 8k plan's budget shrinks by
    # the difference, 786,432 B.
    def run(*extra):
        args = ["fit", "qwen3-8b", "--gpu", "gb10", "--engine", "vllm", "--engine-version", "0.30.0",
                "--engine-opt", "max_num_seqs=8", *extra]
        r = CliRunner().invoke(app, [*args, "--json"])
        assert r.exit_code == 0, r.output
        plan = json.loads(r.stdout)
        plan = plan["plans"][0] if "plans" in plan else plan
        emitted = unwrapped(CliRunner().invoke(app, [*args, "--emit", "vllm"]).stdout).strip().splitlines()[-1]
        return plan["kv_memory_bytes_per_gpu"], emitted

    short, short_cmd = run("--ctx", "8k")
    asked, asked_cmd = run("--ctx", "8k", "--max-model-len", "32k")
    long, _ = run("--ctx", "32k")
    assert short - asked == 1_048_576 - 262_144 and asked == long
    assert "--max-model-len 8192 " in short_cmd and "--max-model-len 32768 " in asked_cmd


def test_token_table_is_the_engines_max_num_seqs_and_is_said_in_gib(gb10):
    # issue 22: vLLM allocates its runner's host token table for max_num_seqs slots (v1/worker/gpu_input_batch.py
    # v0.11.0 L111: token_ids_cpu_tensor of (max_num_reqs, max_model_len)). Qwen3-8B on GB10, vLLM 0.30.0 (default
    # max_num_seqs 1,024: GB10's 121.69 GiB >= 70 GiB, arg_utils' big tier), --ctx 32k --batch 64 on one GPU: the
    # emitted command passes --max-num-seqs 64, but a server started without that flag allocates the default's
    # 1,024 x 32,768 x 4 = 134,217,728 B, so the plan keeps that (the safe side: pricing 64 slots would over-promise
    # KV); --engine-opt max_num_seqs=64 prices 64 x 32,768 x 4 B = 8,388,608 B (0.0078 GiB, printed 0.01 GiB), and the
    # budget is larger by at least the difference (the sampler's dummy run and the CUDA-graph sizes shrink with it too)
    base = ["fit", "qwen3-8b", "--gpu", "gb10", "--engine", "vllm", "--engine-version", "0.30.0", "--ctx", "32k",
            "--batch", "64", "--gpus", "1"]  # one GPU, though 64 such requests need more

    def run(*extra):
        r = CliRunner().invoke(app, [*base, *extra, "--json"])
        assert r.exit_code == 0, r.output
        plan = json.loads(r.stdout)
        return plan["plans"][0] if "plans" in plan else plan

    emitted = unwrapped(CliRunner().invoke(app, [*base, "--emit", "vllm"]).stdout).strip().splitlines()[-1]
    assert "--max-num-seqs 64 " in emitted
    plan, given = run(), run("--engine-opt", "max_num_seqs=64")
    assert plan["engine"]["settings"]["overhead_host_token_table"] == 134_217_728
    assert given["engine"]["settings"]["overhead_host_token_table"] == 8_388_608
    assert given["kv_memory_bytes_per_gpu"] - plan["kv_memory_bytes_per_gpu"] >= 134_217_728 - 8_388_608
    res = CliRunner().invoke(app, [*base, "--engine-opt", "max_num_seqs=64"])
    assert "max_num_seqs x max_model_len x 4 B = 64 x 32,768 x 4 B = 0.01 GiB" in " ".join(res.output.split())
