"""One GPU profile: the `GPU` record kvplan plans against, and a profile file's fields read into it, each checked
(schema: kvplan/hardware/profiles/README.md; one-line errors naming the file and the field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from kvplan.hardware.facts import FACT_FIELDS, parse_capability, read_facts, read_interconnect
from kvplan.hardware.profile_check import CONFIDENCE_LEVELS, ProfileChecker, norm_name
from kvplan.hardware.yaml_strict import load_yaml_strict, show

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
USABLE_SOURCE_PREFIXES = ("measured:", "estimate:")
_REQUIRED = ("key", "name", "vendor", "memory_marketed", "memory_marketed_bytes", "memory_usable_bytes",
             "memory_usable_source", "bandwidth_bytes_per_s", "source", "confidence")
_OPTIONAL = ("aliases", "dense_flops", "interconnect", "tdp_w", "price_per_hour", "notes", "memory_usable_above_torch",
             "memory_unified", "sm_count", "achieved_bandwidth_bytes_per_s", "achieved_bandwidth_source",
             "memory_smi_bytes", "achieved_dense_flops", "achieved_dense_flops_source",
             *FACT_FIELDS)
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


@dataclass(frozen=True)
class GPU:
    """One accelerator as kvplan sees it. Byte and FLOP figures are exact integers."""

    key: str
    name: str
    vendor: str
    aliases: tuple[str, ...]
    memory_marketed: str
    memory_marketed_bytes: int
    memory_usable_bytes: int  # what the allocator sees in total; plan with this one
    memory_usable_source: str  # "measured: ..." or "estimate: ..."
    bandwidth_bytes_per_s: int
    dense_flops: Mapping[str, int] = field(hash=False)  # read-only; precision -> FLOP/s (dense)
    interconnect_type: str | None
    interconnect_bytes_per_s: int | None  # per direction
    tdp_w: int | None
    price_per_hour: float | None
    source: str
    confidence: str
    notes: str
    path: str  # the file this profile came from
    # True when memory_usable_bytes is a tool's device total (nvidia-smi, NVML, OpenCL) where no torch total
    # was found: torch and vLLM see less (0.46-1.05 GiB on the GPUs where both were measured)
    memory_usable_above_torch: bool = False
    # True where the CPU, the OS and the GPU share one memory pool (GB10, MI300A): what the OS and other processes
    # hold at run time comes out of the same bytes (kvplan/hardware/profiles/README.md, Memory)
    memory_unified: bool = False
    # Hardware facts engines read (never the key or the name). None: the profile does not say (an old user
    # profile); an engine rule that needs a missing fact states what it assumed (a plan warning).
    architecture: str | None = None  # "ampere", "hopper", "blackwell", "cdna3", "gaudi2", ...
    compute_capability: str | None = None  # NVIDIA "9.0"; AMD the gfx target, "gfx942"
    memory_kind: str | None = None  # "HBM3", "GDDR6X", ... (one of facts.MEMORY_KINDS)
    bf16: bool | None = None  # BF16 math; false (Volta, Turing): a bf16 checkpoint runs, and caches, in fp16
    fp8: bool | None = None  # FP8 tensor (matrix) math
    fp4: bool | None = None  # FP4 tensor math (NVFP4 / MXFP4)
    # True: dense_flops.fp16 is a GeForce FP16-accumulate headline; an engine's FP32-accumulate fp16 GEMM runs at half
    # it, the bf16 figure (kvplan.speed.compute_dtype.sixteen_bit)
    fp16_accumulates_fp16: bool | None = None
    device_name: str | None = None  # as torch.cuda.get_device_name / nvidia-smi print it
    # GPUs one host (one OS, one torch.cuda.device_count()) shows where the part fixes its host (a GB200 or GB300
    # NVL72 compute tray: 4); None where servers differ (HGX boards of 4 or 8, GH200 servers of 1, 2 or 4)
    node_gpus: int | None = None
    interconnect_kind: str | None = None  # one of facts.INTERCONNECT_KINDS
    interconnect_domain: int | None = None  # GPUs one GPU reaches over that fabric (8 HGX, 72 NVL72, 1 PCIe)
    pcie_gen: int | None = None  # the host link
    pcie_lanes: int | None = None
    sm_count: int | None = None  # multiprocessors as torch's multi_processor_count reports them (NVIDIA SMs, AMD CUs)
    # Device-memory bandwidth a published bandwidth-bound benchmark measured on this part (bytes/s, at most the
    # datasheet's), and where it comes from; None where no measurement was found (the speed terms then read the
    # datasheet's `bandwidth_bytes_per_s`)
    achieved_bandwidth_bytes_per_s: int | None = None
    achieved_bandwidth_source: str | None = None
    # the device total nvidia-smi prints (`--query-gpu=memory.total`, MiB, as bytes), which SGLang sizes its defaults
    # by; None where no profile source gives it
    memory_smi_bytes: int | None = None
    # Dense matmul FLOP/s a published matmul benchmark measured on this part, per precision it measured (each at most
    # the datasheet's `dense_flops` for it), and where it comes from; empty where none was found (the speed terms then
    # run GEMMs at the datasheet's rate: kvplan.speed.compute_dtype.read_flops)
    achieved_dense_flops: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    achieved_dense_flops_source: str | None = None
    # The scale-up fabric's per-direction bandwidth a published collective benchmark measured (an all-reduce's bus
    # bandwidth over the whole domain, at most `interconnect_bytes_per_s`), and where; None: the speed terms read
    # the datasheet's (kvplan.speed.allreduce.link)
    interconnect_achieved_bytes_per_s: int | None = None
    interconnect_achieved_source: str | None = None
    # One all-reduce's measured time by GPUs and message bytes, ((gpus, ((bytes, seconds), ...)), ...), and where;
    # empty: the speed terms price the ring from the link (kvplan.speed.allreduce.allreduce_table)
    interconnect_allreduce: tuple = ()
    interconnect_allreduce_source: str | None = None

    @property
    def capability(self) -> tuple[int, int] | None:
        """(major, minor) as torch.cuda.get_device_capability reports it: "9.0" -> (9, 0); on ROCm the gfx
        target's major and minor, "gfx942" -> (9, 4), "gfx90a" -> (9, 0). None when the profile gives none."""
        return parse_capability(self.compute_capability)

    @property
    def usable_is_estimate(self) -> bool:
        return self.memory_usable_source.startswith("estimate:")

    @classmethod
    def of_memory(cls, key: str, name: str, usable_bytes: int, source: str) -> GPU:
        """A GPU known only by its memory (a log's total, an assumed size): no bandwidth, no price, no
        hardware facts (its callers state what the engine rules assume instead)."""
        return cls(key, name, "unknown", (), "", usable_bytes, usable_bytes, source, 1, MappingProxyType({}),
                   None, None, None, None, source, "low", "", "")


