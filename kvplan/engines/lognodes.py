"""The nodes a start-up log says it ran on: read where an engine prints a count, else the note that kvplan assumed it.

What each engine's log prints (read 2026-12-07):
* SGLang: its ServerArgs dump, `server_args=ServerArgs(... nnodes=2, node_rank=0 ...)` (`nnodes: int = 1`, 0.5.9
  wheel `server_args.py` L427), or the launch line's `--nnodes 2 --node-rank 0` (the multi-node flags of sglang#550,
  whose description runs `--tp 16 ... --nnodes 2 --node-rank 0` on each of two nodes). tp_size x pp_size is a
  multiple of nnodes (`check_server_args`, L5131-5134): a node holds tp_size x pp_size / nnodes of the ranks.
* vLLM: `nnodes` only in its multiprocessing multi-node mode (`ParallelConfig.nnodes` / `node_rank`, 0.17.0 sdist
  `config/parallel.py` L232-235; not in 0.11.0), echoed by the "non-default args: {... 'nnodes': 2 ...}" line where
  set. A Ray run (the usual multi-node launch) states no count: Ray prefixes the lines of a worker on another host
  with its address, `(RayWorkerWrapper pid=285, ip=192.168.177.12)`, and the head's own workers without one
  (foundation-model-stack/fastsafetensors#36: two DGX Sparks, tp 2, one remote address), so the hosts are the head
  plus the distinct addresses, as far as every host's workers print a line.
* Both print "Custom allreduce is disabled because this process group spans across nodes" where the tp group spans
  hosts (vLLM 0.11.0 `custom_all_reduce.py` L84-88; fastsafetensors#36 prints it at `custom_all_reduce.py:92`): more
  than one node, not how many. With no count beside it, the check plans with nodes of half the tp group (rounded
  up): the fewest nodes, two, over which the group spans, so every node rule sees the group across nodes as the log
  says (the custom all-reduce it says is off is not booked) where the assumed node of 8 would hold a group of 8.
* TensorRT-LLM: no count; the node size where its command line passes `gpus_per_node` (the LLM API's, read by
  kvplan.engines.trtllm.mlp_split). llama.cpp: RPC servers, no tensor parallelism: nothing read.
"""

from __future__ import annotations

import re

from kvplan.core.intmath import cdiv
from kvplan.core.units import plural
from kvplan.engines.logscan import search, findall
from kvplan.planning.deploy import node_of, node_size

SPANS = "process group spans across nodes"  # vLLM's and SGLang's custom all-reduce, off for a group over hosts
_COUNT = re.compile(r"(?:\bnnodes=|--nnodes[= ]|'nnodes': )(\d{1,4})\b")
_RAY_HOST = re.compile(r"\(RayWorkerWrapper pid=\d{1,9}, ip=([0-9a-fA-F.:]{3,45})\)")
_GPUS_PER_NODE = re.compile(r"gpus_per_node[= ](\d{1,4})\b")


def read_nodes(text: str, rec) -> None:
    """The node count (rec.nodes) or node size (rec.node_gpus) the log states, where in it (rec.read["nodes"]), and
    whether it says a group spans nodes (rec.spans)."""
    rec.spans = SPANS in text
    m = search(_COUNT, text)
    hosts = set(findall(_RAY_HOST, text))
    size = search(_GPUS_PER_NODE, text) if rec.engine == "trtllm" else None
    if m and int(m.group(1)) > 0:
        rec.nodes, rec.read["nodes"] = int(m.group(1)), m.group(0).strip()
    elif hosts:
        rec.nodes = 1 + len(hosts)
        rec.read["nodes"] = f"Ray's worker prefixes: the head and {len(hosts)} other host(s)"
    elif size and int(size.group(1)) > 0:
        rec.node_gpus, rec.read["nodes"] = int(size.group(1)), size.group(0)


def node_gpus(rec, tp: int, pp: int = 1) -> int | None:
    """GPUs in one node of a deployment of `tp` x `pp` GPUs, as the log states them: its node size, or its GPUs over
    its node count where they divide evenly (SGLang requires it; one node: all of them); where it says only that a
    group spans nodes, half the tp group (spans_node); None where it states none of these."""
    if rec.node_gpus:
        return rec.node_gpus
    if rec.nodes and tp * pp % rec.nodes == 0:
        return tp * pp // rec.nodes
    return spans_node(tp) if rec.spans and not rec.nodes else None


def spans_node(tp: int) -> int | None:
    """The node a tp group of `tp` ranks that a log says spans nodes, with no count, is planned with: half the group
    (rounded up), the fewest nodes (two) that split it; None for one rank (no group to split)."""
    return cdiv(tp, 2) if tp > 1 else None


def node_note(rec, dep, gpu=None) -> str | None:
    """check-log's line on nodes: the node size read and where, or, where the log runs several nodes (it says a group
    spans them) or its tp group is larger than the assumed node, that the node count is kvplan's assumption."""
    if "nodes" in rec.read and dep.node_gpus:
        if rec.nodes == 1 and dep.gpus <= node_size(None, gpu):
            return None  # one node, within the one kvplan would assume: nothing to say
        return f"nodes of {plural(dep.node_gpus, 'GPU')} (from the log: {rec.read['nodes']})"
    if rec.spans and dep.node_gpus and dep.node_gpus == spans_node(dep.tp):
        return (f"the log says a tp group spans nodes but not how many: planned as nodes of "
                f"{plural(dep.node_gpus, 'GPU')}, half the tp group of {dep.tp} (the fewest nodes, two, that split "
                "it), so the node rules see the group across nodes (no custom all-reduce booked, as the log says)")
    if rec.spans or dep.tp > node_size(dep, gpu):
        said = "says a tp group spans nodes but not how many" if rec.spans else "states no node count"
        return f"the log {said}: {node_of(dep, gpu)[1]} for the node rules"
    return None
