"""`kvplan gpus`: the GPU catalog (memory, bandwidth, dense FLOPs, aliases; --json adds the hardware facts)."""

import typer

from kvplan.cli._common import HwOpt, JsonOpt, cli_errors, markup_safe, print_result, table
from kvplan.hardware.gpus import load_gpus


def register(app: typer.Typer) -> None:
    app.command()(gpus)


@cli_errors
def gpus(hw_profiles: HwOpt = None, as_json: JsonOpt = False):
    """List the GPU catalog: memory, bandwidth, dense FLOPs, alias counts (--json lists every alias)."""
    catalog = load_gpus(hw_profiles or ())
    data = [{
        "key": g.key, "name": g.name, "vendor": g.vendor, "aliases": list(g.aliases),
        "memory_marketed": g.memory_marketed, "memory_usable_bytes": g.memory_usable_bytes,
        "memory_usable_source": g.memory_usable_source, "memory_unified": g.memory_unified,
        "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
        "dense_flops": dict(g.dense_flops), "price_per_hour": g.price_per_hour,
        "architecture": g.architecture, "compute_capability": g.compute_capability, "memory_kind": g.memory_kind,
        "fp8": g.fp8, "fp4": g.fp4, "device_name": g.device_name, "sm_count": g.sm_count,
        "interconnect": {"type": g.interconnect_type, "kind": g.interconnect_kind, "domain": g.interconnect_domain,
                         "per_dir_bytes_per_s": g.interconnect_bytes_per_s, "pcie_gen": g.pcie_gen,
                         "pcie_lanes": g.pcie_lanes,
                         "achieved_per_dir_bytes_per_s": g.interconnect_achieved_bytes_per_s},
    } for g in catalog.values()]

    def render(console) -> None:
        # Usable memory (what kvplan plans with, to 2 decimals as fit says it; the marketed figure in --json), HBM
        # bandwidth and dense bf16 (else fp16) TFLOPS, numbers whole; the aliases counted (their names at 80 columns
        # took up to 7 lines a GPU), each in --json; the name last, left out (the caption says so) where it would wrap.
        t = table(["key", "GiB", "TB/s", "TFLOPS", "aliases", "name"], right=("GiB", "TB/s", "TFLOPS", "aliases"),
                  whole=("key",), optional=("name",), drop_first=("name",),
                  title="GiB: usable memory (2^30 B; what kvplan plans with, the marketed figure in --json); TB/s: "
                        "memory bandwidth (10^12 B/s); TFLOPS: dense bf16 (fp16 where no bf16); aliases: how "
                        "many other names --gpu takes (--json lists them)")
        for g in catalog.values():
            bf16 = dict(g.dense_flops).get("bf16") or dict(g.dense_flops).get("fp16")
            t.add_row(g.key, f"{g.memory_usable_bytes / 2**30:.2f}", f"{g.bandwidth_bytes_per_s / 1e12:g}",
                      f"{bf16 / 1e12:g}" if bf16 else "-", f"{len(g.aliases)}", markup_safe(g.name))
        console.print(t)

    print_result(as_json, data, render)
