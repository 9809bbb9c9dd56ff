"""vLLM's profile-run sampler: which top-k/top-p path the dummy sampler run takes, by release and by what the log
says, and the Triton path's per-program buffer, sized by the GPU's multiprocessor count.

The dummy run (`v1/worker/gpu_model_runner.py` `_dummy_sampler_run`, 0.8-0.19) samples S = min(max_num_seqs,
max_num_batched_tokens) rows with top_p 0.9 and top_k vocab - 1, so top-k/top-p always runs. Three paths:

1. FlashInfer's kernel where it is installed and on (0.8-0.10 by default; opt-in with
   VLLM_USE_FLASHINFER_SAMPLER=1 by 0.16; the log says "Using FlashInfer for top-p & top-k sampling"):
   `TopKTopPSampler.forward_cuda` -> `flashinfer_sample`. Priced by the fitted cost per logit alone.
2. The PyTorch sort (`apply_top_k_top_p_pytorch`): 0.11-0.16 without FlashInfer, 0.17+ below 8 rows, and any V1
   release whose log says "FlashInfer is not available. Falling back to the PyTorch-native implementation": the fp32
   logits sorted whole (4 B values + 8 B int64 indices), softmax and cumsum of the sorted copy, a scattered copy.
3. The Triton kernel, 0.17.0+ (vllm-project/vllm#33538, "requiring around ~80MiB of extra VRAM"): batches of 8
   or more rows without FlashInfer's sampler (`apply_top_k_top_p`: `if HAS_TRITON and logits.shape[0] >= 8`,
   v1/sample/ops/topk_topp_sampler.py 0.17.0 and 0.19.0 L251) go to `apply_top_k_top_p_triton`
   (v1/sample/ops/topk_topp_triton.py 0.17.0 L993-1003, 0.19.0 L1010-1021, main@08a5723242 the same), which masks
   in place and keeps one fp32 vocabulary row per Triton program in `_TRITON_BUFFER_CACHE`:
       NUM_PROGRAMS = min(num_sm, batch); rows = min(next_power_of_2(NUM_PROGRAMS), num_sm)
   `num_sm` is `current_platform.num_compute_units()`, torch's `multi_processor_count` on CUDA and ROCm
   (platforms/cuda.py, platforms/rocm.py 0.19.0): the profile's `sm_count`. The buffer is allocated inside the
   profile window and never freed, so it is part of the torch peak increase. 0.16.0 has no such file. On ROCm the
   same path runs by default (`forward_native`; aiter's sampler only under VLLM_ROCM_USE_AITER=1, default off in
   envs.py 0.19.0 L941, not modelled), with the compute-unit count: 304 rows on an MI300X at 1,024 dummy rows.

The cost per logit of path 1 and 3 besides the buffer (SAMPLER_BYTES: bf16 logits 2 B, their fp32 copy 4 B, the
probabilities 4 B, the exponential draw 4 B of `random_sample`, 14 B by the source) and of path 2 are fitted on
the training split (benchmarks/budget_corpus.py --calibrate, the buffer taken out first); the buffer is
source-derived.

The V2 model runner (0.22.0-0.33.x as read, kvplan.engines.vllm.runner.priced_v2) samples otherwise; none of the above.
Its profile run (`v1/worker/gpu/model_runner.py` 0.22.0 profile_run L588-604, _dummy_sampler_run L569-581; 0.25.0
L629-640, 0.28.0 L771-782, 0.29.0 L832-843, 0.30.0 L919-930, 0.31.0 L942-953, 0.32.0 L972-983 the same) computes the
model-dtype logits of the same S rows and calls its own `Sampler` on a dummy batch whose rows keep the states'
defaults, top_k = vocab and top_p = 1.0 (`gpu/sample/states.py` 0.22.0 L29-32), so `apply_top_k_top_p` returns at
once (L94-97): no sort, no Triton kernel, no buffer, no FlashInfer. What stays per logit: the logits (2 B in
bf16/fp16) and, where `apply_sampling_params` copies them to a new fp32 tensor (`gpu/sample/sampler.py` 0.22.0
L132-133, 0.25.0 L156-157, 0.27.0 L158-159), 4 B more; 0.26.0 mutates the logits in place and copies only for raw
logprobs, which the dummy batch asks none of (L162-168). From 0.28.0 `apply_sampling_params` returns the logits
untouched when no row needs processing (`if not np.any(self.needs_logits_processing[idx_mapping_np])`, 0.28.0
L192-193, 0.29.0 L218-219, 0.30.0 L220-221, 0.32.0 L238-239), and `needs_logits_processing` is zeros until
`add_request` (0.29.0 L61, L82-94), which the dummy batch never calls: no fp32 copy. The Gumbel-max draw
(`gpu/sample/gumbel.py` gumbel_sample) keeps one value and index per row and Triton block, not per logit. So 6 B per
logit before 0.28.0 (2 B on 0.26.x), 2 B from 0.28.0, source-derived, not fitted.

0.33.0 samples the same logits a second time (model_runner.py L993-1015) with every row given
`SamplingParams.for_sampler_warmup()` (sampling_params.py L1477-1493: temperature 0.9, top_p 0.9, top_k 50, min_p,
penalties, logit bias, bad words, logprobs 5), "warmup_kernels ... pays for the fp32 logits pipeline, so the profiled
peak must too"; the CPU worker skips it. Now every row needs processing: the fp32 copy (4 B), penalties, bias, bad
words, temperature and min_p in place (penalties.py L88-104, logit_bias.py L131-150, bad_words.py L79-95); the rows
are neither greedy nor seeded, so the fused sampler runs where FlashInfer's is on (sampler.py L307-325): on CUDA by
default (VLLM_USE_FLASHINFER_SAMPLER, envs.py L51) for compute capability 8.0-12.1
(v1/attention/backends/flashinfer.py L696-704) and more than 16 SMs (`flashinfer_sampler_supported`,
v1/sample/ops/topk_topp_sampler.py L102-161). `flashinfer_sample` with both top-k and top-p tensors calls
`top_k_top_p_sampling_from_logits` (L631-668), whose default top_k_first order (flashinfer-python 0.7.2.post1, the
pinned release, sampling.py L1782-1805; its int-k fast path does not take vLLM's per-row tensor) makes
`top_k_mask_logits`' fp32 copy (L502) and its softmax (L1796): 8 B more, live together. So 2 + 4 + 8 = 14 B per
logit. Without FlashInfer's sampler (ROCm, other GPUs, or a log saying so) `apply_top_k_top_p` runs the Triton kernel
whenever Triton is there (topk_topp_sampler.py L501-521: no 8-row floor now), masking in place with the same
per-program buffer as 0.17 (topk_topp_triton.py L1690-1698), then the Gumbel draw: 6 B per logit and the buffer.
The logprobs (logprob.py compute_token_logprobs: "we do not materialize the full [batch_size, vocab_size] logprobs
tensor") add nothing per logit.

Besides the profile run, the V2 runner keeps per-request x vocabulary states on the GPU for as long as it lives:
PenaltiesState's output_bin_counts, torch.zeros(max_num_reqs, vocab_size, int32) ("can be very large, taking up GBs
of GPU memory"), and prompt_bin_mask [max_num_reqs, cdiv(vocab_size, 32)] int32 (gpu/sample/penalties.py 0.22.0
L32-42, 0.31.0 L40-47, 0.33.0 L43-50), and StructuredOutputsWorker's grammar_bitmask [max_num_reqs x
decode_query_len, cdiv(vocab_size, 32)] int32 (gpu/structured_outputs.py 0.27.0 L17-18, 0.33.0 L63-64; 1 + the
drafter's tokens rows per request). vocab_size is model_config.get_vocab_size() (gpu/model_runner.py 0.33.0 L229). The
runner builds them in __init__ (0.22.0 L215, L231) or, from 0.24.0, in load_model after the loader's
DeviceMemoryProfiler window (0.24.0 L279-298, Sampler at L325; 0.27.0 L352, L375; 0.33.0 L495, L528), so never in
"Model loading took"; always after the worker's start-up snapshot (gpu_worker.py 0.27.0 L395, 0.33.0 L541) and
before the profile run. Whether the budget loses them is the release's formula (utils/mem_utils.py
memory_profiling): 0.22.0-0.26.x subtract weights + the torch peak's rise since the profile began + the non-torch
increase (gpu_worker.py 0.22.0 L414-421, 0.26.0 L509-516), none of which holds a torch tensor made before the
profile, so they sit above the budget, in the memory gpu_memory_utilization leaves; from 0.27.0 the non-KV memory
is the free-memory drop since the snapshot plus the transient peak (mem_utils.py 0.27.0 L317-326, 0.33.0 L312-321:
"total_consumed already covers persistent torch allocations"), so they come out of the KV budget: v2_state_bytes,
4 x max_num_seqs x (vocab + 2 x cdiv(vocab, 32)) B, 558,170,112 B for Llama-3.1-8B at 1,024 sequences. The other
per-request states are fixed-width, not per vocabulary (logit_bias.py 0.33.0 L20-52: 1,024 allowed ids, 1,024 bias
ids and values, 128 stop ids, 12,800 B a request; bad words, logprob ids, the thinking budget) and are not priced;
the request state's token table is UVA host memory (gpu/states.py 0.22.0 L30-38).
"""

