"""vLLM's releases and when each reached PyPI, the evidence a versionless start-up log's own timestamp gives
(kvplan.engines.logdates): the first upload-time of each release's files in PyPI's simple index
(https://pypi.org/simple/vllm/, PEP 691 JSON, PEP 700 `upload-time`, read 2026-12-06), UTC, to the minute; final
releases (no rc or dev) from 0.5.0, kvplan's first modelled, to 0.33.0, its last; and FLOORS, lines only a release
from a known one on prints.
"""

from __future__ import annotations

UPLOADED = (
    ("0.5.0", "2024-06-11T23:05"), ("0.5.0.post1", "2024-06-14T06:10"), ("0.5.1", "2024-07-06T02:32"),
    ("0.5.2", "2024-07-15T19:22"), ("0.5.3", "2024-07-23T08:55"), ("0.5.3.post1", "2024-07-23T17:26"),
    ("0.5.4", "2024-08-05T23:46"), ("0.5.5", "2024-08-23T19:28"), ("0.6.0", "2024-09-05T04:26"),
    ("0.6.1", "2024-09-11T22:18"), ("0.6.1.post1", "2024-09-13T05:01"), ("0.6.1.post2", "2024-09-13T18:56"),
    ("0.6.2", "2024-09-25T22:36"), ("0.6.3", "2024-10-14T21:27"), ("0.6.3.post1", "2024-10-17T18:04"),
    ("0.6.4", "2024-11-15T07:49"), ("0.6.4.post1", "2024-11-15T18:43"), ("0.6.5", "2024-12-18T00:02"),
    ("0.6.6", "2024-12-27T00:47"), ("0.6.6.post1", "2024-12-27T07:09"), ("0.7.0", "2025-01-27T17:00"),
    ("0.7.1", "2025-02-01T23:29"), ("0.7.2", "2025-02-06T18:26"), ("0.7.3", "2025-02-20T18:01"),
    ("0.8.0", "2025-03-18T22:22"), ("0.8.1", "2025-03-19T21:28"), ("0.8.2", "2025-03-25T18:06"),
    ("0.8.3", "2025-04-06T06:47"), ("0.8.4", "2025-04-15T00:30"), ("0.8.5", "2025-04-28T23:59"),
    ("0.8.5.post1", "2025-05-02T22:31"), ("0.9.0", "2025-05-28T01:30"), ("0.9.0.1", "2025-05-30T20:16"),
    ("0.9.1", "2025-06-10T21:46"), ("0.9.2", "2025-07-08T04:48"), ("0.10.0", "2025-07-25T00:22"),
    ("0.10.1", "2025-08-19T02:18"), ("0.10.1.1", "2025-08-20T23:17"), ("0.10.2", "2025-09-13T23:00"),
    ("0.11.0", "2025-10-04T01:39"), ("0.11.1", "2025-11-19T01:55"), ("0.11.2", "2025-11-20T08:30"),
    ("0.12.0", "2025-12-03T11:37"), ("0.13.0", "2025-12-19T03:30"), ("0.14.0", "2026-01-20T10:50"),
    ("0.14.1", "2026-01-24T21:05"), ("0.15.0", "2026-01-29T18:59"), ("0.15.1", "2026-02-05T00:18"),
    ("0.16.0", "2026-02-26T03:02"), ("0.17.0", "2026-03-07T03:54"), ("0.17.1", "2026-03-11T11:03"),
    ("0.18.0", "2026-03-20T22:16"), ("0.18.1", "2026-03-31T05:55"), ("0.19.0", "2026-04-03T04:04"),
    ("0.19.1", "2026-04-18T05:49"), ("0.20.0", "2026-04-27T11:07"), ("0.20.1", "2026-05-03T08:24"),
    ("0.20.2", "2026-05-10T07:38"), ("0.21.0", "2026-05-15T00:08"), ("0.22.0", "2026-05-29T10:32"),
    ("0.22.1", "2026-06-05T10:12"), ("0.23.0", "2026-06-13T09:27"), ("0.24.0", "2026-06-30T01:17"),
    ("0.25.0", "2026-07-11T20:01"), ("0.25.1", "2026-07-14T08:58"), ("0.26.0", "2026-07-25T10:40"),
    ("0.27.0", "2026-08-10T21:31"), ("0.27.1", "2026-08-11T10:59"), ("0.28.0", "2026-08-26T10:07"),
    ("0.29.0", "2026-09-09T08:58"), ("0.30.0", "2026-09-22T05:22"), ("0.31.0", "2026-10-05T07:40"),
    ("0.32.0", "2026-10-18T10:03"), ("0.33.0", "2026-11-02T10:12"),
)

# (text in the log, the first release printing it, what it is): a log holding the text was written by that release or
# a later one. "CUDA graph memory profiling is enabled (default since v0.21.0)": gpu_worker.py's line where the
# estimate is on, naming the release that made it the default (vllm-project/vllm#38284, merged, 2026-03-26: "slated
# for default enablement in v0.21, so this PR enables it"; #45178, 2026-06-10, reports it "enabled by default";
# vllm-project/vllm#30515, 2025-12-11, added the estimate off by default); gpustack/runner#251 logs it.
FLOORS = (
    ("CUDA graph memory profiling is enabled (default since v0.21.0)", "0.21.0",
     "\"CUDA graph memory profiling is enabled (default since v0.21.0)\""),
    ("re-enabling it (the default as of v0.21.0)", "0.21.0",  # the same line's warning where it is off
     "\"CUDA graph memory profiling is disabled\" with \"the default as of v0.21.0\""),
)
