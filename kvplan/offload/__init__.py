"""KV offload tiers below HBM: what `--offload TIER:SIZE` asks for, each engine's host pool, a trace's hit-rate curve.

`tiers` parses the flag into frozen requests and holds the pool spec every rule returns; `vllm`,
`sglang`, `trtllm`, `lmcache` and `kvbm` restate how each engine or connector sizes its host pool
from its own flags (sources cited in each module and in docs/engines.md); `pools` picks the rule
for an engine and checks the pools against a host profile; `emit` prints the flags; `mrc` is the
one-pass LRU miss-ratio curve of a trace's blocks and `blocks` turns a trace into those blocks.
"""