from __future__ import annotations

from kvplan.engines.versions import dotted
from kvplan.hardware.facts import ASSUMED_SM_COUNT, vendor_of

SAMPLER_BYTES = 14.12  # per logit of the dummy sampler run (S x vocab) besides the Triton buffer: 0.17+, V1 < 0.11
SAMPLER_BYTES_V011 = 38.14  # the same on the PyTorch sort path (0.11-0.16, or where the log names it)
TRITON_MIN_ROWS = 8  # apply_top_k_top_p: smaller batches take the PyTorch sort
TRITON_BUFFER_BYTES = 4  # the buffer is `logits.new_empty`: the fp32 logits' dtype
# The log corpus's machine, an HGX H100 SXM (132 SMs): the multiprocessor count assumed for a GPU whose profile gives
# none (a plan warning) or that a log does not name (check-log says so).
CORPUS_SM_COUNT = ASSUMED_SM_COUNT
_TRITON_VENDORS = ("NVIDIA", "AMD", "UNKNOWN")  # vLLM's CUDA and ROCm platforms; a GPU known only by its memory


V2_FP32_COPY_BYTES = 4  # apply_sampling_params' fp32 copy of the logits (V2: 0.22-0.25, 0.27; 0.33's warmup pass)
V2_FLASHINFER_BYTES = 8  # top_k_mask_logits' fp32 output and its softmax, live together (0.33's warmup pass)
V2_WARMUP_FROM = (0, 33, 0)  # the V2 profile run's second, warmup-parameter sampler pass
_V2_NO_COPY_FROM = (0, 28, 0)  # apply_sampling_params returns the logits untouched when no row needs processing
_FLASHINFER_CAPABILITY = ((8, 0), (12, 1))  # FlashInferBackend.supports_compute_capability, 0.33.0 L696-704
_FLASHINFER_MIN_SMS = 17  # "top-k masking requires more than 16 SMs"


