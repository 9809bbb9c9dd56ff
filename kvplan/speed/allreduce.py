"""A collective's time over a GPU's fabric, as the speed terms' comm and latency price it: the link's per-direction
bandwidth and a ring call's latency (`link`), the profile's measured all-reduce times (`allreduce_table`,
`measured_allreduce`), a one-kernel custom all-reduce's latency on a fully connected fabric (`fabric_latency`).

Link latency per collective call, from the profile's `interconnect.kind`: NCCL's ring all-reduce
with the LL protocol costs baseLat + 2(n-1) x hwLat, baseLat 6.6 us, hwLat 0.6 us over NVLink and
1.0 us over PCIe (NVIDIA/nccl src/graph/tuning.cc, `baseLat` and `hwLat`, Ring/LL), 2.7 us on a
network (`NET`). Split from kvplan/speed/terms.py (round 45); the arithmetic unchanged.
"""

from __future__ import annotations

NCCL_BASE_LAT_S = 6.6e-6  # NVIDIA/nccl src/graph/tuning.cc baseLat, Ring / LL
NCCL_HW_LAT_S = {"nvswitch": 0.6e-6, "nvlink-bridge": 0.6e-6, "nvlink-direct": 0.6e-6, "xgmi": 0.6e-6,
                 "pcie": 1.0e-6, "roce": 2.7e-6}  # hwLat Ring / LL: NVLINK, PCI, NET (xgmi read as NVLink)
PCIE_BYTES_PER_LANE_S = {3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}  # PCI-SIG per lane, one direction
MESH_KINDS = ("xgmi",)  # fabrics with one direct link a peer: a GPU's bandwidth is split among its domain - 1 peers


def link(gpu, gpus: int) -> tuple[float, float]:
    """(per-direction bandwidth, latency of one ring all-reduce call) among `gpus` GPUs of this profile:
    its scale-up link within its domain (the profile's measured `achieved_per_dir_bytes_per_s` where it has one,
    the datasheet's otherwise), else the host's PCIe (gen and lanes from the profile, gen 4 x16 where it gives
    none). An xGMI domain is a full mesh, one Infinity Fabric link a peer (AMD's CDNA 3 white paper: 'seven ...
    links to form a fully connected 8-GPU system'), and the profile's bandwidth is all of a GPU's links: n GPUs of
    it reach each other over n - 1 of its domain - 1 links (MESH_KINDS)."""
    if gpus <= 1:
        return 0.0, 0.0
    kind = gpu.interconnect_kind or "pcie"
    bw = gpu.interconnect_achieved_bytes_per_s or gpu.interconnect_bytes_per_s  # measured where the profile has it
    domain = gpu.interconnect_domain or 1
    if not bw or gpus > domain:
        kind = "pcie" if gpus <= max(domain, 8) else "roce"
        gen, lanes = host_pcie(gpu)
        bw = PCIE_BYTES_PER_LANE_S.get(gen, 1.969e9) * lanes
    elif kind in MESH_KINDS:
        bw = bw * (gpus - 1) / (domain - 1)
    return float(bw), ring_latency(kind, gpus)


def host_pcie(gpu) -> tuple[int, int]:
    """(generation, lanes) of the host PCIe link `link` falls back to: the profile's, gen 4 x16 where it gives none."""
    return gpu.pcie_gen or 4, gpu.pcie_lanes or 16


def allreduce_table(gpu, gpus: int) -> tuple:
    """The profile's measured all-reduce times among `gpus` GPUs of its fabric, ((bytes, seconds), ...), or ()
    where it gives none for that many (the ring's link and latency then price it)."""
    return dict(gpu.interconnect_allreduce or ()).get(gpus, ()) if gpus > 1 else ()


def measured_allreduce(table: tuple, nbytes: float) -> float:
    """One all-reduce of `nbytes` from a measured table ((bytes, seconds), ... ascending): linear between the
    measured sizes, the smallest's time below them, the last two's slope (bandwidth) past the largest."""
    if nbytes <= table[0][0]:
        return table[0][1]
    if len(table) == 1:
        return table[0][1] * nbytes / table[0][0]
    for (b0, t0), (b1, t1) in zip(table, table[1:]):  # the segment holding nbytes; past the table, the last one's
        if nbytes <= b1:
            break
    return t0 + (t1 - t0) * (nbytes - b0) / (b1 - b0)


def fabric_latency(gpu, gpus: int) -> float:
    """Latency of one custom all-reduce call among `gpus` GPUs that one fabric connects all to all (an NVSwitch,
    NVLink or xGMI domain holding them; 0 otherwise: PCIe and networks keep the ring): NCCL's base latency and one
    hop, the two-rank ring's, whatever n, as the one-shot and two-shot kernels' ranks read every peer at once behind
    one barrier rather than pass the data round a ring of 2(n - 1) hops (kvplan.speed.model.CUSTOM_ALLREDUCE)."""
    kind = gpu.interconnect_kind or "pcie"
    bw = gpu.interconnect_achieved_bytes_per_s or gpu.interconnect_bytes_per_s
    if gpus <= 1 or kind in ("pcie", "roce") or not bw or gpus > (gpu.interconnect_domain or 1):
        return 0.0
    return ring_latency(kind, 2)


def ring_latency(kind: str, n: int) -> float:
    """NCCL's ring all-reduce latency among n ranks: baseLat + 2(n-1) x hwLat (LL protocol)."""
    return NCCL_BASE_LAT_S + 2 * (n - 1) * NCCL_HW_LAT_S.get(kind, NCCL_HW_LAT_S["pcie"])


def ring_allreduce_seconds(nbytes: float, n: int, bandwidth: float, latency: float) -> float:
    """One ring all-reduce of `nbytes` among n ranks: 2(n-1)/n x bytes / per-direction bandwidth + latency. A
    test-only reference (tests/test_speed.py): features prices the ring as its comm + latency terms."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth + latency
