"""Layer 11 of 14, bench: benchmark result files read, and what their figures imply. Parsers for the files
serving benchmarks write (`vllm.py`, `sglang.py`, `serving.py` the printed report both share, `aiperf.py`
for genai-perf / AIPerf, `llamabench.py`, `trtllm.py`), `detect.py` (the format from the content),
`result.py` (BenchRun: the settings a file states and its metrics), `numbers.py` (figures read safely),
`load.py` (a benchmark's load as simulator requests, closed loop or open), `compare.py` (measured beside
predicted, the error and the efficiency each roofline term implies), `running.py` (an engine's own batch
cap and prefill chunk for a published benchmark's setting) and `ship.py` (the speed coefficients fitted
with it). Imports simulator and below.
"""