def v2_bytes_per_logit(version: tuple[int, ...], logits_bytes: int = 2, flashinfer: bool = True) -> int:
    """Bytes per logit of the V2 runner's dummy sampler run at its peak: the model-dtype logits, plus their fp32
    copy but on 0.26.x (in place) and 0.28-0.32 (no row needs processing); 0.33's warmup pass copies them and, in
    FlashInfer's sampler (`flashinfer`), masks and softmaxes the copy into two more fp32 tensors."""
    if version >= V2_WARMUP_FROM:
        return logits_bytes + V2_FP32_COPY_BYTES + (V2_FLASHINFER_BYTES if flashinfer else 0)
    if version >= _V2_NO_COPY_FROM or (0, 26, 0) <= version < (0, 27, 0):
        return logits_bytes
    return logits_bytes + V2_FP32_COPY_BYTES


def v2_flashinfer(gpu, flashinfer: bool | None = None) -> bool:
    """Whether 0.33's warmup pass samples in FlashInfer's fused kernel: as a log says it (`flashinfer`), else on an
    NVIDIA GPU of capability 8.0-12.1 with more than 16 SMs (a profile without the capability or SM count is taken
    to qualify, as the H100 of the corpus does; so is a GPU known only by its memory); never on AMD or another
    vendor (vLLM's CUDA platform only)."""
    if flashinfer is not None:
        return flashinfer
    if vendor_of(gpu) not in ("NVIDIA", "", "UNKNOWN"):  # (as estimate_subtracted)
        return False
    cap, sms = getattr(gpu, "capability", None), getattr(gpu, "sm_count", None)  # GpuProfile.capability
    low, high = _FLASHINFER_CAPABILITY
    return (cap is None or low <= cap <= high) and (sms is None or sms >= _FLASHINFER_MIN_SMS)


