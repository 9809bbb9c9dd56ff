"""The hardware facts engine rules read from a GPU profile, never its key or name: their vocabularies, the
checks on a profile's fact fields, and what a rule assumes where a profile leaves one out.

The facts (schema and sources: kvplan/hardware/profiles/README.md, "Hardware facts"): `architecture`,
`compute_capability` (CUDA's "M.m", AMD's gfx target), `memory_kind`, `fp8`/`fp4` tensor math, `device_name`
(as the driver names the device), `sm_count` (multiprocessors: NVIDIA SMs, AMD compute units), `node_gpus` (the
GPUs one host shows, where the part fixes the host: a GB200 NVL72 compute tray's 4), and under
`interconnect` the fabric: `kind`, `domain` (GPUs one reaches over it), `pcie_gen`, `pcie_lanes`. Every one is
optional so that profiles written before them still load; a missing fact is None, never a default. An engine rule that
needs one assumes what such a profile got before (ASSUMED_CAPABILITY, assumed_fact) and its engine says so as a plan
warning (kvplan.engines.base.Engine.assumptions).
"""

from __future__ import annotations

import re
from typing import Any

FACT_FIELDS = ("architecture", "compute_capability", "memory_kind", "bf16", "fp8", "fp4", "fp16_accumulates_fp16",
               "device_name", "node_gpus")
# The scale-up fabric (interconnect.kind). nvswitch: NVLink through NVSwitch chips (HGX 8-GPU boards, NVL72
# racks), where CUDA multicast exists; nvlink-bridge: NVLink bridges between PCIe cards (H100 NVL pairs);
# nvlink-direct: NVLink wired GPU to GPU on the board, no switch (V100 SXM2's hybrid cube mesh, GH200 NVL2);
# pcie: PCIe only; xgmi: AMD Infinity Fabric links; roce: Intel Gaudi's on-chip RoCE Ethernet ports.
INTERCONNECT_KINDS = ("nvswitch", "nvlink-bridge", "nvlink-direct", "pcie", "xgmi", "roce")
# `type` and `per_dir_bytes_per_s` as before these facts; `achieved_per_dir_bytes_per_s` what a published collective
# benchmark measured over the fabric (an all-reduce's bus bandwidth), with `achieved_source` naming it.
# `allreduce_us` what a published collective benchmark measured for one all-reduce by GPUs and message bytes
# ({gpus: [[bytes, microseconds], ...]}, bytes ascending), with `allreduce_source` naming it.
INTERCONNECT_FIELDS = ("type", "kind", "domain", "per_dir_bytes_per_s", "pcie_gen", "pcie_lanes",
                       "achieved_per_dir_bytes_per_s", "achieved_source", "allreduce_us", "allreduce_source")
_FABRIC_VENDOR = {"nvswitch": "NVIDIA", "nvlink-bridge": "NVIDIA", "nvlink-direct": "NVIDIA", "xgmi": "AMD"}
FULL_MESH = ("nvswitch", "xgmi")  # fabrics whose `domain` GPUs are linked pair by pair (NVLink / xGMI): fully_connected
PARTIAL = ("pcie", "nvlink-bridge")  # fabrics that link no more than two GPUs directly
NVLINK_KINDS = tuple(kind for kind, maker in _FABRIC_VENDOR.items() if maker == "NVIDIA")  # GPUs with NVLink links
MEMORY_KINDS = ("HBM2", "HBM2e", "HBM3", "HBM3e", "HBM4", "GDDR6", "GDDR6X", "GDDR7", "LPDDR5", "LPDDR5X")
_NVIDIA_CC_RE = re.compile(r"^(\d{1,2})\.(\d)$")  # "9.0", "10.3", "12.0"
_AMD_GFX_RE = re.compile(r"^gfx(\d{1,2})([0-9a-f])([0-9a-f])$")  # "gfx90a", "gfx942", "gfx1100"
_ARCH_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")

# What an engine rule takes for a fact a profile leaves out: what such a profile got before these fields,
# when rules keyed on names it did not match (Marlin kernels, no NVFP4 swizzle, no workspace, SGLang fusion
# on NVIDIA but not on AMD). Stated as a plan warning by the rule's engine; never silent.
# an Ampere part; an AMD part before gfx942, CDNA2's gfx90a (MI250X), which a rule testing the target's name reads
ASSUMED_TARGET = {"NVIDIA": "8.0", "AMD": "gfx90a"}
ASSUMED_FACTS = ("compute_capability", "interconnect.kind", "device_name", "sm_count")
# The multiprocessor count a rule assumes where a profile gives none: the H100 SXM's (132 SMs, NVIDIA's Hopper
# whitepaper), the log corpus's machine, on which the constants beside the rules that read it were fitted.
ASSUMED_SM_COUNT = 132


