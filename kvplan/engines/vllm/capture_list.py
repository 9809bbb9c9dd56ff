"""vLLM's default CUDA-graph capture list as the engine builds it, by release: its largest size and its sizes.

vLLM builds the list in `config/vllm.py` _set_cudagraph_sizes (0.19.0 L1343-1503, 0.21.0 L1476-1640, 0.30.0
L2151-2360), once, before the model runner sees the attention backends:

* the largest size, max_cudagraph_capture_size, is min(max_num_seqs x decode_query_len x 2, 512), where
  decode_query_len is 1 + num_speculative_tokens with a drafter (0.19.0 L1392-1401, 0.21.0 L1529-1538), then
  min(that, max_num_batched_tokens) (0.19.0 L1402-1403); gpt-oss raises the 512 (MAX_CAPTURE_SIZE);
  from 0.30.0 the 512 is 1024 on compute capability 10.x (`is_device_capability_family(100)`, 0.30.0 L2214-2224);
* the sizes are [1, 2, 4], the multiples of 8 below 256, then the multiples of 16 up to the largest (0.21.0
  L1567-1579); from 0.21.0 max_num_batched_tokens is appended when it fits under the largest and is not already in
  the list (0.21.0 L1580-1585; absent in 0.19.0); from 0.30.0, with a drafter, the uniform decode batches
  n x decode_query_len for n in the same 1, 2, 4, 8... grid of request counts up to max_num_seqs (and max_num_seqs
  itself) are appended where they fit under the largest (0.30.0 L2225-2302, L2350-2355);
* where FULL decode graphs are captured and decode_query_len > 1, the model runner rounds every size up to a
  multiple of decode_query_len and drops those above the largest (`config/compilation.py`
  adjust_cudagraph_sizes_for_spec_decode, 0.19.0 L1235-1280 called from `gpu_model_runner.py` L6385-6392; 0.21.0
  compilation.py L1406-1418, L1440-1480; 0.30.0 L1515, L1547-1590), and the FULL decode graphs are the sizes from
  decode_query_len to decode_query_len x max_num_seqs (`v1/cudagraph_dispatcher.py` initialize_cudagraph_keys,
  0.21.0 L204-230).

A user's max_cudagraph_capture_size (engine option; vLLM's --max-cudagraph-capture-size, read from 0.19.0) replaces the
default largest: no drafter factor, no platform ceiling (0.21.0 L1526-1529). What kvplan leaves out, said in the plan's
note: a user's `cudagraph_capture_sizes` (check-log reads a log's own list), sequence parallelism's filter to multiples
of tp (-O3 on a dense model, `update_sizes_for_sequence_parallelism`), performance_mode interactivity's 1..32, and
0.30.0's dynamic speculative tiers. Releases 0.22-0.29 were not read: kvplan gives them 0.21.0's list.
"""

from __future__ import annotations

from kvplan.core.intmath import round_up
from kvplan.engines.options import _bad_opt, opt_int

ASKED_FROM = (0, 19, 0)  # --max-cudagraph-capture-size read from here (arg_utils.py 0.19.0 L401-402, L1276)
SPEC_CAP_READ = (0, 19, 0)  # the oldest release whose drafter factor was read (0.19.0 L1392-1401)
APPEND_BATCHED_FROM = (0, 21, 0)  # max_num_batched_tokens appended (0.21.0 L1580-1585; absent in 0.19.0)
PLATFORM_1024_FROM = (0, 30, 0)  # the 1024 default on capability 10.x and the uniform decode sizes (0.30.0 read)
DEFAULT_CAP = 512
BLACKWELL_CAP = 1024
MAX_CAPTURE_SIZE = {"GptOssForCausalLM": 1024}  # architectures whose vLLM config raises the 512 cap


def decode_query_len(model) -> int:
    """Tokens one request decodes per step: 1, or 1 + num_speculative_tokens with a drafter."""
    info = getattr(model, "speculative", None)
    return 1 + (info.num_speculative_tokens if info is not None else 0)


def grid(top: int) -> list[int]:
    """vLLM's default capture grid up to `top`: 1, 2, 4, multiples of 8 below 256, multiples of 16 from 256."""
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, top + 1, 16))
    return [s for s in sizes if s <= top]


def platform_cap(model, v: tuple, gpu=None) -> int:
    """The default ceiling before max_num_seqs: 512, gpt-oss's 1024, and from 0.30.0 1024 on capability 10.x."""
    if model.architecture in MAX_CAPTURE_SIZE:
        return MAX_CAPTURE_SIZE[model.architecture]
    cap = getattr(gpu, "capability", None)
    return BLACKWELL_CAP if v >= PLATFORM_1024_FROM and cap is not None and cap[0] == 10 else DEFAULT_CAP