def v2_sampler_bytes(version: tuple[int, ...], rows: int, vocab: int, logits_bytes: int = 2, gpu=None,
                     flashinfer: bool | None = None) -> int:
    """Bytes of the V2 runner's dummy sampler run at its peak (rows x vocab logits): per logit as
    v2_bytes_per_logit says, plus, in 0.33's warmup pass without FlashInfer, the Triton top-k/top-p buffer of
    min(next_power_of_2(min(SMs, rows)), SMs) fp32 vocabulary rows (any row count: 0.33 has no 8-row floor)."""
    fused = version >= V2_WARMUP_FROM and v2_flashinfer(gpu, flashinfer)
    per_logit = v2_bytes_per_logit(version, logits_bytes, fused)
    buffer = 0
    if version >= V2_WARMUP_FROM and not fused and _has_triton(gpu):  # (triton_rows: 0 for no rows)
        buffer = triton_rows(rows, sm_count_of(gpu), min_rows=1) * vocab * TRITON_BUFFER_BYTES
    return per_logit * rows * vocab + buffer


V2_STATES_COUNTED_FROM = (0, 27, 0)  # mem_utils.py memory_profiling: total_consumed from 0.27.0 (L317-326)
STATE_BYTES = 4  # output_bin_counts, prompt_bin_mask, grammar_bitmask: torch.int32


