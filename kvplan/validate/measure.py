"""Measuring memory: bytes of given tensors, and every allocation a run makes.

* `storage_bytes(tensors)` sums the untyped storages behind tensors, each storage once: the
  measured size of a cache or of a model's weights (views and tied weights are not counted twice).
* `CpuTracker` is a TorchDispatchMode that sees every aten op's fresh outputs (results whose
  schema says they alias nothing), counts their storages' bytes, and follows each storage until
  the last tensor on it is collected: live bytes, peak, number and total of allocations. What it
  cannot see: allocator rounding and workspaces inside a kernel.
* `CudaTracker` reads torch.cuda's caching-allocator counters (allocated, peak allocated,
  reserved), which see everything torch allocates on the device.
Both report the same fields, so the comparison in run.py does not care which one measured.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors`."""
    seen: dict[tuple, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[(t.device.type, t.device.index, st.data_ptr())] = st.nbytes()
    return sum(seen.values())


@dataclass
class Snapshot:
    live_bytes: int  # bytes live now (CPU: storages this tracker saw created; CUDA: allocated)
    peak_bytes: int  # highest live bytes since the tracker started
    reserved_bytes: int | None  # CUDA: held by the caching allocator; CPU: None
    allocations: int  # fresh storages created so far (CPU); CUDA: allocation count from memory_stats
    allocated_total_bytes: int  # bytes of all allocations so far


class CpuTracker(TorchDispatchMode):
    """Live and peak bytes of the tensor storages created while the mode is active."""

    def __init__(self):
        super().__init__()
        self._refs: dict[int, int] = {}  # storage data_ptr -> tensors alive on it
        self._size: dict[int, int] = {}
        self.live = self.peak = self.count = self.total = 0

    def _release(self, key: int) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
            self.live -= self._size.pop(key)

    def _hold(self, t: torch.Tensor, fresh: bool) -> None:
        st = t.untyped_storage()
        key = st.data_ptr()
        if key == 0 or st.nbytes() == 0:
            return
        if key not in self._refs:
            if not fresh:
                return  # a view of a tensor made before tracking began (a weight): not an allocation
            self._refs[key] = 0
            self._size[key] = st.nbytes()
            self.live += st.nbytes()
            self.count += 1
            self.total += st.nbytes()
            self.peak = max(self.peak, self.live)
        self._refs[key] += 1
        weakref.finalize(t, self._release, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        returns = func._schema.returns
        flat, _ = tree_flatten(out)
        for i, t in enumerate(flat):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                info = returns[i].alias_info if i < len(returns) else None
                self._hold(t, fresh=info is None)
        return out

    def snapshot(self) -> Snapshot:
        return Snapshot(self.live, self.peak, None, self.count, self.total)

    def reset_peak(self) -> None:
        self.peak = self.live


class CudaTracker:
    """torch.cuda's allocator counters, relative to the moment the tracker started."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._base = torch.cuda.memory_allocated(self.device)
        stats = torch.cuda.memory_stats(self.device)
        self._base_count = stats.get("allocation.all.allocated", 0)
        self._base_total = stats.get("allocated_bytes.all.allocated", 0)
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize(self.device)
        return False

    def snapshot(self) -> Snapshot:
        torch.cuda.synchronize(self.device)
        stats = torch.cuda.memory_stats(self.device)
        return Snapshot(
            torch.cuda.memory_allocated(self.device) - self._base,
            torch.cuda.max_memory_allocated(self.device) - self._base,
            torch.cuda.memory_reserved(self.device),
            stats.get("allocation.all.allocated", 0) - self._base_count,
            stats.get("allocated_bytes.all.allocated", 0) - self._base_total,
        )

    def reset_peak(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        # max_memory_allocated restarts from the current allocation, which already includes the base


def tracker_for(device: torch.device):
    return CudaTracker(device) if device.type == "cuda" else CpuTracker()
