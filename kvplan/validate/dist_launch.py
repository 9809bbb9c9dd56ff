"""Starting the ranks of a distributed validation run, as torchrun would, or joining torchrun's.

`launch` starts one `python -m kvplan.validate.dist_launch` process per rank with torchrun's
environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so a rank started here and
a rank started by `torchrun --nproc-per-node N -m kvplan validate ... --tp ...` run the same code
(`join_torchrun`). The run's inputs go to the ranks in a private temporary folder (written and read
only by this module); each rank writes its record, or its one-line error, beside them. A rank that
fails makes the launcher stop the others (the processes it started, by their handles) and report
that rank's error; a run that outlasts TIMEOUT_S is stopped the same way.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from kvplan.core.errors import EXIT_ERROR, EXIT_USAGE, KvplanError, input_names, inputs_named
from kvplan.validate.dist_rank import run_rank

TIMEOUT_S = 300  # the whole run; a collective waits at most COLLECTIVE_TIMEOUT_S for a lost rank
COLLECTIVE_TIMEOUT_S = 120
_ENV_KEYS = ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT")


def in_torchrun() -> bool:
    return all(k in os.environ for k in _ENV_KEYS) and "KVPLAN_DIST_DIR" not in os.environ


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _init(backend: str) -> tuple[int, int]:
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    return dist.get_rank(), dist.get_world_size()


def join_torchrun(full, s, layout, backend: str) -> list[dict] | None:
    """Under torchrun: join its group and run this rank; rank 0 returns every record, others None."""
    world = int(os.environ["WORLD_SIZE"])
    if world != layout.world:
        raise KvplanError(f"torchrun started {world} processes but {layout.label()} needs {layout.world}", EXIT_USAGE)
    rank, _ = _init(backend)
    try:
        record = run_rank(rank, full, s, layout)
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(record, gathered, dst=0)
    finally:
        dist.destroy_process_group()
    return gathered


def launch(full, s, layout, backend: str) -> list[dict]:
    """Start layout.world ranks on this machine and return their records in rank order."""
    with tempfile.TemporaryDirectory(prefix="kvplan-dist-") as tmp:
        folder = Path(tmp)
        # the ranks word their errors as this process does (the CLI's flags: kvplan.core.errors.inputs_named)
        (folder / "inputs.pickle").write_bytes(pickle.dumps((full, s, layout, backend, input_names())))
        port = _free_port()
        procs = []
        for rank in range(layout.world):
            env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(layout.world),
                   "LOCAL_WORLD_SIZE": str(layout.world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                   "KVPLAN_DIST_DIR": tmp, "OMP_NUM_THREADS": "1"}
            procs.append(subprocess.Popen([sys.executable, "-m", "kvplan.validate.dist_launch"], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        try:
            failed = _wait(procs, time.monotonic() + TIMEOUT_S)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
        results = {}
        for rank in range(layout.world):
            path = folder / f"rank{rank}.json"
            if path.exists():
                results[rank] = json.loads(path.read_text())
        errors = [(r, v["error"]) for r, v in sorted(results.items()) if "error" in v]
        if errors:
            rank, message = errors[0]
            raise KvplanError(f"distributed validation failed on rank {rank}: {message}", errors_code(message))
        if failed is not None or len(results) < layout.world:
            detail = _stderr_tail(procs[failed]) if failed is not None else "timed out"
            raise KvplanError(f"distributed validation failed: rank {failed} {detail}", EXIT_ERROR)
        return [results[r]["record"] for r in range(layout.world)]


def errors_code(message: str) -> int:
    return EXIT_USAGE if message.startswith("usage: ") else EXIT_ERROR


def _wait(procs, deadline: float) -> int | None:
    """Wait for every rank; the first rank that exits non-zero (or None when all succeed)."""
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                return rank
        if all(code == 0 for code in codes):
            return None
        if time.monotonic() > deadline:
            return next(r for r, c in enumerate(codes) if c is None)
        time.sleep(0.05)


def _stderr_tail(proc) -> str:
    try:
        text = proc.stderr.read().decode(errors="replace").strip()
    except (OSError, ValueError):
        text = ""
    last = text.splitlines()[-1] if text else f"exited with code {proc.returncode}"
    return last[:300]


def _rank_main() -> int:
    """One rank started by `launch`: read the inputs, run, write this rank's record or error."""
    folder = Path(os.environ["KVPLAN_DIST_DIR"])
    rank = int(os.environ["RANK"])
    out = folder / f"rank{rank}.json"
    torch.set_num_threads(1)
    try:
        full, s, layout, backend, names = pickle.loads((folder / "inputs.pickle").read_bytes())
        _init(backend)
        try:
            with inputs_named(names):
                out.write_text(json.dumps({"record": run_rank(rank, full, s, layout)}))
        finally:
            torch.distributed.destroy_process_group()
    except KvplanError as exc:
        out.write_text(json.dumps({"error": ("usage: " if exc.exit_code == EXIT_USAGE else "") + str(exc)}))
        return 1
    except Exception as exc:  # noqa: BLE001 - reported by the launcher in one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        out.write_text(json.dumps({"error": f"{type(exc).__name__}: {first}"}))
        if os.environ.get("KVPLAN_DEBUG"):
            traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_rank_main())
