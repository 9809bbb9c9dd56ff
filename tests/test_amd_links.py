"""AMD Instinct scale-up links: the profiles' Infinity Fabric bandwidth and the all-reduce time the speed terms give it.

Hand arithmetic from AMD's white papers, which the profiles cite:
  * 'Introducing AMD CDNA 3 Architecture': Infinity Fabric links 'operate at up to 32Gbps', 16 lanes each;
    MI300X and MI325X: '7 x16 AMD Infinity Fabric links, 1x16 PCIe Gen 5 to host CPU', 'fully connected 8-GPU
    system', 'P2P ring peak aggregate I/O bandwidth 896 GB/s (8 GPUs)'. One link: 16 x 32 Gb/s / 8 = 64 GB/s each
    way; seven: 448 GB/s each way (x 2 = 896 GB/s both ways). MI300A: two links to each of 3 peers, 384 GB/s.
  * 'AMD CDNA 4 Architecture' (MI355X): links at 38.4 Gbps, '76.8GB/s in each direction'; 7 x 76.8 = 537.6 GB/s
    each way (1075.2 GB/s both ways, its P2P ring aggregate).
NCCL's (and RCCL's, its fork) ring LL latency: baseLat 6.6 us + 2(n-1) x hwLat 0.6 us (NVIDIA/nccl
src/graph/tuning.cc), xGMI read as NVLink.
What RCCL achieves over the MI300X's mesh (AMD's ROCm blog 'Understanding RCCL Bandwidth and xGMI Performance on
AMD Instinct MI300X', 2 March 2025, ROCm/rocm-blogs@0e81c2ca blogs/software-tools-optimization/mi300x-rccl-xgmi/
README.md): rccl-tests all_reduce_perf on 8 GPUs, 16 GiB, busbw 318.98 GB/s (busbw = algbw x 2(n-1)/n, the ring
formula's per-direction bandwidth); its TransferBench run measured each link at 45.1-47.2 GB/s.
"""

from __future__ import annotations

import pytest

from kvplan.hardware.gpus import find_gpu
from kvplan.speed.allreduce import link
from kvplan.speed.terms import TERMS, Shape, features

MI300X, MI325X, MI355X, MI300A = (find_gpu(k) for k in ("mi300x", "mi325x", "mi355x", "mi300a"))


def test_profiles_state_the_white_papers_infinity_fabric_bandwidth():
    assert MI300X.interconnect_bytes_per_s == 7 * 16 * 32e9 / 8 == 448e9
    assert MI325X.interconnect_bytes_per_s == 448e9  # the same platform (CDNA 3 white paper, Table 2)
    assert MI355X.interconnect_bytes_per_s == 7 * 16 * 38.4e9 / 8 == 537.6e9
    assert MI300A.interconnect_bytes_per_s == 3 * 2 * 16 * 32e9 / 8 == 384e9
    assert (MI300X.pcie_gen, MI300X.pcie_lanes) == (5, 16)  # 'x16 PCIe Gen 5 link' to the host


def test_a_full_mesh_splits_a_gpus_links_among_its_peers():
    # MI325X, the same CDNA 3 platform with no published measurement: 8 of 8, all 7 links, 448 GB/s;
    # latency 6.6 + 2 x 7 x 0.6 = 15.0 us; 4 of 8: 3 links, 3 x 64 = 192 GB/s; 2 of 8: the one link, 64 GB/s
    bw, lat = link(MI325X, 8)
    assert bw == pytest.approx(448e9) and lat == pytest.approx(15.0e-6)
    assert link(MI325X, 4)[0] == pytest.approx(192e9)
    assert link(MI325X, 2)[0] == pytest.approx(64e9)
    assert link(MI355X, 2)[0] == pytest.approx(76.8e9)
    # MI300A, 4 of 4: 2 links to each of 3 peers, 384 GB/s; 2 of 4: 2 links, 128 GB/s
    assert link(MI300A, 4)[0] == pytest.approx(384e9)
    assert link(MI300A, 2)[0] == pytest.approx(128e9)


def test_mi300x_links_run_at_rccls_measured_all_reduce_bandwidth():
    # the blog's 8-GPU all-reduce: 318.98 GB/s, 71% of the white paper's 448; 4 of 8 over 3 of the 7 links:
    # 318.98 x 3 / 7 = 136.71 GB/s; 2 of 8 over one: 318.98 / 7 = 45.57 GB/s, inside the 45.1-47.2 GB/s the same
    # post's TransferBench measured on each single link; the latency stays NCCL's ring model (the blog's 8-GPU
    # all-reduce of 1-64 KiB took 12.7-13.8 us, against 15.0 here)
    assert MI300X.interconnect_bytes_per_s == 448e9 and MI300X.interconnect_achieved_bytes_per_s == 318.98e9
    bw, lat = link(MI300X, 8)
    assert bw == pytest.approx(318.98e9) and lat == pytest.approx(15.0e-6)
    assert link(MI300X, 4)[0] == pytest.approx(136.71e9, rel=1e-4)
    pair = link(MI300X, 2)[0]
    assert pair == pytest.approx(45.57e9, rel=1e-4) and 45.1e9 < pair < 47.2e9
    # beyond the mesh the host's PCIe, as for any profile: the measured fabric rate is not read there
    assert link(MI300X, 16)[0] == pytest.approx(16 * 3.938e9)


def test_beyond_the_mesh_a_gpu_reaches_others_over_its_pcie_gen5_x16():
    # 16 GPUs: two nodes; the host link, PCIe Gen 5 x16 = 16 x 3.938 GB/s = 63.0 GB/s (PCI-SIG, per direction),
    # on a network: 6.6 + 2 x 15 x 2.7 = 87.6 us
    bw, lat = link(MI300X, 16)
    assert bw == pytest.approx(16 * 3.938e9) and lat == pytest.approx(87.6e-6)


def test_deepseek_r1_tp8_all_reduce_per_token_on_mi300x():
    # DeepSeek-R1 (config.json: 61 layers, hidden 7168), TP 8: 2 all-reduces a layer of 7168 x 2 bytes a token,
    # ring 2 x 7/8 of it over RCCL's measured 318.98 GB/s: 2 x 61 x 1.75 x 14,336 / 318.98e9 = 9.60 us a token, so
    # a 32,768-token prefill chunk spends 0.314 s in all-reduce (0.224 s over the white paper's 448 GB/s; over
    # PCIe Gen 4 x16, 31.5 GB/s, what an unset link was priced at, 3.18 s).
    bw, lat = link(MI300X, 8)
    s = Shape(dense_bytes=0, layers=61, hidden=7168, tp=8, bandwidth=5.3e12, link_bandwidth=bw, link_latency_s=lat)
    comm = features(s, 32_768, 1, 0, 0)[TERMS.index("comm")]
    assert comm == pytest.approx(2 * 61 * 1.75 * 32_768 * 14_336 / 318.98e9)
    assert comm == pytest.approx(0.3144, rel=1e-3)
