"""The H100 NVL's and H200 NVL's NVLink bridges (issue 22): the pair's link bandwidth from NVIDIA's product pages,
and tensor parallel past the bridged pair back on the host's PCIe."""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.speed.terms import PCIE_BYTES_PER_LANE_S, link, ring_latency


# NVIDIA's H100 product page, H100 NVL column: "NVIDIA NVLink: 600GB/s" (both directions of the bridge together);
# NVIDIA's H200 product page, H200 NVL column: "2- or 4-way NVIDIA NVLink bridge: 900GB/s per GPU". A direction
# carries half, as the SXM parts' 900 GB/s NVLink 4 carries 450 (aiconfigurator h100_sxm.yaml intra_node_bw).
@pytest.mark.parametrize("key, bidirectional", [("h100-nvl", 600e9), ("h200-nvl", 900e9)])
def test_a_bridged_pair_all_reduces_over_its_bridge(key, bidirectional):
    gpu = find_gpu(key)
    assert gpu.interconnect_kind == "nvlink-bridge" and gpu.interconnect_domain == 2
    assert gpu.interconnect_bytes_per_s == bidirectional / 2
    bw, lat = link(gpu, 2)
    # NCCL's ring / LL latency over NVLink: baseLat 6.6 us + 2 x (2 - 1) x hwLat 0.6 us = 7.8 us
    assert (bw, lat) == (bidirectional / 2, pytest.approx(7.8e-6))


@pytest.mark.parametrize("key", ["h100-nvl", "h200-nvl"])
def test_four_cards_cross_the_hosts_pcie(key):
    # the bridge joins a pair (the profiles' domain 2; a 4-way H200 NVL bridge is a profile of one's own): TP 4
    # crosses PCIe Gen5 x16, 3.938 GB/s a lane (PCI-SIG, 32 GT/s with 128b/130b) x 16 = 63.0 GB/s a direction, at
    # NCCL's PCIe latency 6.6 + 2 x 3 x 1.0 = 12.6 us
    bw, lat = link(find_gpu(key), 4)
    assert bw == pytest.approx(3.938e9 * 16) == PCIE_BYTES_PER_LANE_S[5] * 16
    assert lat == pytest.approx(12.6e-6) == ring_latency("pcie", 4)