def v2_state_bytes(version: tuple[int, ...], max_num_seqs: int, vocab: int, draft_tokens: int = 0) -> int:
    """Bytes of the V2 runner's per-request x vocabulary sampling states that vLLM's KV budget loses (0 where it
    does not): PenaltiesState's output_bin_counts [R, V] and prompt_bin_mask [R, cdiv(V, 32)], and
    StructuredOutputsWorker's grammar_bitmask [R x decode_query_len, cdiv(V, 32)], all int32, R = max_num_seqs,
    built with the model runner before the profile run (module docstring). Counted from 0.27.0, whose budget takes
    the free-memory drop since the start-up snapshot; 0.22-0.26 subtract weights + torch peak increase + non-torch
    increase, none of which holds them. decode_query_len is 1 + `draft_tokens` (gpu/model_runner.py 0.27.0
    L345-348, 0.33.0 L439-442: the speculative steps + one sampled token a step)."""
    if version < V2_STATES_COUNTED_FROM:
        return 0
    packed = -(-vocab // 32)  # cdiv(vocab_size, 32)
    return STATE_BYTES * max_num_seqs * (vocab + (2 + draft_tokens) * packed)


def sort_sampler(version: tuple[int, ...], flashinfer: bool | None = None, rows: int = TRITON_MIN_ROWS) -> bool:
    """Whether the dummy sampler ran the sort-based top-k/top-p (path 2): by release where nothing says
    (0.11-0.16), else by whether FlashInfer's sampler ran (`flashinfer`, as the log says it). From 0.17 a batch of
    8 or more rows without FlashInfer takes the Triton kernel; fewer rows (`--max-num-seqs` below 8) still sort
    (`apply_top_k_top_p_pytorch`, 0.19.0 L258-296; it scatters in place where 0.16 made a new tensor, 4 B per
    logit less than the fitted 38.14 B, not priced apart)."""
    if version >= (0, 17, 0):
        return flashinfer is not True and rows < TRITON_MIN_ROWS
    if flashinfer is None:
        return (0, 11, 0) <= version < (0, 17, 0)
    return not flashinfer and version >= (0, 8, 0)


def triton_sampler(version: tuple[int, ...], flashinfer: bool | None = None) -> bool:
    """Whether the dummy sampler ran the Triton top-k/top-p (path 3): 0.17.0+ unless FlashInfer's sampler ran."""
    return version >= (0, 17, 0) and flashinfer is not True


def sampler_note(version: tuple[int, ...], flashinfer: bool | None, v1: bool | None = None) -> str | None:
    """A note where flashinfer_sampler is given for a run on which it changes nothing: V0's (before 0.8, or a 0.8-0.10
    run on the V0 fallback, `v1` False: its profile run is priced by activation_estimate, no sampler term); None where
    it is unset or moves the sampler term."""
    if flashinfer is None or (version >= (0, 8, 0) and v1 is not False):
        return None
    release = dotted(version)
    return (f"flashinfer_sampler={str(flashinfer).lower()} changes nothing for vLLM {release}: V0's profile run is "
            "priced without a sampler term")


def sm_count_of(gpu) -> int:
    """The multiprocessor count vLLM's Triton sampler reads: the profile's `sm_count`, else the corpus machine's."""
    return getattr(gpu, "sm_count", None) or CORPUS_SM_COUNT


def triton_rows(rows: int, sms: int, min_rows: int = TRITON_MIN_ROWS) -> int:
    """Rows of `_TRITON_BUFFER_CACHE` for a batch of `rows` on a GPU of `sms` multiprocessors (0 below `min_rows`:
    8 in V1's sampler, 1 in the V2 runner's 0.33 warmup pass, which has no floor)."""
    if rows < max(1, min_rows):
        return 0
    programs = min(sms, rows)
    return min(1 << (programs - 1).bit_length(), sms)  # next_power_of_2(programs), capped at the SM count


def _has_triton(gpu) -> bool:
    """Whether vLLM's platform for `gpu` has the Triton sampler (CUDA, ROCm, or a GPU known only by its memory)."""
    return str(getattr(gpu, "vendor", "unknown") or "unknown").upper() in _TRITON_VENDORS


def triton_buffer_bytes(version: tuple[int, ...], rows: int, vocab: int, gpu=None,
                        flashinfer: bool | None = None) -> int:
    """Bytes of the Triton top-k/top-p buffer the profile run leaves allocated (0 where that path does not run or
    the platform has no Triton sampler, e.g. Gaudi)."""
    if not triton_sampler(version, flashinfer):
        return 0
    if not _has_triton(gpu):
        return 0
    return triton_rows(rows, sm_count_of(gpu)) * vocab * TRITON_BUFFER_BYTES


def sm_count_missing(version: tuple[int, ...], gpu, flashinfer: bool | None = None,
                     rows: int = TRITON_MIN_ROWS) -> bool:
    """Whether a plan's sampler term assumed CORPUS_SM_COUNT for an NVIDIA or AMD profile that gives no sm_count
    (the dummy run samples `rows`; below 8 no Triton buffer is sized)."""
    vendor = vendor_of(gpu)
    return (triton_sampler(version, flashinfer) and rows >= TRITON_MIN_ROWS and vendor in ("NVIDIA", "AMD")
            and getattr(gpu, "sm_count", None) is None)


def v2_sm_count_missing(version: tuple[int, ...], gpu, flashinfer: bool | None = None) -> bool:
    """Whether the V2 runner's sampler term assumed CORPUS_SM_COUNT for an NVIDIA or AMD profile that gives no
    sm_count: 0.33's warmup pass reads it where no log says which sampler ran (FlashInfer's needs more than 16 SMs
    on NVIDIA; the Triton buffer is sized by it elsewhere)."""
    vendor = vendor_of(gpu)
    return (version >= V2_WARMUP_FROM and flashinfer is not True and vendor in ("NVIDIA", "AMD")
            and getattr(gpu, "sm_count", None) is None)


def v2_capability_read(version: tuple[int, ...], gpu, flashinfer: bool | None = None) -> bool:
    """Whether 0.33's warmup pass read the NVIDIA GPU's compute capability (FlashInfer's sampler: 8.0-12.1),
    i.e. no log said which sampler ran."""
    vendor = vendor_of(gpu)
    return version >= V2_WARMUP_FROM and flashinfer is None and vendor == "NVIDIA"
