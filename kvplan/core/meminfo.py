"""The kernel's MemAvailable: the memory the system can still give a process without swapping.

Read by the sweep's size check (kvplan.cli.sweep_size: refuse a sweep that would not fit) and by validate's CPU
runs (kvplan.validate.run: refuse a model that would not fit), which read /proc/meminfo the same way.
"""

from __future__ import annotations


def mem_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (the kernel's kB are KiB); None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