def asked_max(opts: dict, v: tuple) -> int | None:
    """The engine option max_cudagraph_capture_size (vLLM's --max-cudagraph-capture-size), None where not given;
    refused below 1 (vLLM asserts >= 1, config/vllm.py 0.21.0 L1542-1545) and before 0.19.0 (not read there)."""
    if "max_cudagraph_capture_size" not in opts:
        return None
    asked = opt_int(opts, "max_cudagraph_capture_size", 0)
    if asked < 1 or v < ASKED_FROM:
        why = "must be at least 1" if asked < 1 else "is read from vLLM 0.19.0 only (earlier releases not read)"
        raise _bad_opt("max_cudagraph_capture_size", asked, why)
    return asked


def largest(model, max_num_seqs: int, tokens: int | None, v: tuple, gpu=None, asked: int | None = None) -> int:
    """max_cudagraph_capture_size as _set_cudagraph_sizes computes it (before the drafter's rounding): the user's
    (`asked`) in place of the default, then at most max_num_batched_tokens."""
    pre = asked or platform_cap(model, v, gpu)
    if not asked and model.architecture not in MAX_CAPTURE_SIZE:
        pre = min(max_num_seqs * decode_query_len(model) * 2, pre)
    return min(pre, tokens) if tokens else pre


def _uniform_decode(model, max_num_seqs: int, top: int, v: tuple, gpu=None) -> list[int]:
    """0.30.0's appended decode sizes: n x decode_query_len for the request-count grid up to max_num_seqs."""
    q = decode_query_len(model)
    if q == 1 or v < PLATFORM_1024_FROM:
        return []
    reqs = min(max_num_seqs, platform_cap(model, v, gpu))
    return [n * q for n in sorted(set(grid(reqs) + [reqs])) if n * q <= top]


def capture_list(model, max_num_seqs: int, tokens: int | None = None, v: tuple = (0, 21, 0), gpu=None,
                 full_decode: bool = True, asked: int | None = None) -> list[int]:
    """The sizes vLLM release v captures (ascending), after the drafter's rounding where FULL decode graphs are
    captured (`full_decode`). `tokens` is max_num_batched_tokens (None: not known, no clamp); `asked` the user's
    max_cudagraph_capture_size. vLLM truncates the largest to the last size listed (the "Truncating
    max_cudagraph_capture_size" warning, 0.21.0 L1597-1620), and the rounding keeps sizes up to it."""
    top = largest(model, max_num_seqs, tokens, v, gpu, asked)
    sizes = grid(top)
    if tokens and v >= APPEND_BATCHED_FROM and tokens <= top:
        sizes.append(tokens)
    sizes = sorted(set(sizes + ([] if asked else _uniform_decode(model, max_num_seqs, top, v, gpu))))
    q = decode_query_len(model)
    if not full_decode or q == 1 or not sizes:
        return sizes
    rounded = sorted(r for r in {round_up(s, q) for s in sizes} if r <= sizes[-1])
    return rounded or ([q] if q <= sizes[-1] else [])


def decode_sizes(model, sizes: list[int], max_num_seqs: int) -> list[int]:
    """The FULL decode graphs: the sizes from decode_query_len to decode_query_len x max_num_seqs."""
    q = decode_query_len(model)
    return [s for s in sizes if q <= s <= q * max_num_seqs]


def list_note(model, max_num_seqs: int, tokens: int | None, v: tuple, gpu=None, full_decode: bool = True,
              asked: int | None = None) -> str:
    """The plan's line on the capture list: how many sizes, the largest, and the rule that gave it."""
    sizes = capture_list(model, max_num_seqs, tokens, v, gpu, full_decode, asked)
    q, top = decode_query_len(model), largest(model, max_num_seqs, tokens, v, gpu, asked)
    clamp = f", max_num_batched_tokens {tokens})" if tokens else ")"
    why = (f"min(max_cudagraph_capture_size {asked}{clamp} as asked" if asked else
           f"{top} for {model.architecture}" if model.architecture in MAX_CAPTURE_SIZE else
           f"min(max_num_seqs {max_num_seqs} x {q} x 2, {platform_cap(model, v, gpu)}{clamp}, vLLM's default")
    note = (f"CUDA-graph capture list: {len(sizes)} size{'s' * (len(sizes) != 1)}, "
            f"largest {sizes[-1] if sizes else 0} (largest {why})")
    if q > 1:
        note += (f"; with {q - 1} speculative tokens a decode step is {q} tokens a request"
                 + (f", sizes rounded up to multiples of {q}" if full_decode else ""))
        if v < SPEC_CAP_READ:
            note += "; the drafter's factor was read at 0.19.0, not in this release"
    return note + ("" if asked else "; a user's cudagraph_capture_sizes is not read")
