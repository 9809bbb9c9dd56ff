"""Every GPU-count split reads the GPU's own node (kvplan.planning.deploy.node_of): the default split
(`deployment_for_gpus`), sweep's grid and `sweep --layouts` (kvplan.compare.sweep.node_groups), cheapest's counts
(`count_splits`) and the smallest-fit search. A GB200 NVL72 tray holds 4 GPUs (the profile's node_gpus, from
NVIDIA's GB200 NVL72 spec: 18 compute trays of 2 Grace CPUs and 4 Blackwell GPUs); an H100 board is assumed 8.
"""

from __future__ import annotations

from typer.testing import CliRunner

from kvplan.cli.main import whole_app
from kvplan.compare.candidates import search_layouts, smallest_fitting
from kvplan.compare.cheapest import cheapest
from kvplan.compare.sweep import node_notes, sweep
from kvplan.engines import resolve_engine
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment, count_splits, deployment_for_gpus
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog

H100, GB200 = find_gpu("h100-sxm"), find_gpu("gb200")
L405 = find_in_catalog("llama-3.1-405b")  # 128 heads, 8 KV heads, 126 layers


def _tp_pp(plans, gpu) -> set:
    return {(p.deployment.tp, p.deployment.pp, p.deployment.dp) for p in plans if p.gpu == gpu.key}


def test_the_default_split_keeps_tp_within_the_node_given():
    # by hand: the widest power-of-two tp within the node that divides the count, then pp for the rest
    assert deployment_for_gpus(L405, 8) == Deployment(8, 1)  # nodes of 8 (NODE_GPUS)
    assert deployment_for_gpus(L405, 8, 4) == Deployment(4, 2)  # GB200 trays: tp 4 x pp 2
    assert deployment_for_gpus(L405, 16, 4) == Deployment(4, 4)
    assert deployment_for_gpus(L405, 6, 4) == Deployment(2, 3)  # 4 does not divide 6; tp 2 x pp 3
    assert deployment_for_gpus(L405, 12, 6) == Deployment(4, 3)  # a node of 6: the widest power of two, 4
    assert count_splits(L405, [8, 16], node=4) == [Deployment(4, 2), Deployment(4, 4)]


def test_sweep_splits_each_gpu_within_its_own_node():
    res = sweep([L405], [GB200, H100], [8], [32768])
    assert _tp_pp(res.plans, GB200) == {(4, 2, 1)}  # one grid covered both before: tp 8 on the trays too
    assert _tp_pp(res.plans, H100) == {(8, 1, 1)}


def test_sweep_layouts_search_each_grid_within_its_node():
    # by hand, the 8-GPU layouts with tp | 4 (the GB200 tray): tp 1 (1,1,8) (1,2,4) (1,4,2) (1,8,1); tp 2 (2,1,4)
    # (2,2,2) (2,4,1); tp 4 (4,1,2) (4,2,1). sweep --layouts keeps the best of them, the one fit --gpus 8 ranks first
    engine = resolve_engine(None, None, [])
    req = Request(context=32768)
    res = sweep([L405], [GB200, H100], [8], [32768], layouts=True, engine=engine)
    by_hand = {(1, 1, 8), (1, 2, 4), (1, 4, 2), (1, 8, 1), (2, 1, 4), (2, 2, 2), (2, 4, 1), (4, 1, 2), (4, 2, 1)}
    (gb,) = _tp_pp(res.plans, GB200)
    assert gb in by_hand
    assert gb == _tp_pp(search_layouts(L405, GB200, 8, req, engine)[:1], GB200).pop()
    (h,) = _tp_pp(res.plans, H100)  # the H100's search still reaches tp 8 (nodes of 8 assumed)
    assert h == _tp_pp(search_layouts(L405, H100, 8, req, engine)[:1], H100).pop()
    assert h[0] == 8


def test_sweep_says_the_node_it_assumed():
    assert node_notes([GB200, H100], [8], layouts=False) == [
        "GPU counts split with tensor parallelism within one node, 4 GPUs per node, the GPU profile's node_gpus "
        "(gb200)"]
    assert node_notes([GB200, H100], [4], layouts=False) == []  # no count past a node: nothing assumed shows
    assert len(node_notes([GB200, H100], [4], layouts=True)) == 2  # the search always says it, as fit's does
    res = CliRunner().invoke(whole_app(), ["sweep", "-m", "llama-3.1-405b", "--gpu", "gb200", "--gpu-counts", "8",
                                           "--ctx", "32k", "--layouts"])
    assert res.exit_code == 0, res.output
    assert "note: layouts keep tensor parallelism within one node, 4 GPUs per node" in res.stderr


def test_cheapest_and_the_smallest_fit_read_the_gpus_node():
    (c,) = [c for c in cheapest(L405, [GB200], 32768, 1, deployments=lambda node: count_splits(L405, [8], node=node))]
    assert (c.deployment.tp, c.deployment.pp) == (4, 2)
    engine = resolve_engine(None, None, [])
    best = smallest_fitting(L405, GB200, Request(context=32768, batch=64), engine)
    assert best.plan.deployment.gpus > 4 and best.plan.deployment.tp == 4  # 810 GB of weights: past one tray


def test_sweep_names_the_gpus_of_a_node_size_group_it_skips():
    # by hand, 512 GPUs of llama-3.1-405b (126 layers): nodes of 8 (h100-sxm, assumed) give tp 8 x pp 64, 64 stages
    # of 126 layers, planned; trays of 4 (gb200, gb300: node_gpus 4) give tp 4 x pp 128, 128 stages > 126 layers,
    # then tp 2 x pp 256 and tp 1 x pp 512, none valid: the trays' group alone is skipped, and its line names them
    app = whole_app()
    args = ["sweep", "-m", "llama-3.1-405b", "--ctx", "8k", "--gpu-counts", "512"]
    res = CliRunner().invoke(app, [*args, "--gpu", "h100,gb200,gb300"])
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("skipped: ")]
    assert line.startswith("skipped: llama-3.1-405b: 512 GPUs (tp 4 × pp 128) on gb200, gb300 skipped, "), line
    # one group, every GPU of the sweep: nothing to tell apart, no names
    res = CliRunner().invoke(app, [*args, "--gpu", "gb200,gb300"])
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("skipped: ")]
    assert line.startswith("skipped: llama-3.1-405b: 512 GPUs (tp 4 × pp 128) skipped, "), line
    # the whole catalog: its nodes-of-8 group is every profile but the trays, tp 8 x pp 64 planned; 1,024 GPUs skip
    # both groups (tp 8 x pp 128 and tp 4 x pp 256 past 126 layers), the long one named by three and a count, so the
    # names fit an 80-column terminal's line
    res = CliRunner().invoke(app, [*args[:-1], "1024", "--gpu", "all", "--top", "0"])
    lines = [x for x in res.stderr.splitlines() if x.startswith("skipped: ")]
    assert len(lines) == 2, res.stderr
    names = [x.split(") on ", 1)[1].split(" skipped, ")[0] for x in lines]
    assert names[1] == "gb200, gb300" and names[0].endswith(" more"), names
    assert all(len(n) <= 80 for n in names) and names[0].count(", ") == 2, names