def parse_capability(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of an NVIDIA compute capability ("10.3") or an AMD gfx target ("gfx942" -> (9, 4), as
    torch.cuda.get_device_capability reports it on ROCm); None for None or another form."""
    if not text:
        return None
    m = _NVIDIA_CC_RE.match(text) or _AMD_GFX_RE.match(text)
    return (int(m.group(1)), int(m.group(2), 16)) if m else None


ASSUMED_CAPABILITY = {vendor: parse_capability(target) for vendor, target in ASSUMED_TARGET.items()}  # (8, 0), (9, 0)


def fully_connected(gpu, ranks: int) -> bool | None:
    """Whether `ranks` GPUs of this profile are linked pair by pair, as the engines' custom all-reduce asks before it
    builds one for more than two ranks (CUDA: NVML's NVLink state for every pair; ROCm: one xGMI hop for every pair,
    kvplan.engines.custom_allreduce): True inside a full-mesh domain (FULL_MESH) that holds them, False on PCIe or
    bridged pairs (PARTIAL), None where the profile does not say (no `interconnect.kind`, or NVLink wired GPU to GPU,
    where not every pair is linked: DGX-1's hybrid cube mesh)."""
    kind = getattr(gpu, "interconnect_kind", None)
    if kind in FULL_MESH:
        return (getattr(gpu, "interconnect_domain", None) or 0) >= ranks
    return False if kind in PARTIAL else None


def vendor_of(gpu) -> str:
    """The profile's vendor in capitals ("NVIDIA", "AMD"), "" where it names none."""
    return str(getattr(gpu, "vendor", "")).upper()


def unified(gpu) -> bool:
    """Whether the GPU shares its memory with the host (the profile's `memory_unified`: GB10, GH200, MI300A), which
    each engine's free-memory reading on such a device follows (kvplan.engines.*.uma)."""
    return bool(getattr(gpu, "memory_unified", False))


def capability_of(gpu) -> tuple[int, int] | None:
    """The (major, minor) an engine rule reads: the profile's, else ASSUMED_CAPABILITY for its vendor
    (NVIDIA, AMD); None for other vendors and for a GPU known only by its memory (vendor "unknown")."""
    cap = getattr(gpu, "capability", None)
    return cap if cap is not None else ASSUMED_CAPABILITY.get(vendor_of(gpu))


def fact_missing(gpu, name: str) -> bool:
    """Whether the profile leaves out a fact an engine rule reads (one of ASSUMED_FACTS); a GPU known only
    by its memory (GPU.of_memory) lacks them all, and its callers state what they assume."""
    field = {"interconnect.kind": "interconnect_kind"}.get(name, name)
    return getattr(gpu, field, None) is None


def runs_bf16(gpu) -> bool:
    """Whether `gpu` does BF16 math (bf16_fact); where it does not (Volta, Turing) engines run a bf16 checkpoint,
    and its cache, in fp16."""
    return bf16_fact(gpu)[0]


def bf16_fact(gpu) -> tuple[bool, str]:
    """Whether `gpu` does BF16 math, and how kvplan knows where the profile has no `bf16` field ("" where it has).

    Inferred from the compute capability: NVIDIA's BF16 tensor math starts at 8.0 (Ampere; torch 2.13.0 wheel,
    torch/cuda/__init__.py L204, is_bf16_supported: `get_device_properties(device).major >= 8`; below it only
    emulation); AMD's at gfx908 (MI100, CDNA's MFMA BF16 instructions; gpuopen.com "AMD matrix cores" lab note,
    MI100's BF16 matrix rate) and on RDNA3's WMMA (gfx11 and later), none on gfx900/gfx906 or RDNA1/2 (gfx10).
    Without either: a `dense_flops.bf16` rate, else assumed, as every profile was before this fact."""
    said = getattr(gpu, "bf16", None)
    if said is not None:
        return said, ""
    cc = getattr(gpu, "compute_capability", None) or ""
    vendor = vendor_of(gpu)
    nvidia, amd = _NVIDIA_CC_RE.match(cc), _AMD_GFX_RE.match(cc)
    if vendor == "NVIDIA" and nvidia:
        return int(nvidia.group(1)) >= 8, f"inferred from compute capability {cc} (bf16 from 8.0)"
    if vendor == "AMD" and amd:
        major, rest = int(amd.group(1)), int(amd.group(2) + amd.group(3), 16)
        return (major == 9 and rest >= 0x08) or major >= 11, f"inferred from {cc} (bf16 from gfx908)"
    if "bf16" in (getattr(gpu, "dense_flops", None) or {}):
        return True, "inferred from its dense_flops.bf16 rate"
    return True, "assumed: the profile gives neither bf16 nor a compute capability"


def assumed_fact(gpu, fact: str) -> str:
    """What engine rules take for `fact` (one of ASSUMED_FACTS) where the profile leaves it out, in words."""
    if fact == "compute_capability":
        vendor = vendor_of(gpu)
        return {"NVIDIA": "compute capability 8.0 (an Ampere part)", "AMD": "gfx90a (a part before gfx942)"}.get(
            vendor, "no compute capability")
    if fact == "interconnect.kind":
        return "no NVSwitch"
    if fact == "sm_count":
        return f"{ASSUMED_SM_COUNT} multiprocessors (an H100 SXM's)"
    return f"the profile's name ({getattr(gpu, 'name', '')!r}) as the device name"


def read_interconnect(check, ic: Any, vendor: Any) -> dict:
    """The GPU fields of a profile's `interconnect` (null, or a mapping of INTERCONNECT_FIELDS), checked with
    `check` (gpu_profile._Checker: one-line errors naming the file and the field)."""
    out = dict(interconnect_type=None, interconnect_bytes_per_s=None, interconnect_kind=None,
               interconnect_domain=None, pcie_gen=None, pcie_lanes=None, interconnect_achieved_bytes_per_s=None,
               interconnect_achieved_source=None, interconnect_allreduce=(), interconnect_allreduce_source=None)
    if ic is None:
        return out
    if not isinstance(ic, dict) or set(ic) - set(INTERCONNECT_FIELDS) or "type" not in ic:
        check.bad("interconnect", "null or a mapping with 'type' and optionally "
                  + ", ".join(f"'{f}'" for f in INTERCONNECT_FIELDS[1:]), ic)
    out["interconnect_type"] = check.text("interconnect.type", ic["type"])
    out["interconnect_bytes_per_s"] = check.pos_int("interconnect.per_dir_bytes_per_s", ic.get("per_dir_bytes_per_s"),
                                                    nullable=True)
    kind = ic.get("kind")
    if kind is not None and kind not in INTERCONNECT_KINDS:
        check.bad("interconnect.kind", "one of " + ", ".join(INTERCONNECT_KINDS), kind)
    maker = _FABRIC_VENDOR.get(kind)
    if maker and str(vendor or "").strip().upper() != maker:
        check.fail(f"field 'interconnect.kind' {kind!r} is an {maker} fabric, but 'vendor' is {vendor!r}")
    domain = check.pos_int("interconnect.domain", ic.get("domain"), nullable=True)
    if kind == "pcie" and domain not in (None, 1):
        check.fail(f"field 'interconnect.domain' is {domain}, but a 'pcie' fabric reaches no other GPU over a "
                   "scale-up link: 1")
    lanes = ic.get("pcie_lanes")
    if lanes is not None and (isinstance(lanes, bool) or lanes not in (1, 2, 4, 8, 16)):
        check.bad("interconnect.pcie_lanes", "1, 2, 4, 8, 16 or null", lanes)
    out.update(interconnect_kind=kind, interconnect_domain=domain, pcie_lanes=lanes,
               pcie_gen=check.pos_int("interconnect.pcie_gen", ic.get("pcie_gen"), nullable=True))
    out.update(read_achieved_link(check, ic, out["interconnect_bytes_per_s"]))
    out.update(read_allreduce(check, ic, domain))
    return out


def read_allreduce(check, ic: dict, domain: int | None) -> dict:
    """`interconnect.allreduce_us` ({gpus: [[message bytes, microseconds], ...]}: one all-reduce's measured time
    among 2..domain GPUs of the fabric, bytes ascending) and the `allreduce_source` it needs, as
    ((gpus, ((bytes, seconds), ...)), ...)."""
    table, source = ic.get("allreduce_us"), ic.get("allreduce_source")
    if table is None and source is None:
        return {}
    if table is None or source is None:
        check.fail("fields 'interconnect.allreduce_us' and 'interconnect.allreduce_source' go together")
    want = "a mapping of GPUs (2 .. domain) to [[bytes, microseconds], ...], bytes ascending"
    if not isinstance(table, dict) or not table:
        check.bad("interconnect.allreduce_us", want, table)
    out = []
    for n, rows in sorted(table.items()):
        ok = isinstance(n, int) and not isinstance(n, bool) and 2 <= n <= (domain or 0) and isinstance(rows, list)
        points = [r for r in rows if isinstance(r, list) and len(r) == 2] if ok else []
        ok = ok and len(points) == len(rows) > 0 and all(
            isinstance(b, int) and not isinstance(b, bool) and b > 0 and isinstance(t, (int, float))
            and not isinstance(t, bool) and 0 < t < float("inf") for b, t in points)
        if not ok or any(a[0] >= b[0] for a, b in zip(points, points[1:])):
            check.bad(f"interconnect.allreduce_us.{n}", want, rows)
        out.append((n, tuple((int(b), float(t) * 1e-6) for b, t in points)))
    return dict(interconnect_allreduce=tuple(out),
                interconnect_allreduce_source=check.text("interconnect.allreduce_source", source))


def read_achieved_link(check, ic: dict, datasheet: int | None) -> dict:
    """`interconnect.achieved_per_dir_bytes_per_s` (a measured all-reduce bus bandwidth over the fabric, at most
    `per_dir_bytes_per_s`) and the `achieved_source` it needs, checked as the profile's other achieved rates."""
    value = check.pos_int("interconnect.achieved_per_dir_bytes_per_s", ic.get("achieved_per_dir_bytes_per_s"),
                          nullable=True)
    source = ic.get("achieved_source")
    if value is None and source is None:
        return {}
    if value is None or source is None:
        check.fail("fields 'interconnect.achieved_per_dir_bytes_per_s' and 'interconnect.achieved_source' go together")
    if not datasheet or value > datasheet:
        check.fail(f"field 'interconnect.achieved_per_dir_bytes_per_s' ({value}) exceeds "
                   f"'interconnect.per_dir_bytes_per_s' ({datasheet})")
    return dict(interconnect_achieved_bytes_per_s=value,
                interconnect_achieved_source=check.text("interconnect.achieved_source", source))


def read_facts(check, d: dict, flops: dict) -> dict:
    """The GPU fields of a profile's FACT_FIELDS, checked with `check` against the vendor and the
    dense_flops table where they overlap."""
    out = {}
    arch = d.get("architecture")
    if arch is not None and (not isinstance(arch, str) or not _ARCH_RE.match(arch)):
        check.bad("architecture", "a lowercase name like 'hopper' or 'cdna3'", arch)
    out["architecture"] = arch
    cc = d.get("compute_capability")
    if cc is not None:
        want, pattern = {"NVIDIA": ('a quoted string like "9.0" (CUDA\'s major.minor)', _NVIDIA_CC_RE),
                         "AMD": ('a gfx target like "gfx942"', _AMD_GFX_RE)}.get(
            str(d.get("vendor", "")).strip().upper(), ('a quoted string like "9.0" or "gfx942"', None))
        if not isinstance(cc, str) or not (pattern.match(cc) if pattern else parse_capability(cc)):
            check.bad("compute_capability", want, cc)
    out["compute_capability"] = cc
    kind = d.get("memory_kind")
    if kind is not None:
        canon = {k.lower(): k for k in MEMORY_KINDS}.get(kind.lower()) if isinstance(kind, str) else None
        if canon is None:
            check.bad("memory_kind", "one of " + ", ".join(MEMORY_KINDS), kind)
        kind = canon
    out["memory_kind"] = kind
    for name in ("bf16", "fp8", "fp4"):
        value = d.get(name)
        if value is not None:
            check.flag(name, value)
            if value is False and name in flops:
                check.fail(f"field '{name}' is false, but 'dense_flops.{name}' gives an {name} rate")
        out[name] = value
    half = d.get("fp16_accumulates_fp16")  # dense_flops.fp16 is a GeForce FP16-accumulate headline
    if half is not None:
        check.flag("fp16_accumulates_fp16", half)
    out["fp16_accumulates_fp16"] = half
    name = d.get("device_name")
    out["device_name"] = None if name is None else check.text("device_name", name)
    out["node_gpus"] = check.pos_int("node_gpus", d.get("node_gpus"), nullable=True)
    return out
