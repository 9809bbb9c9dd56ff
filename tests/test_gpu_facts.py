"""GPU facts engines read (kvplan/hardware/profiles/README.md, "Hardware facts"): every bundled profile carries
them, they agree with independent tables, engines answer the same for a copied profile under another key, and a
profile without them plans with each assumption stated."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from kvplan.engines import resolve_engine
from kvplan.hardware.facts import INTERCONNECT_KINDS, MEMORY_KINDS
from kvplan.hardware.gpus import GPU, find_gpu, load_gpus
from kvplan.model.spec import Quantization
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.report.text import engine_to_dict, plan_to_dict
from kvplan.sources.catalog import find_in_catalog

PROFILES_DIR = Path(__file__).parents[1] / "kvplan" / "hardware" / "profiles"


@pytest.fixture(scope="module")
def gpus() -> dict[str, GPU]:
    return load_gpus()


# --- the bundled facts -------------------------------------------------------------------------

# Compute capability as NVIDIA's CUDA GPUs list (developer.nvidia.com/cuda-gpus and the legacy list) and AMD's
# ROCm GPU specs ("LLVM target name") give them, transcribed by hand: an independent table, not the profiles.
# A10G and H20 are not on NVIDIA's list: the A10's GA102 (8.6) and Hopper's GH100 (9.0).
CAPABILITY = {
    "v100-pcie-16": "7.0", "v100-pcie-32": "7.0", "v100-sxm2-16": "7.0", "v100-sxm2-32": "7.0", "t4": "7.5",
    "a100-pcie-40": "8.0", "a100-pcie-80": "8.0", "a100-sxm-40": "8.0", "a100-sxm-80": "8.0",
    "a10": "8.6", "a10g": "8.6", "rtx-3090": "8.6", "l4": "8.9", "l40s": "8.9", "rtx-4090": "8.9",
    "h100-pcie": "9.0", "h100-sxm": "9.0", "h100-nvl": "9.0", "h200-sxm": "9.0", "h20": "9.0", "gh200": "9.0",
    "gh200-144": "9.0", "b200": "10.0", "gb200": "10.0", "b300": "10.3", "gb300": "10.3", "rtx-5090": "12.0",
    "rtx-pro-6000-server": "12.0", "mi250x": "gfx90a", "mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950",
    "gaudi2": None, "gaudi3": None,
    # issue 22 (CUDA GPUs list; GB10's sm_121 from DGX Spark's hardware pages; MI300A from ROCm GPU specs)
    "rtx-a6000": "8.6", "rtx-a4500": "8.6", "a800": "8.0", "rtx-6000-ada": "8.9", "l20": "8.9", "l40": "8.9",
    "h800": "9.0", "h200-nvl": "9.0", "rtx-pro-6000-workstation": "12.0", "gb10": "12.1", "mi300a": "gfx942",
    # issue 21's corpus coverage (ROCm GPU specs: MI100 is CDNA, gfx908)
    "mi100": "gfx908",
    # issue 22's consumer Blackwell (CUDA GPUs list: GeForce RTX 5080, 12.0)
    "rtx-5080": "12.0",
    # issue 22's RDNA3 cards (ROCm@e396b489 docs/reference/gpu-arch-specs.rst: Radeon PRO W7900 and RX 7900 XTX,
    # gfx1100)
    "radeon-pro-w7900": "gfx1100", "rx-7900-xtx": "gfx1100",
    "rtx-a5000": "8.6",  # round 35: CUDA GPUs list, RTX A5000 8.6 (GA102)
}
# Each architecture's capabilities (NVIDIA: the major.minor families; AMD: CDNA gfx908, CDNA2 gfx90a, CDNA3 gfx942,
# CDNA4 gfx950).
ARCHITECTURE = {"volta": {"7.0"}, "turing": {"7.5"}, "ampere": {"8.0", "8.6"}, "ada": {"8.9"}, "hopper": {"9.0"},
                "blackwell": {"10.0", "10.3", "12.0", "12.1"}, "cdna": {"gfx908"}, "cdna2": {"gfx90a"},
                "cdna3": {"gfx942"},
                "cdna4": {"gfx950"}, "rdna3": {"gfx1100"}, "gaudi2": {None}, "gaudi3": {None}}
# Parts with FP8 tensor math whose sources give a 16-bit rate but no FP8 one (their profiles say so).
# MI300A: AMD's BF16/FP16/INT8 figures are cited, its FP8 one was not found (CDNA3 has FP8 math)
NO_FP8_RATE = {"l20", "h800", "mi300a"}
# NVSwitch parts (HGX 8-GPU boards, NVL72 racks): the ones vLLM's multicast workspace exists on.
NVSWITCH = {"a100-sxm-40": 8, "a100-sxm-80": 8, "h100-sxm": 8, "h200-sxm": 8, "h20": 8, "b200": 8, "b300": 8,
            "gb200": 72, "gb300": 72, "h800": 8, "a800": 8}


def test_bundled_facts_match_the_vendor_tables(gpus):
    assert set(CAPABILITY) <= set(gpus) and len(CAPABILITY) >= 34
    for key, cc in CAPABILITY.items():
        assert gpus[key].compute_capability == cc, key
        assert (gpus[key].interconnect_kind == "nvswitch") == (key in NVSWITCH), key
    for key, domain in NVSWITCH.items():
        assert gpus[key].interconnect_domain == domain, key


def test_every_bundled_profile_states_its_facts(gpus):
    for key, gpu in gpus.items():
        assert gpu.compute_capability in ARCHITECTURE[gpu.architecture], key
        assert gpu.compute_capability or gpu.vendor not in ("NVIDIA", "AMD"), key
        assert gpu.device_name and gpu.memory_kind in MEMORY_KINDS, key
        assert gpu.fp8 is not None and gpu.fp4 is not None, key
        assert gpu.interconnect_kind in INTERCONNECT_KINDS and gpu.interconnect_domain, key
        if gpu.interconnect_kind == "pcie":
            assert gpu.interconnect_domain == 1 and gpu.pcie_gen, key
            assert gpu.pcie_gen == int(gpu.interconnect_type.split("Gen")[1][0]), key  # "PCIe Gen4 x16" -> 4


def test_facts_agree_with_the_rest_of_each_profile(gpus):
    for key, gpu in gpus.items():
        assert gpu.memory_kind.lower() in gpu.memory_marketed.lower(), key  # "80GB HBM3" -> HBM3
        # a listed FP8 / FP4 rate means the tensor math exists; CDNA4 has FP4 matrix types (ROCm's
        # precision-support page) and the MI355X lists its rate
        # a listed rate means the math exists; the math can exist where no source gives its rate (issue 22's
        # workstation and unified-memory parts: fp8 true, no FP8 rate listed)
        assert gpu.fp8 or "fp8" not in gpu.dense_flops, key
        assert gpu.fp4 or "fp4" not in gpu.dense_flops, key
        if gpu.dense_flops.keys() & {"bf16", "fp16"} and gpu.key not in NO_FP8_RATE:
            assert gpu.fp8 == ("fp8" in gpu.dense_flops), key
        if gpu.architecture != "cdna4" and gpu.dense_flops:
            assert gpu.fp4 == ("fp4" in gpu.dense_flops), key
        if gpu.vendor == "NVIDIA":
            assert gpu.device_name in gpu.aliases or gpu.device_name.lower().replace(" ", "-") in gpu.aliases, key


def test_capability_reads_like_torch(gpus):
    # torch.cuda.get_device_capability(): (9, 0) on an H100; on ROCm the gfx target's major and minor
    assert gpus["h100-sxm"].capability == (9, 0) and gpus["b300"].capability == (10, 3)
    assert gpus["mi300x"].capability == (9, 4) and gpus["mi250x"].capability == (9, 0)
    assert gpus["mi355x"].capability == (9, 5) and gpus["gaudi2"].capability is None


# --- the same card under another key: the same plan from every engine ----------------------------

def _nvfp4(name: str):
    return dataclasses.replace(find_in_catalog(name), quantization=Quantization("nvfp4", 16))


# (engine, version, model, tp, context): per engine the rules that read GPU facts. vLLM: the batch tier by
# device name (0.8.4 by name, 0.11.0 "not an A100"), MXFP4 kernels and the all-reduce workspace (gpt-oss at
# tp 4), NVFP4 scales (tp 8); SGLang: shared-expert fusion by capability (DeepSeek-V3; it moves bytes only
# under expert parallelism, "ep" below: tp 8 with ep 8).
CASES = [
    (None, None, "gpt-oss-120b", 4, 32768),
    ("vllm", None, "gpt-oss-120b", 4, 32768),
    ("vllm", "0.11.0", "llama-3.1-8b", 1, 8192),
    ("vllm", "0.8.4", "llama-3.1-8b", 1, 8192),
    ("vllm", "0.19.1", "qwen3-30b-a3b:nvfp4", 8, 8192),
    ("sglang", None, "deepseek-v3", "ep", 8192),
    ("trtllm", None, "llama-3.1-8b", 1, 8192),
    ("llama.cpp", None, "llama-3.1-8b", 1, 8192),
    ("transformers", None, "llama-3.1-8b", 1, 8192),
]


@pytest.fixture(scope="module")
def copies(tmp_path_factory, gpus) -> dict[str, GPU]:
    """Every bundled profile's file, under the key 'copy-<key>' and with no aliases, as a user's --hw-profiles."""
    d = tmp_path_factory.mktemp("copies")
    for key in gpus:
        data = yaml.safe_load((PROFILES_DIR / f"{key}.yaml").read_text())
        data.update(key=f"copy-{key}", aliases=[])
        (d / f"copy-{key}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    catalog = load_gpus([d])
    return {key: catalog[f"copy-{key}"] for key in gpus}


def _plan_json(engine, model, gpu, tp, context: int) -> str:
    """fit --json's plan and engine parts, or the refusal, with the GPU's key and name taken out."""
    dep = Deployment(8, ep=8) if tp == "ep" else Deployment(tp)
    try:
        r = engine.result(model, gpu, engine.deployment(dep), Request(context=context))
        text = json.dumps({**plan_to_dict(r.plan, model), "engine": engine_to_dict(r)}, sort_keys=True)
    except Exception as exc:  # a refusal must read the same too
        text = f"{type(exc).__name__}: {exc}"
    return text.replace(gpu.key, "<gpu>").replace(gpu.name, "<name>")


@pytest.mark.parametrize("engine_name, version, model_name, tp, context", CASES,
                         ids=[f"{c[0] or 'neutral'}-{c[1] or 'default'}-{c[2]}" for c in CASES])
def test_a_copied_profile_plans_as_the_bundled_one(gpus, copies, engine_name, version, model_name, tp, context):
    # The issue's wrong answer: the H100 SXM profile under another key planned gpt-oss-120b tp 4 with vLLM
    # with 0.85 GB less overhead, because rules tested the key ("h100-sxm"), not the card.
    name, _, quant = model_name.partition(":")
    model = _nvfp4(name) if quant else find_in_catalog(name)
    engine = resolve_engine(engine_name, version)
    planned = 0
    for key, gpu in gpus.items():
        bundled = _plan_json(engine, model, gpu, tp, context)
        assert _plan_json(engine, model, copies[key], tp, context) == bundled, key
        planned += bundled.startswith("{")
    assert planned >= len(gpus) // 2  # mostly plans, not refusals (which must also read the same)


def test_the_issues_case_in_numbers(gpus, copies):
    # before: bundled 8,352,594,001 B of overhead per GPU, the copy 7,499,993,578 (0.85 GB less); now both the first
    engine = resolve_engine("vllm")
    model = find_in_catalog("gpt-oss-120b")
    bundled, copy = (engine.result(model, g, Deployment(4), Request(context=131072)) for g in (gpus["h100-sxm"],
                                                                                                copies["h100-sxm"]))
    # the non-KV memory besides the checkpoint, 8,352,594,001 B, now in two parts: the overhead, and what loading
    # adds to the weights (booked as weights as loaded), checked on its own here:
    #   MXFP4 experts in triton_kernels' Hopper layouts (capability 9.0; vllm mxfp4.py pads I/tp to 64, then
    #   hopper_value.py / hopper_scale.py pad again: kvplan.engines.vllm.overhead): I/tp = 2880 / 4 = 720 -> 768;
    #   values 1472 x 1536 + 384 x 3072 = 3,440,640, scales 1536 x 90 + 3072 x 24 = 211,968, less the
    #   checkpoint's 3 x 720 x 2880 x 17 / 32 = 3,304,800, + the biases as fp32 at the padded shape, 4 x (1536 + 2880)
    #   = 17,664, less the checkpoint's bf16 2 x (1440 + 2880) = 8,640: 9,024 (create_weights allocates the padded
    #   bias too): 356,832 B per expert and layer x 128 experts x 36 layers;
    #   RoPE: yarn 4,096 x 32 = 131,072 rows x 64 rotary values x 4 B (vllm/model_executor/models/gpt_oss.py
    #   get_rope(..., dtype=torch.float32); yarn_scaling_rope.py: original positions x factor rows).
    #   The caching allocator's unsplit tails vLLM's allocated bytes count (kvplan.core.caching_allocator): 12 of
    #   the 36 qkv projections ((16 + 2 x 2) x 64 x 2,880 x 2 B = 7,372,800 B) take a 7,700,480 B remainder of a
    #   20 MiB segment whole (327,680 B over each), + 28,032 B of small-pool tails under 512 B: 3,960,192 B.
    #   And the default release, 0.33.0, loads under a 20 MiB split limit (kvplan.engines.vllm.load_split, 0.21.0+):
    #   the embedding and the untied LM head, 201,088 / 4 = 50,272 rows x 2,880 x 2 B = 289,566,720 B each, keep
    #   their whole 278 MiB segments, 1,937,408 B over each (the default rule split it off: over 1 MiB).
    split = 2 * (278 * 2**20 - 50_272 * 2_880 * 2)
    tails = 12 * 327_680 + 28_032 + split  # new beside the old answer's terms: not in its 8,352,594,001 B
    bias = 192 * 128 * 36  # the padded biases' bf16 share (9,024 - 8,832 B an expert-layer): not in it either
    repack = 356_832 * 128 * 36 + 131_072 * 64 * 4 + tails
    assert bundled.settings["overhead_weights_repack"] == copy.settings["overhead_weights_repack"] == repack
    # and the default release, 0.33.0, runs gpt-oss on vLLM's V2 model runner, whose profile run kvplan reads since
    # round 33 (kvplan.engines.vllm.sampler): its warmup pass holds 14 B a logit in FlashInfer's sampler (bf16 logits
    # 2 + fp32 copy 4 + top-k-masked fp32 logits 4 + softmax 4; gpu/model_runner.py 0.33.0 L993-1015,
    # flashinfer-python 0.7.2.post1 sampling.py L1795-1796) and no Triton buffer, where the old answer's fitted cost
    # per logit was 14.63 B: (14 - 14.63) x 1,024 x 201,088 = -129,722,890.24 B
    sampler = (14 - 14.63) * 1024 * 201_088
    # and the CUDA-graph estimate restated capture by capture (round 32, kvplan.engines.vllm.cudagraphs): gpt-oss
    # captures 83 sizes up to 1,024 in each mode (164 further graphs), sinks keep FA3's accumulator out; before,
    # 153 MiB + 0.19 MiB x 36 layers x 164 = 1,336,682,741 B; now each graph 36 x 0.126 MiB x 1.35 (MoE) = 6.12
    # -> 8 MiB, on the 209 MiB PIECEWISE first capture: (209 + 164 x 8) MiB = 1,594,884,096 B, 258,201,355 B more
    graphs = (209 + 164 * 8) * 2**20 - int(153 * 2**20 + 0.19 * 2**20 * 36 * 164)
    # and the V2 runner's penalty and grammar states, in 0.27+'s budget (round 33, branch v2pen33; gpu/sample/
    # penalties.py 0.33.0 L43-50, gpu/structured_outputs.py L63-64, utils/mem_utils.py L312-321): int32
    # [1,024, 201,088] + 2 x [1,024, cdiv(201,088, 32) = 6,284] = 4 x 1,024 x 213,656 = 875,134,976 B
    states = 4 * 1024 * (201_088 + 2 * 6_284)
    # and from 0.27.0 the CUDA-graph profiling runs after the budget's window (gpu_worker.py 0.27.0 L500-517, round 34):
    # the tp > 1 non-torch constant without its residue, 563 MiB for 620: 57 MiB = 59,768,832 B less
    residue = (620 - 563) * 2**20
    # and FlashInfer's fusion workspace is MNNVL's at 0.25+ (kvplan.engines.vllm.mnnvl; round 46), one
    # McastGPUBuffer block where 0.33.0 pins FlashInfer 0.7.2.post1, not trtllm's three 512 MiB blocks: H 2880 at
    # tp 4 on SM90 (2 MiB) -> T = 2 MiB / (2880 x 2) = 364; one-shot min(1 MiB // (4 x 2 x 2880) = 45, 364) x 2880 x
    # 4 x 2 = 1,036,800 B, two-shot 2 x 91 x 4 x 2880 x 2 = 4,193,280 B; 3 x 4,193,280 + 2 KiB -> 14 MiB -> 512 MiB
    mnnvl = (3 * 512 - 512) * 2**20
    for res in (bundled, copy):
        assert abs(res.plan.overhead_bytes_per_gpu - (8_352_594_001 - (repack - tails - bias) + sampler + graphs
                                                      + states - residue - mnnvl)) <= 1
    bundled, copy = bundled.plan, copy.plan
    assert bundled.max_concurrency == copy.max_concurrency and not copy.warnings


# --- a profile from before the facts: it loads, and what the rules assume is said -----------------

FACT_FIELDS = ("architecture", "compute_capability", "memory_kind", "fp8", "fp4", "device_name", "sm_count")


@pytest.fixture(scope="module")
def old_profiles(tmp_path_factory) -> dict[str, GPU]:
    """The H100 SXM and MI300X profiles as written before these fields existed (key 'old-<key>')."""
    d = tmp_path_factory.mktemp("old")
    for key in ("h100-sxm", "mi300x", "l4"):
        data = yaml.safe_load((PROFILES_DIR / f"{key}.yaml").read_text())
        data = {k: v for k, v in data.items() if k not in FACT_FIELDS}
        data["interconnect"] = {k: v for k, v in data["interconnect"].items() if k in ("type", "per_dir_bytes_per_s")}
        data.update(key=f"old-{key}", aliases=[])
        (d / f"old-{key}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    catalog = load_gpus([d])
    return {key: catalog[f"old-{key}"] for key in ("h100-sxm", "mi300x", "l4")}


def _warnings(engine_name, model_name, gpu, tp=1, version=None) -> list[str]:
    plan = resolve_engine(engine_name, version).plan(find_in_catalog(model_name), gpu, Deployment(tp),
                                                     Request(context=8192))
    return [w.message for w in plan.warnings]


def test_an_old_profile_loads_without_facts(old_profiles):
    h100 = old_profiles["h100-sxm"]
    assert all(getattr(h100, f) is None for f in FACT_FIELDS) and h100.interconnect_kind is None
    assert h100.interconnect_type == "NVLink4"


def test_each_assumed_fact_is_a_warning_where_a_rule_reads_it(old_profiles):
    h100, mi300x, l4 = old_profiles["h100-sxm"], old_profiles["mi300x"], old_profiles["l4"]
    said = " | ".join(_warnings("vllm", "gpt-oss-120b", h100, tp=4))
    # the batch tier reads the device name (>= 70 GiB), the MXFP4 kernels the capability, the workspace both
    assert "gives no device_name" in said and "name ('NVIDIA H100 SXM5 80GB') as the device name" in said
    assert "gives no compute_capability: vLLM's rules assumed compute capability 8.0" in said
    assert "gives no interconnect.kind: vLLM's rules assumed no NVSwitch" in said
    # vLLM 0.33's V2 sampler takes FlashInfer's kernel on capability 8.0-12.1 with more than 16 SMs (the Triton
    # sampler's buffer elsewhere): it reads the multiprocessor count, an H100's 132 assumed
    assert "gives no sm_count: vLLM's rules assumed 132 multiprocessors (an H100 SXM's)" in said
    # llama-3.1-8b on one 24 GB L4 under vLLM 0.33: only the sampler asks (no tier by name, no kernels, no
    # workspace), for the capability and SM count FlashInfer's sampler needs; with it stated (a log's line) nothing
    assert [w.split(":")[0] for w in _warnings("vllm", "llama-3.1-8b", l4)] == [
        "GPU profile 'old-l4' gives no compute_capability", "GPU profile 'old-l4' gives no sm_count"]
    plan = resolve_engine("vllm", None, ["flashinfer_sampler=true"]).plan(
        find_in_catalog("llama-3.1-8b"), l4, Deployment(1), Request(context=8192))
    assert not plan.warnings
    assert _warnings(None, "gpt-oss-120b", h100, tp=4) == []  # the default engine reads no facts
    # SGLang's shared-expert fusion asks DeepSeek-V3's GPU for its capability; AMD assumes a part before gfx942
    amd = " | ".join(_warnings("sglang", "deepseek-v3", mi300x, tp=8))
    assert "gives no compute_capability: SGLang's rules assumed gfx90a" in amd
    assert _warnings("sglang", "llama-3.1-8b", mi300x) == []


def test_the_assumptions_reproduce_the_old_answers(gpus, old_profiles):
    # What an old profile got before (rules keyed on unknown keys: Marlin kernels, no workspace) is what it
    # gets now, stated: gpt-oss-120b tp 4 on the factless H100 copy is the issue's 7,499,993,578 B.
    res = resolve_engine("vllm").result(find_in_catalog("gpt-oss-120b"), old_profiles["h100-sxm"], Deployment(4),
                                        Request(context=131072))
    # (what loading adds is booked as weights as loaded, so the overhead is the non-KV memory it was less that:
    # capability 8.0 assumed, so Marlin's padding, vllm mxfp4.py: I/tp 720 -> 768, H 2880 -> 3072; one expert of
    # one layer w13 [2I, H/2 + H/32] + bias 2 x 2I B, w2 [H, I/2 + I/32] + bias 2H B: 3,769,344 padded less the
    # rank's share of the checkpoint, 3 x 720 x 2880 x 17/32 + 2 x (1440 + 2880) = 3,313,440 (720 / 32 = 22.5 scale
    # blocks: half a block is the rank's), = 455,904 B x 128 experts x 36 layers; and the fp32 RoPE table 131,072 x
    # 64 x 4 B as above)
    split = 2 * (278 * 2**20 - 50_272 * 2_880 * 2)  # 0.33.0's split limit: the embedding's and LM head's 278 MiB
    tails = 12 * 327_680 + 28_032 + split  # the allocator's tails, as in test_the_issues_case_in_numbers (not in the
    # old answer)
    half_block = 1_440 * 128 * 36  # the old answer's share dropped the half block (3,312,000), counting it as padding
    repack = 455_904 * 128 * 36 + 131_072 * 64 * 4 + tails
    assert res.settings["overhead_weights_repack"] == repack
    sampler = (14 - 14.63) * 1024 * 201_088  # V2's 0.33 sampler, as in test_the_issues_case_in_numbers (capability
    # 8.0 and 132 SMs assumed: FlashInfer's sampler)
    graphs = (209 + 164 * 8) * 2**20 - int(153 * 2**20 + 0.19 * 2**20 * 36 * 164)  # as there too (round 32)
    states = 4 * 1024 * (201_088 + 2 * 6_284)  # V2's penalty and grammar states, as there too (v2pen33)
    residue = (620 - 563) * 2**20  # 0.27+: no graph-profiling residue in the tp > 1 non-torch figure (round 34)
    expected = 7_499_993_578 - (repack - tails + half_block) + sampler + graphs + states - residue
    assert abs(res.plan.overhead_bytes_per_gpu - expected) <= 1


def test_check_log_without_gpu_states_the_corpus_machine():
    # A v0.19 tp 2 log (llm-d's Qwen2.5-7B-Instruct, training split) with no --gpu: the FlashInfer workspace (1.50
    # GiB, tests/test_vllm_non_torch.py) is counted as on an HGX H100 and the output says so; with --gpu h100 it is
    # the profile's own fact.
    from typer.testing import CliRunner

    from kvplan.cli import app

    log = "tests/fixtures/logs/corpus/llmd-qwen-qwen2-5-7b-instruct-h100-80gb-tp2pp1dp1-8192.log"
    runner = CliRunner()
    bare = json.loads(runner.invoke(app, ["check-log", log, "--model", "qwen2.5-7b-instruct", "--json"]).stdout)
    named = json.loads(runner.invoke(app, ["check-log", log, "--model", "qwen2.5-7b-instruct", "--gpu", "h100",
                                           "--json"]).stdout)
    note = "no --gpu: vLLM's FlashInfer all-reduce workspace (1.50 GiB per GPU) counted as on an HGX H100"
    assert any(n.startswith(note) for n in bare["notes"]) and not any("HGX" in n for n in named["notes"])
    row = {r["quantity"]: r["predicted"] for r in bare["rows"]}["non-torch memory"]
    assert row == {r["quantity"]: r["predicted"] for r in named["rows"]}["non-torch memory"] == "2.11 GiB (estimate)"


def test_find_gpu_by_device_name():
    # the device name torch reports is also an alias of every NVIDIA profile (nvidia-smi names, issue 15)
    assert find_gpu("NVIDIA H100 80GB HBM3").device_name == "NVIDIA H100 80GB HBM3"
    assert find_gpu("gaudi3").device_name == "GAUDI3" and find_gpu("mi300x").device_name == "AMD Instinct MI300X"
    assert find_gpu("h100").interconnect_domain == 8 and find_gpu("gb200").interconnect_domain == 72
    assert find_gpu("h100-nvl").interconnect_kind == "nvlink-bridge" and find_gpu("l40s").pcie_gen == 4
    assert load_gpus()["h100-sxm"].memory_kind == "HBM3" and find_gpu("rtx-5090").memory_kind == "GDDR7"
