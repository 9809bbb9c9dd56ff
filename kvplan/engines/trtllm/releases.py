"""TensorRT-LLM's releases and when each reached PyPI, the evidence a versionless start-up log's own timestamp gives
(kvplan.engines.logdates): the first upload-time of each release's files in PyPI's simple index
(https://pypi.org/simple/tensorrt-llm/, PEP 691 JSON, PEP 700 `upload-time`, read 2026-12-06), UTC, to the minute;
final releases (no rc) from 0.17.0 (before kvplan's first modelled, 0.20.0) to 1.2.1 (its last line, 1.2).
"""

from __future__ import annotations

UPLOADED = (
    ("0.17.0", "2025-01-30T22:18"), ("0.17.0.post1", "2025-02-02T06:24"), ("0.18.0", "2025-04-02T09:38"),
    ("0.18.1", "2025-04-09T03:09"), ("0.18.2", "2025-04-16T09:38"), ("0.19.0", "2025-05-09T13:18"),
    ("0.20.0", "2025-06-19T02:38"), ("0.21.0", "2025-08-04T06:20"), ("1.0.0", "2025-09-24T03:07"),
    ("1.1.0", "2025-12-19T08:48"), ("1.2.0", "2026-03-12T19:38"), ("1.2.1", "2026-04-20T09:20"),
)
