"""Cut a verbatim excerpt of an engine start-up log: only the lines kvplan's corpus needs.

Usage: python scripts/corpus_excerpt.py RAW_LOG > tests/fixtures/logs/corpus/ID.log
Keeps, in order, the first line of each kind that states a setting or a memory figure (the version
banner, non-default args, scheduler defaults, weights, the profiling breakdown, the KV budget, the
block pool, CUDA graphs, the error that stopped start-up). Lines are copied unchanged except that
ANSI colour codes are dropped. Reads a local file; fetches nothing.
"""

from __future__ import annotations

import re
import sys

KINDS = [
    r"version \d", r"non-default args", r"Initializing a V\d LLM engine|Initializing an LLM engine",
    r"Resolved architecture", r"Using max model len", r"Defaulting max_num_batched_tokens",
    r"Defaulting max_num_seqs", r"Chunked prefill is enabled with", r"worker init memory snapshot",
    r"Peak GPU memory after loading weights", r"Model loading took|Loading model weights took",
    r"Estimated CUDA graph memory:", r"Memory profiling takes", r"total_gpu_memory \(",
    r"model weights take", r"Memory profiling results", r"Available KV cache memory",
    r"CUDA graph memory profiling is enabled", r"GPU KV cache size", r"Maximum concurrency for",
    r"# GPU blocks|# CUDA blocks|# cuda blocks", r"Graph capturing finished",
    r"Load weight end|KV Cache is allocated|Memory pool end|max_total_num_tokens=",
    r"ValueError|OutOfMemoryError|No available memory for the cache blocks|is larger than the maximum",
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def excerpt(text: str) -> list[str]:
    found: dict[int, str] = {}
    for line in text.splitlines():
        if len(line) > 6000:
            continue
        clean = ANSI.sub("", line)
        for i, pat in enumerate(KINDS):
            if i not in found and re.search(pat, clean):
                found[i] = clean.rstrip()
                break
    order = sorted(found, key=lambda i: text.find(found[i][:60]) if found[i][:60] in text else i)
    return [found[i] for i in order]


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        print("\n".join(excerpt(f.read())))
