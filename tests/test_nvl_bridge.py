"""The H100 NVL's and H200 NVL's NVLink bridges (issue 22): known, left unpriced on purpose (docs/speed-history.md,
Tried and not adopted), so tensor parallel on them prices over the host's PCIe and every plan says so."""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.speed.coverage import link_gaps


@pytest.mark.parametrize("key", ["h100-nvl", "h200-nvl"])
def test_a_bridged_pair_prices_over_pcie_and_says_so(key):
    gpu = find_gpu(key)
    assert gpu.interconnect_kind == "nvlink-bridge" and gpu.interconnect_domain == 2
    assert not gpu.interconnect_bytes_per_s
    # PCIe Gen5 x16: 3.938 GB/s a lane (PCI-SIG, 32 GT/s with 128b/130b) x 16 = 63.0 GB/s a direction
    (line,) = link_gaps([gpu], 2)
    assert f"GPU {key}'s profile states no link bandwidth" in line and "PCIe Gen5 x16, 63.0 GB/s" in line


@pytest.mark.parametrize("key, bridge", [("h100-nvl", "600 GB/s"), ("h200-nvl", "900 GB/s")])
def test_the_bridge_figure_a_user_would_set_is_in_the_profile(key, bridge):
    # NVIDIA's H100 product page, H100 NVL column: "NVIDIA NVLink: 600GB/s"; H200 NVL: "900GB/s per GPU"
    assert bridge in find_gpu(key).notes + find_gpu(key).source