class _Checker(ProfileChecker):
    """A GPU profile's fields (kvplan/hardware/profiles/README.md)."""

    def flag(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.bad(name, "true or false", value)
        return value

    def pos_int(self, name: str, value: Any, nullable: bool = False) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.bad(name, "a positive integer" + (" or null" if nullable else ""), value)
        return value

    def achieved(self, datasheet: int) -> tuple[int | None, str | None]:
        """The measured bandwidth and its source: both or neither, the figure at most the datasheet's."""
        d = self.data
        value, source = d.get("achieved_bandwidth_bytes_per_s"), d.get("achieved_bandwidth_source")
        if value is None and source is None:
            return None, None
        value = self.pos_int("achieved_bandwidth_bytes_per_s", value)
        if source is None:
            self.fail("field 'achieved_bandwidth_bytes_per_s' needs 'achieved_bandwidth_source' (where it was "
                      "measured)")
        if value > datasheet:
            self.fail(f"field 'achieved_bandwidth_bytes_per_s' ({value}) exceeds 'bandwidth_bytes_per_s' ({datasheet})")
        return value, self.text("achieved_bandwidth_source", source)

    def dense_flops(self) -> dict:
        """The datasheet's dense rates: a mapping of known precisions to positive integers."""
        flops = self.data.get("dense_flops") or {}
        if not isinstance(flops, dict):
            self.bad("dense_flops", f"a mapping of precision ({', '.join(PRECISIONS)}) to FLOP/s", flops)
        for precision, value in flops.items():
            if precision not in PRECISIONS:
                self.fail(f"field 'dense_flops' has unknown precision {show(precision)} "
                          f"(allowed: {', '.join(PRECISIONS)})")
            self.pos_int(f"dense_flops.{precision}", value)
        return flops

    def achieved_flops(self, datasheet: dict) -> tuple[dict, str | None]:
        """The measured matmul rates and their source: both or neither, each at most the datasheet's rate for its
        precision; a measured bf16 rate on a profile that states fp16 alone (GeForce headlines, RTX A6000) is checked
        against that fp16 figure, the one kvplan.speed.compute_dtype.read_flops reads as bf16 there. A precision the
        datasheet does not rate at all may be measured (GB10: NVIDIA states FP4 with sparsity alone): the speed terms
        run at it, said as a measurement, while the roofline, on the datasheet's rates, still prices it at nothing."""
        d = self.data
        value, source = d.get("achieved_dense_flops"), d.get("achieved_dense_flops_source")
        if value is None and source is None:
            return {}, None
        if not isinstance(value, dict) or not value:
            self.bad("achieved_dense_flops", f"a mapping of precision ({', '.join(PRECISIONS)}) to FLOP/s", value)
        if source is None:
            self.fail("field 'achieved_dense_flops' needs 'achieved_dense_flops_source' (where it was measured)")
        for precision, rate in value.items():
            if precision not in PRECISIONS:
                self.fail(f"field 'achieved_dense_flops' has unknown precision {show(precision)} "
                          f"(allowed: {', '.join(PRECISIONS)})")
            rated = precision if precision in datasheet or precision != "bf16" else "fp16"  # read_flops' bf16 reading
            self.pos_int(f"achieved_dense_flops.{precision}", rate)
            if rated in datasheet and rate > datasheet[rated]:
                self.fail(f"field 'achieved_dense_flops.{precision}' ({rate}) exceeds 'dense_flops.{rated}' "
                          f"({datasheet[rated]})")
        return dict(value), self.text("achieved_dense_flops_source", source)

    def build(self) -> GPU:
        d = self.data
        self.known_fields(_REQUIRED, _OPTIONAL)
        key = self.text("key", d["key"])
        if not _KEY_RE.match(key):
            self.bad("key", "a lowercase id of letters, digits, '.', '+' or '-' (like 'h100-sxm')", key)
        aliases = d.get("aliases") or []
        if not isinstance(aliases, list):
            self.bad("aliases", "a list of strings", aliases)
        for alias in aliases:
            if not isinstance(alias, str) or not norm_name(alias):
                self.bad("aliases", "a list of strings (quote numbers like \"4090\")", alias)
        marketed = self.pos_int("memory_marketed_bytes", d["memory_marketed_bytes"])
        usable = self.pos_int("memory_usable_bytes", d["memory_usable_bytes"])
        if usable > marketed:
            self.fail(f"field 'memory_usable_bytes' ({usable}) exceeds 'memory_marketed_bytes' ({marketed})")
        usable_source = self.text("memory_usable_source", d["memory_usable_source"])
        if not usable_source.startswith(USABLE_SOURCE_PREFIXES):
            self.bad("memory_usable_source", "a string starting with 'measured:' or 'estimate:'", usable_source)
        flops = self.dense_flops()
        achieved_flops, achieved_flops_source = self.achieved_flops(flops)
        bandwidth = self.pos_int("bandwidth_bytes_per_s", d["bandwidth_bytes_per_s"])
        achieved, achieved_source = self.achieved(bandwidth)
        fabric = read_interconnect(self, d.get("interconnect"), d.get("vendor"))
        facts = read_facts(self, d, flops)
        price = d.get("price_per_hour")
        if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float))
                                  or not 0 < price < float("inf")):
            self.bad("price_per_hour", "a positive number or null", price)
        confidence = d["confidence"]
        if confidence not in CONFIDENCE_LEVELS:
            self.bad("confidence", "one of " + ", ".join(CONFIDENCE_LEVELS), confidence)
        notes = d.get("notes")
        smi = self.pos_int("memory_smi_bytes", d.get("memory_smi_bytes"), nullable=True)
        if smi is not None and not usable <= smi <= marketed:
            self.fail(f"field 'memory_smi_bytes' ({smi}) is not between 'memory_usable_bytes' ({usable}) and "
                      f"'memory_marketed_bytes' ({marketed})")
        return GPU(
            key=key, name=self.text("name", d["name"]), vendor=self.text("vendor", d["vendor"]),
            aliases=tuple(a.strip() for a in aliases),
            memory_marketed=self.text("memory_marketed", d["memory_marketed"]),
            memory_marketed_bytes=marketed, memory_usable_bytes=usable, memory_usable_source=usable_source,
            bandwidth_bytes_per_s=bandwidth,
            dense_flops=MappingProxyType(dict(flops)),
            tdp_w=self.pos_int("tdp_w", d.get("tdp_w"), nullable=True),
            price_per_hour=None if price is None else float(price),
            source=self.text("source", d["source"]), confidence=confidence,
            notes="" if notes is None else self.text("notes", notes), path=self.path,
            memory_usable_above_torch=self.flag("memory_usable_above_torch", d.get("memory_usable_above_torch", False)),
            memory_unified=self.flag("memory_unified", d.get("memory_unified", False)),
            sm_count=self.pos_int("sm_count", d.get("sm_count"), nullable=True), memory_smi_bytes=smi,
            achieved_bandwidth_bytes_per_s=achieved, achieved_bandwidth_source=achieved_source,
            achieved_dense_flops=MappingProxyType(achieved_flops), achieved_dense_flops_source=achieved_flops_source,
            **fabric, **facts,
        )


def parse_profile(text: str, path: str) -> GPU:
    """A profile file's text (at `path`, for the messages) as a GPU, every field checked."""
    return _Checker(path, load_yaml_strict(text, f"hw profile {path}")).build()
