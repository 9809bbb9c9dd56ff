"""Tests for the GPU catalog (kvplan/hardware/profiles/*.yaml) and its loader (kvplan/hardware/gpus.py)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from kvplan.core.errors import EXIT_NOT_FOUND, EXIT_USAGE, KvplanError
from kvplan.hardware.gpus import CONFIDENCE_LEVELS, GPU, PRECISIONS, find_gpu, load_gpus

GiB = 2**30
MiB = 2**20
T = 10**12
REPO = Path(__file__).parents[1]
PROFILES_DIR = REPO / "kvplan" / "hardware" / "profiles"
SHARED = Path(__file__).parents[1].parent / "shared"


@pytest.fixture(scope="module")
def gpus() -> dict[str, GPU]:
    return load_gpus()


# --- the bundled catalog -------------------------------------------------------------------


def test_every_bundled_file_loads(gpus):
    files = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    assert sorted(gpus) == files  # one profile per file, file named after its key
    assert len(gpus) >= 30


@pytest.mark.parametrize(
    "name, key",
    [
        ("a100-80", "a100-sxm-80"), ("a100-40", "a100-sxm-40"), ("h100", "h100-sxm"), ("h200", "h200-sxm"),
        ("mi300x", "mi300x"), ("l40s", "l40s"), ("4090", "rtx-4090"), ("b200", "b200"), ("l4", "l4"),
        ("t4", "t4"), ("3090", "rtx-3090"), ("5090", "rtx-5090"), ("gaudi3", "gaudi3"), ("gaudi2", "gaudi2"),
        ("mi250x", "mi250x"), ("gb200", "gb200"), ("rtx-pro-6000", "rtx-pro-6000-server"),
    ],
)
def test_required_aliases_resolve(name, key):
    assert find_gpu(name).key == key


@pytest.mark.parametrize("name", ["H100", "h100_sxm", "H100 SXM", "h100-SXM5", " h100 ", "H100-80GB"])
def test_lookup_ignores_case_and_separators(name):
    assert find_gpu(name).key == "h100-sxm"


@pytest.mark.parametrize("name", ["rtx 4090", "RTX_4090", "rtx4090", "GeForce RTX 4090"])
def test_lookup_of_consumer_names(name):
    assert find_gpu(name).key == "rtx-4090"


def test_bundled_values_are_sane(gpus):
    for gpu in gpus.values():
        where = gpu.path
        assert gpu.memory_usable_bytes <= gpu.memory_marketed_bytes, where
        # ECC on GDDR6 costs 1/16 and B300 reserves ~7%; anything lower smells like a unit error.
        assert gpu.memory_usable_bytes >= 0.9 * gpu.memory_marketed_bytes, where
        assert gpu.memory_marketed_bytes % GiB == 0, where  # every label is a whole number of GiB
        assert 10**11 <= gpu.bandwidth_bytes_per_s <= 10**14, where
        assert gpu.price_per_hour is None, where  # never invent prices
        assert gpu.confidence in CONFIDENCE_LEVELS, where
        assert gpu.memory_usable_source.startswith(("measured:", "estimate:")), where
        assert gpu.source and gpu.name and gpu.vendor in {"NVIDIA", "AMD", "Intel"}, where
        for precision, flops in gpu.dense_flops.items():
            assert precision in PRECISIONS and 10**12 <= flops <= 10**17, (where, precision)
        if gpu.interconnect_bytes_per_s is not None:
            assert 10**9 <= gpu.interconnect_bytes_per_s <= 10**13, where
        assert gpu.tdp_w is None or 50 <= gpu.tdp_w <= 2000, where


def test_estimates_follow_the_one_documented_rule(gpus):
    estimated = {k for k, g in gpus.items() if g.usable_is_estimate}
    assert estimated == {  # the list in hw_profiles/README.md
        "a100-pcie-40", "a100-pcie-80", "h100-pcie", "gh200-144", "v100-pcie-16", "v100-pcie-32",
        "mi250x", "mi325x", "mi355x", "gaudi2", "gaudi3",
        # issue 22's parts without a public torch total: workstation, China-market and unified-memory parts
        "rtx-a6000", "rtx-a4500", "rtx-pro-6000-workstation", "h200-nvl", "h800", "a800", "mi300a",
        "rtx-a5000",  # round 35: LMCache#3430's card (its log prints no device total)
        # issue 21's corpus coverage: the MI100 of llama.cpp's ROCm benchmarks
        "mi100",
        # issue 22's RDNA3 cards (no torch total in a citable issue)
        "radeon-pro-w7900", "rx-7900-xtx",
    }
    rules = {gpus[k].memory_usable_source for k in estimated}
    assert len(rules) == 1 and "0.9825" in rules.pop()
    for key in estimated:
        gpu = gpus[key]
        expected_mib = math.floor(Decimal(gpu.memory_marketed_bytes // MiB) * Decimal("0.9825"))
        assert gpu.memory_usable_bytes == expected_mib * MiB, key


def test_golden_datasheet_numbers(gpus):
    h100 = gpus["h100-sxm"]
    # NVIDIA H100 SXM datasheet via aiconfigurator h100_sxm.yaml (gpus.yaml): 3.35 TB/s, 989 TFLOPS BF16 dense,
    # NVLink4 450 GB/s per direction, 700 W; "80GB" HBM3 = 80 GiB.
    assert h100.bandwidth_bytes_per_s == 3_350_000_000_000
    assert h100.dense_flops["bf16"] == 989 * T and h100.dense_flops["fp8"] == 1978 * T
    assert h100.interconnect_bytes_per_s == 450_000_000_000 and h100.tdp_w == 700
    assert h100.memory_marketed_bytes == 80 * GiB == 85_899_345_920
    # design.md: torch reports an H100 80GB as 79.18 GiB total (vLLM log).
    assert h100.memory_usable_bytes == round(Decimal("79.18") * GiB)
    # aiconfigurator a100_sxm.yaml: 2.039 TB/s, 312 TFLOPS BF16.
    assert gpus["a100-sxm-80"].bandwidth_bytes_per_s == 2_039_000_000_000
    assert gpus["a100-sxm-80"].dense_flops["bf16"] == 312 * T
    # torch's CUDA OOM messages on H200: "total capacity of 139.80 GiB" (nvidia-smi: 143771 MiB);
    # aiconfigurator h200_sxm.yaml: 4800 GB/s.
    assert gpus["h200-sxm"].memory_usable_bytes == 143_155 * MiB  # 139.80 GiB, down to a whole MiB
    assert gpus["h200-sxm"].bandwidth_bytes_per_s == 4_800_000_000_000
    # aiconfigurator l4.yaml: "121TFLOPS (dense; NVIDIA specs list 242TFLOPS with sparsity)".
    assert gpus["l4"].dense_flops["bf16"] == 121 * T
    # MI300X: 192GB HBM3 (ROCm table header 'VRAM (GiB)'), 5.3 TB/s, FP8 2614.9 TFLOPS dense.
    mi300x = gpus["mi300x"]
    assert mi300x.memory_marketed_bytes == 192 * GiB and mi300x.bandwidth_bytes_per_s == 5_300 * 10**9
    assert mi300x.dense_flops["fp8"] == 2_614_900_000_000_000
    # design.md: RTX 3090 torch total 23.58 GiB. aiconfigurator b200_sxm.yaml: FP4 9 PFLOPS dense.
    assert gpus["rtx-3090"].memory_usable_bytes == round(Decimal("23.58") * GiB)
    assert gpus["b200"].dense_flops["fp4"] == 9_000 * T
    # NVIDIA T4 product brief (PNY): 16 GB GDDR6, up to 320 GB/s, 70 W.
    assert gpus["t4"].memory_marketed_bytes == 16 * GiB and gpus["t4"].bandwidth_bytes_per_s == 320 * 10**9
    # MI250X is profiled per GCD: half of the module's 128GB / 3.2 TB/s.
    assert gpus["mi250x"].memory_marketed_bytes == 64 * GiB
    assert gpus["mi250x"].bandwidth_bytes_per_s == 1_600 * 10**9
    # ROCm's MI100 microarchitecture page (ROCm/ROCm@e396b489 docs/conceptual/gpu-arch/mi100.md): 1.228 TB/s HBM2,
    # matrix FP16 184.6 and BF16 92.3 TFLOPS; its GPU specs table: VRAM 32 GiB.
    mi100 = gpus["mi100"]
    assert mi100.bandwidth_bytes_per_s == 1_228 * 10**9 and mi100.memory_marketed_bytes == 32 * GiB
    assert mi100.dense_flops["fp16"] == 184_600 * 10**9 and mi100.dense_flops["bf16"] == 92_300 * 10**9
    # NVIDIA's H200 product page, H200 NVL column: BF16 / FP16 Tensor Core 1,671 TFLOPS and FP8 / INT8 3,341, each
    # "With sparsity": dense is half, 835.5 and 1,670.5 T (below the SXM's 989 / 1,979 at its 700 W)
    nvl = gpus["h200-nvl"].dense_flops
    assert nvl["bf16"] == nvl["fp16"] == 1_671 * T // 2 and nvl["fp8"] == nvl["int8"] == 3_341 * T // 2


def test_gpu_is_frozen_and_hashable(gpus):
    gpu = gpus["h100-sxm"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.tdp_w = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        gpu.dense_flops["bf16"] = 1  # type: ignore[index]
    assert {gpu, gpus["h200-sxm"]} and hash(gpu) == hash(load_gpus()["h100-sxm"])


def test_import_is_light():
    code = ("import sys, kvplan.hardware.gpus; "
            "print(sorted(m for m in ('torch', 'plotly', 'huggingface_hub', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


# --- user profiles -------------------------------------------------------------------------

BASE = {
    "key": "my-gpu", "name": "My GPU", "vendor": "Acme", "aliases": ["mine"],
    "memory_marketed": "48GB GDDR6", "memory_marketed_bytes": 48 * GiB, "memory_usable_bytes": 46068 * MiB,
    "memory_usable_source": "measured: nvidia-smi 46068 MiB", "bandwidth_bytes_per_s": 864 * 10**9,
    "dense_flops": {"bf16": 362 * T}, "interconnect": {"type": "PCIe Gen4 x16", "per_dir_bytes_per_s": 32 * 10**9},
    "tdp_w": 350, "price_per_hour": 1.25, "source": "my own measurement", "confidence": "high",
}


def write_profile(directory: Path, data, name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name or data.get('key', 'profile')}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return path


def test_user_dir_extends_and_overrides(tmp_path, gpus):
    write_profile(tmp_path, BASE)
    faster_h100 = {**yaml.safe_load((PROFILES_DIR / "h100-sxm.yaml").read_text()), "bandwidth_bytes_per_s": 4 * T,
                   "price_per_hour": 2.5}
    path = write_profile(tmp_path, faster_h100)
    merged = load_gpus([tmp_path])
    assert len(merged) == len(gpus) + 1
    assert merged["my-gpu"].price_per_hour == 1.25 and find_gpu("MINE", [tmp_path]).key == "my-gpu"
    h100 = find_gpu("h100", [tmp_path])
    assert h100.bandwidth_bytes_per_s == 4 * T and h100.price_per_hour == 2.5 and h100.path == str(path)
    assert load_gpus(str(tmp_path))["my-gpu"].key == "my-gpu"  # a single dir as a string works too
    assert load_gpus()["h100-sxm"].bandwidth_bytes_per_s == 3_350_000_000_000  # bundled copy untouched


def test_later_user_dir_wins(tmp_path):
    write_profile(tmp_path / "a", BASE)
    write_profile(tmp_path / "b", {**BASE, "tdp_w": 300})
    assert find_gpu("my-gpu", [tmp_path / "a", tmp_path / "b"]).tdp_w == 300


def test_user_profile_minimal_fields(tmp_path):
    minimal = {k: BASE[k] for k in ("key", "name", "vendor", "memory_marketed", "memory_marketed_bytes",
                                    "memory_usable_bytes", "memory_usable_source", "bandwidth_bytes_per_s",
                                    "source", "confidence")}
    write_profile(tmp_path, minimal)
    gpu = load_gpus([tmp_path])["my-gpu"]
    assert gpu.aliases == () and dict(gpu.dense_flops) == {} and gpu.interconnect_type is None
    assert gpu.tdp_w is None and gpu.price_per_hour is None and gpu.notes == ""
    # no hardware facts: None, never a default (engines state what they assume: tests/test_gpu_facts.py)
    assert gpu.compute_capability is gpu.capability is gpu.device_name is gpu.interconnect_kind is None
    assert gpu.fp8 is gpu.fp4 is gpu.architecture is gpu.memory_kind is None


def test_user_profile_with_facts(tmp_path):
    facts = {**BASE, "vendor": "AMD", "architecture": "cdna3", "compute_capability": "gfx942", "memory_kind": "hbm3",
             "fp8": True, "fp4": False, "device_name": "AMD Instinct MI300X",
             "interconnect": {"type": "xGMI", "kind": "xgmi", "domain": 8, "pcie_gen": 5, "pcie_lanes": 16}}
    gpu = load_gpus([write_profile(tmp_path, facts).parent])["my-gpu"]
    assert (gpu.capability, gpu.memory_kind, gpu.interconnect_kind, gpu.interconnect_domain) \
        == ((9, 4), "HBM3", "xgmi", 8)
    assert (gpu.pcie_gen, gpu.pcie_lanes, gpu.fp8, gpu.fp4) == (5, 16, True, False)


@pytest.mark.parametrize("make", [lambda p: p / "nope", lambda p: write_profile(p, BASE)])
def test_missing_profiles_dir_is_an_error(tmp_path, make):
    target = make(tmp_path)
    with pytest.raises(KvplanError) as err:
        load_gpus([target])
    assert err.value.exit_code == EXIT_NOT_FOUND and str(target) in str(err.value)


def _without(field):
    return {k: v for k, v in BASE.items() if k != field}


@pytest.mark.parametrize(
    "data, field, expect",
    [
        (_without("bandwidth_bytes_per_s"), "bandwidth_bytes_per_s", "missing required field"),
        ({**BASE, "bandwidth_bytes_per_s": "3.35TB/s"}, "bandwidth_bytes_per_s",
         "must be a positive integer, got '3.35TB/s'"),
        ({**BASE, "bandwidth_bytes_per_s": 3.35e12}, "bandwidth_bytes_per_s", "positive integer"),
        ({**BASE, "memory_usable_bytes": -5}, "memory_usable_bytes", "got -5"),
        ({**BASE, "memory_usable_bytes": 49 * GiB}, "memory_usable_bytes", "exceeds"),
        ({**BASE, "tdp_w": True}, "tdp_w", "positive integer or null"),
        ({**BASE, "confidence": "very"}, "confidence", "one of high, medium, low"),
        ({**BASE, "bandwith_bytes_per_s": 1}, "bandwith_bytes_per_s", "unknown field"),
        ({**BASE, "dense_flops": {"fp9": 1}}, "dense_flops", "unknown precision"),
        ({**BASE, "dense_flops": {"bf16": "362T"}}, "dense_flops.bf16", "positive integer"),
        ({**BASE, "dense_flops": [362]}, "dense_flops", "mapping"),
        ({**BASE, "interconnect": "NVLink"}, "interconnect", "mapping"),
        ({**BASE, "interconnect": {"type": "x", "per_dir_bytes_per_s": 0}}, "interconnect.per_dir_bytes_per_s",
         "positive"),
        ({**BASE, "memory_usable_source": "nvidia-smi"}, "memory_usable_source", "'measured:' or 'estimate:'"),
        # a measured link rate: with its source, at most the datasheet's
        ({**BASE, "interconnect": {"type": "x", "per_dir_bytes_per_s": 64 * 10**9,
                                   "achieved_per_dir_bytes_per_s": 48 * 10**9}},
         "interconnect.achieved_per_dir_bytes_per_s", "go together"),
        ({**BASE, "interconnect": {"type": "x", "per_dir_bytes_per_s": 64 * 10**9,
                                   "achieved_per_dir_bytes_per_s": 65 * 10**9, "achieved_source": "a blog"}},
         "interconnect.achieved_per_dir_bytes_per_s", "exceeds"),
        ({**BASE, "interconnect": {"type": "x", "achieved_per_dir_bytes_per_s": 48 * 10**9, "achieved_source": "a"}},
         "interconnect.achieved_per_dir_bytes_per_s", "exceeds"),
        # the hardware facts (README "Hardware facts"): typed, and agreeing with the vendor and dense_flops
        ({**BASE, "vendor": "NVIDIA", "compute_capability": 9.0}, "compute_capability", 'quoted string like "9.0"'),
        ({**BASE, "vendor": "NVIDIA", "compute_capability": "gfx942"}, "compute_capability", "major.minor"),
        ({**BASE, "vendor": "AMD", "compute_capability": "9.4"}, "compute_capability", 'gfx target like "gfx942"'),
        ({**BASE, "compute_capability": "sm90"}, "compute_capability", '"9.0" or "gfx942"'),
        ({**BASE, "architecture": "Hopper"}, "architecture", "lowercase name"),
        ({**BASE, "memory_kind": "HMB3"}, "memory_kind", "one of HBM2"),
        ({**BASE, "fp8": "yes"}, "fp8", "true or false"),
        ({**BASE, "dense_flops": {"fp8": 10**15}, "fp8": False}, "fp8", "gives an fp8 rate"),
        ({**BASE, "device_name": ""}, "device_name", "non-empty string"),
        ({**BASE, "interconnect": {"type": "x", "kind": "nvlink"}}, "interconnect.kind", "one of nvswitch"),
        ({**BASE, "interconnect": {"type": "x", "kind": "nvswitch"}}, "interconnect.kind", "NVIDIA fabric"),
        ({**BASE, "vendor": "NVIDIA", "interconnect": {"type": "x", "kind": "pcie", "domain": 8}},
         "interconnect.domain", "a 'pcie' fabric"),
        ({**BASE, "interconnect": {"type": "x", "domain": 0}}, "interconnect.domain", "positive integer"),
        ({**BASE, "interconnect": {"type": "x", "pcie_lanes": 12}}, "interconnect.pcie_lanes", "1, 2, 4, 8, 16"),
        ({**BASE, "interconnect": {"type": "x", "bandwidth": 1}}, "interconnect", "'kind', 'domain'"),
        ({**BASE, "memory_usable_above_torch": "yes"}, "memory_usable_above_torch", "true or false"),
        ({**BASE, "key": "My GPU"}, "key", "lowercase"),
        ({**BASE, "aliases": [4090]}, "aliases", "list of strings"),
        ({**BASE, "aliases": "mine"}, "aliases", "list of strings"),
        ({**BASE, "price_per_hour": -1}, "price_per_hour", "positive number"),
        ({**BASE, "price_per_hour": float("nan")}, "price_per_hour", "positive number"),
        ({**BASE, "name": ""}, "name", "non-empty string"),
        ({**BASE, "aliases": ["h100"]}, "aliases", "clashes with GPU 'h100-sxm'"),
        ({**BASE, "key": "h-100"}, "key", "clashes with GPU 'h100-sxm'"),
        ([BASE], None, "must be a mapping"),
        ("key: my-gpu\nname: [unclosed\n", None, "invalid YAML at line"),
        ("key: my-gpu\n  name: x\n", None, "invalid YAML at line 2"),
    ],
)
def test_bad_profile_gives_one_line_naming_file_and_field(tmp_path, data, field, expect):
    path = write_profile(tmp_path, data, name="bad")
    with pytest.raises(KvplanError) as err:
        load_gpus([tmp_path])
    message = str(err.value)
    assert err.value.exit_code == EXIT_USAGE
    assert "\n" not in message and message.startswith(f"hw profile {path}: ")
    if field:
        assert f"'{field}'" in message
    assert expect in message


def test_duplicate_key_in_one_dir(tmp_path):
    write_profile(tmp_path, BASE, name="a")
    second = write_profile(tmp_path, {**BASE, "aliases": []}, name="b")
    with pytest.raises(KvplanError) as err:
        load_gpus([tmp_path])
    assert str(second) in str(err.value) and "'key'" in str(err.value) and "already defined" in str(err.value)


def test_alias_clash_between_user_dirs(tmp_path):
    write_profile(tmp_path / "a", BASE)
    other = write_profile(tmp_path / "b", {**BASE, "key": "other-gpu"})
    with pytest.raises(KvplanError) as err:
        load_gpus([tmp_path / "a", tmp_path / "b"])
    assert str(other) in str(err.value) and "'aliases'" in str(err.value) and "'mine'" in str(err.value)


# --- unknown names -------------------------------------------------------------------------


@pytest.mark.parametrize("name, close", [("h1000", "h100"), ("h1000", "h200"), ("mi300", "mi300x"),
                                         ("rtx4080", "rtx-4090"), ("gaudi", "gaudi3"), ("l40x", "l40s")])
def test_unknown_gpu_suggests_close_matches(name, close):
    with pytest.raises(KvplanError) as err:
        find_gpu(name)
    message = str(err.value)
    assert err.value.exit_code == EXIT_NOT_FOUND and "\n" not in message
    assert message.startswith(f"unknown GPU {name!r}; did you mean: ")
    assert close in message.split("did you mean: ")[1].rstrip("?").split(", ")


def test_unknown_gpu_without_close_match():
    with pytest.raises(KvplanError) as err:
        find_gpu("xyzzy")
    assert err.value.exit_code == EXIT_NOT_FOUND and "no close match" in str(err.value)


# --- agreement with the team's collected datasheet facts -----------------------------------

# our key -> (gpus.yaml name, scale): scale 0.5 for MI250X, profiled per GCD.
SHARED_NAMES = {
    "a100-sxm-40": "A100-SXM4-40GB", "a100-sxm-80": "A100-SXM4-80GB", "a100-pcie-40": "A100-PCIe-40GB",
    "a100-pcie-80": "A100-PCIe-80GB", "h100-sxm": "H100-SXM5-80GB", "h100-pcie": "H100-PCIe-80GB",
    "h100-nvl": "H100-NVL-94GB", "h200-sxm": "H200-SXM-141GB", "h20": "H20-96GB", "gh200": "GH200",
    "gh200-144": "GH200", "b200": "B200", "b300": "B300", "gb200": "GB200", "gb300": "GB300", "l4": "L4",
    "l40s": "L40S", "a10g": "A10G", "a10": "A10", "t4": "T4", "v100-sxm2-16": "V100-SXM2-16GB",
    "v100-sxm2-32": "V100-SXM2-32GB", "v100-pcie-16": "V100-PCIe-16GB/32GB", "v100-pcie-32": "V100-PCIe-16GB/32GB",
    "rtx-3090": "RTX-3090", "rtx-4090": "RTX-4090", "rtx-5090": "RTX-5090",
    "rtx-pro-6000-server": "RTX-PRO-6000-Blackwell-Server", "mi250x": "MI250X", "mi300x": "MI300X",
    "mi325x": "MI325X", "mi355x": "MI355X", "gaudi2": "Gaudi2", "gaudi3": "Gaudi3",
}
# Bundled GPUs gpus.yaml has no row for (issue 22): their facts come from the sources their profiles cite.
NOT_IN_SHARED = {"rtx-a6000", "rtx-6000-ada", "rtx-a4500", "rtx-pro-6000-workstation", "h200-nvl", "h800", "a800",
                 "l20", "l40", "gb10", "mi300a", "mi100", "radeon-pro-w7900", "rx-7900-xtx", "rtx-5080",
                 "rtx-a5000"}
# Deliberate differences, each explained in the profile's source/notes.
DEVIATIONS = {
    ("t4", "mem_bw_GBps"),  # 320 GB/s from the NVIDIA product brief; gpus.yaml has the rounded 0.3 TB/s
    ("rtx-4090", "mem_bw_GBps"),  # 1008 GB/s (Tom's Hardware table) vs the rounded "1 TB/s"
    ("rtx-5090", "mem_bw_GBps"),  # 1792 GB/s vs the rounded "1.8 TB/s"
    ("rtx-3090", "fp16_dense_tflops"),  # gpus.yaml's 35.58 is the shader rate; we use the tensor rate
}
FLOPS_FIELDS = {"bf16_dense_tflops": "bf16", "fp16_dense_tflops": "fp16", "fp8_dense_tflops": "fp8",
                "int8_dense_tops": "int8", "fp4_dense_tflops": "fp4"}


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@pytest.mark.skipif(not (SHARED / "gpus.yaml").is_file(),
                    reason=f"{SHARED}/gpus.yaml not present (the shared notes live outside this repository)")
def test_profiles_agree_with_shared_gpus_yaml(gpus):
    shared = yaml.safe_load((SHARED / "gpus.yaml").read_text())["gpus"]
    assert set(SHARED_NAMES) | NOT_IN_SHARED == set(gpus) and not set(SHARED_NAMES) & NOT_IN_SHARED
    checked = 0
    for key, shared_name in SHARED_NAMES.items():
        ours, theirs = gpus[key], shared[shared_name]
        scale = Decimal("0.5") if key == "mi250x" else Decimal(1)
        bw = _number(theirs.get("mem_bw_GBps"))
        if bw is not None and (key, "mem_bw_GBps") not in DEVIATIONS:
            assert ours.bandwidth_bytes_per_s == int(Decimal(str(bw)) * 10**9 * scale), key
            checked += 1
        for field, precision in FLOPS_FIELDS.items():
            value = _number(theirs.get(field))
            if value is not None and (key, field) not in DEVIATIONS:
                assert ours.dense_flops.get(precision) == int(Decimal(str(value)) * T * scale), (key, field)
                checked += 1
        reported = theirs.get("mem_reported")
        if reported and key != "gh200-144":
            # nvidia-smi's total, or less: where torch's own total is known kvplan uses it (CUDA keeps
            # some memory back: H200 143771 MiB in nvidia-smi, 139.80 GiB = 143155 MiB in torch; the
            # largest gap measured is GB300's, 284208 MiB vs 276.50 GiB = 283136 MiB, 1.05 GiB).
            smi = int(reported["value"].split()[0]) * MiB
            assert smi - 11 * GiB // 10 <= ours.memory_usable_bytes <= smi, key
            # a profile left at the tool's total says so in its data (the planner warns about it)
            assert ours.memory_usable_above_torch == (ours.memory_usable_bytes == smi), key
            assert ours.memory_usable_source.startswith("measured:"), key
            checked += 1
        tdp = _number(theirs.get("tdp_w"))
        if tdp is not None:
            assert ours.tdp_w == tdp, key
    assert checked > 100


# nvidia-smi --query-gpu=name (and torch.cuda.get_device_name) strings, from the driver's product table
# (NVIDIA/open-gpu-kernel-modules README.md, "Supported NVIDIA GPU Products", PCI ids in the profiles'
# comments) and, for Volta and AMD, from public collect_env / rocm-smi logs. Issue 15: accepted as aliases.
NVIDIA_SMI_NAMES = {
    "NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H100 PCIe": "h100-pcie", "NVIDIA H100 NVL": "h100-nvl",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80", "NVIDIA A100-SXM4-40GB": "a100-sxm-40",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80", "NVIDIA A100-PCIE-40GB": "a100-pcie-40", "NVIDIA H200": "h200-sxm",
    "NVIDIA H20": "h20", "NVIDIA GH200 480GB": "gh200", "NVIDIA GH200 144G HBM3e": "gh200-144",
    "NVIDIA B200": "b200", "NVIDIA GB200": "gb200", "NVIDIA B300 SXM6 AC": "b300", "NVIDIA GB300": "gb300",
    "NVIDIA L40S": "l40s", "NVIDIA L4": "l4", "Tesla T4": "t4", "NVIDIA A10": "a10", "NVIDIA A10G": "a10g",
    "NVIDIA GeForce RTX 3090": "rtx-3090", "NVIDIA GeForce RTX 4090": "rtx-4090", "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000-server",
    "Tesla V100-SXM2-32GB": "v100-sxm2-32", "Tesla V100-SXM2-16GB": "v100-sxm2-16",
    "Tesla V100-PCIE-32GB": "v100-pcie-32", "Tesla V100-PCIE-16GB": "v100-pcie-16", "AMD Instinct MI300X": "mi300x",
    # issue 22: workstation and China-market NVIDIA parts, GB10; AMD as torch, rocm-smi / amd-smi and ray name them
    # (ROCm/vllm#359 product_name 'AMD Instinct MI300X OAM'; vllm#16263 market_name 'MI300X-O'; ray's table in
    # nlzy/vllm-gfx906#49: AMD-Instinct-MI250X-MI250, -MI300A, -MI325X-OAM, -MI355X-OAM)
    "NVIDIA RTX A6000": "rtx-a6000", "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada", "NVIDIA RTX A4500": "rtx-a4500",
    "NVIDIA RTX A5000": "rtx-a5000",  # round 35 (LMCache#3430's card), the board name as for the A4500 and A6000
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "rtx-pro-6000-workstation", "NVIDIA H200 NVL": "h200-nvl",
    "NVIDIA H800": "h800", "NVIDIA A800-SXM4-80GB": "a800", "NVIDIA L20": "l20", "NVIDIA L40": "l40",
    "NVIDIA GB10": "gb10",
    "NVIDIA GeForce RTX 5080": "rtx-5080",  # nvidia-smi in SlimRAG/MinerU-docker README@2f07a352 (issue 22)
    "AMD Instinct MI300X OAM": "mi300x", "MI300X-O": "mi300x",
    "AMD-Instinct-MI250X-MI250": "mi250x", "AMD Instinct MI250X/MI250": "mi250x", "AMD-Instinct-MI300A": "mi300a",
    "AMD-Instinct-MI325X-OAM": "mi325x", "AMD-Instinct-MI355X-OAM": "mi355x",
}


@pytest.mark.parametrize("name,key", sorted(NVIDIA_SMI_NAMES.items()))
def test_nvidia_smi_names_are_aliases(name, key):
    assert find_gpu(name).key == key
