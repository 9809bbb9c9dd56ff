"""vLLM V0's chunked prefill turned on by the engine itself over a 32K max_model_len: whether it is, and its budget.

Why: V0 (the default engine before 0.8.0) left alone profiles and schedules max(max_model_len, 2048) tokens a step, but
from 0.5.3, where `--enable-chunked-prefill` is not given and max_model_len > 32,768, `EngineArgs.create_engine_config`
turns chunked prefill on ("to avoid OOM errors in the initial memory profiling phase") unless one of a release's
exclusions holds, and SchedulerConfig then sets the budget to 512 tokens (2,048 from 0.6.5). Read in the PyPI wheels
(`vllm/engine/arg_utils.py`, the `use_long_context` block; `vllm/config.py` SchedulerConfig):

  * 0.5.0-0.5.2: no such rule (0.5.2 arg_utils has no `use_long_context`; config.py L768 sets 512 only when asked).
  * 0.5.3-0.6.0 (0.5.3 L747-761, 0.5.4 L747-765, 0.6.0 L843-861): on where device_type is "cuda" (ROCm builds too:
    0.6.2 `config.py` L1066-1069, `platforms/interface.py` L47-49) and no sliding window, speculative model, LoRA,
    prompt adapter or prefix caching; from 0.5.4 also no seqlen-agnostic (recurrent state) layers. Budget 512
    (0.5.3 `config.py` L805, 0.6.0 L977).
  * 0.6.1-0.6.2 (0.6.1 L872-889, 0.6.2 L909-929): prefix caching no longer an exclusion; 0.6.2 leaves a multimodal
    model off. Budget 512 (0.6.2 `config.py` L985-988).
  * 0.6.3-0.6.4 (0.6.3 L936-952, 0.6.4 L996-1012): recurrent layers no longer an exclusion. Budget 512 (0.6.4
    `config.py` L1114).
  * 0.6.5-0.7.x (0.6.5 L1064-1085, 0.6.6 L1081-1102, 0.7.3 L1164-1186): not on ROCm (`not current_platform.is_rocm()`),
    not for a pooling runner; budget 2,048 (0.6.5 `config.py` L1344, 0.6.6 L1438, 0.7.3 L1532).
  * 0.8.0-0.10.x, where a run falls back to V0 (kvplan.engines.vllm.v0_fallback): `_set_default_args_v0` keeps the
    0.7 rule (only on CUDA, `is_gpu = current_platform.is_cuda()`) and leaves a multimodal or MLA model off (0.8.5
    L1506-1530, 0.10.1 L1527-1552); budget 2,048 (0.8.5 `config.py` L68, L1977; 0.10.1 `config/scheduler.py`
    L189-190) and max_num_seqs 256 (0.10.1 L1580-1582).

An explicit `--enable-chunked-prefill` (engine option enable_chunked_prefill) decides instead, at any length; an
explicit `--max-num-batched-tokens` replaces the budget either way (SchedulerConfig sets one only when it is None).
The usage context (LLM class or OpenAI server) is read only by `_override_v1_engine_args` under VLLM_USE_V1 (0.6.6
arg_utils L1014-1017, L1258-1279), so V0's rule is the same for both. Assumed and said: one scheduler step
(`--num-scheduler-steps` 1: with more, the budget is max(max_model_len, 2048), 0.6.6 `config.py` L1429-1434), no
prompt adapter, and V0's prefix caching off (its default). An MLA model keeps kvplan's V0 MLA rule
(kvplan.engines.vllm.v0_mla; 0.7.x forces its chunked prefill off again, `config.py` L3327-3331).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.registry import canonical_engine
from kvplan.engines.versions import dotted, parse_version
from kvplan.hardware.facts import vendor_of
from kvplan.model.layers import Kind, has_mla
from kvplan.model.recurrent import recurrent_states

LONG_CONTEXT = 32768  # `use_long_context = max_model_len > 32768`
FIRST = (0, 5, 3)  # the first release with the rule
LAST = (0, 8, 0)  # V1 is the default from here (a 0.8.0-0.10.x run may fall back: kvplan.engines.vllm.v0_fallback)


def budget_for(v: tuple[int, ...]) -> int:
    """SchedulerConfig's chunked-prefill budget: 512 before 0.6.5, then 2,048."""
    return 512 if v < (0, 6, 5) else 2048


def exclusion(v: tuple[int, ...], model, gpu, lora) -> str:
    """What keeps release `v` from turning chunked prefill on for `model` on `gpu`, in words; "" where nothing does."""
    kinds = {layer.kind for layer in model.layers}
    checks = (
        (Kind.SLIDING in kinds, "the model has sliding-window layers"),
        (getattr(model, "speculative", None) is not None, "speculative decoding is on"),
        (lora is not None, "LoRA is on"),
        ((0, 5, 4) <= v < (0, 6, 3) and bool(recurrent_states(model.layers)), "the model has recurrent-state layers"),
        (v >= (0, 6, 2) and bool(model.params.vision), "the model is multimodal"),
        (v >= (0, 6, 5) and vendor_of(gpu) == "AMD", "ROCm is excluded from 0.6.5"),
    )
    return next((why for hit, why in checks if hit), "")


def chunk_budget(v: tuple[int, ...], model, gpu, length: int, lora, asked: bool | None,
                 v0: bool | None = None) -> tuple[int | None, str]:
    """(the V0 step budget where chunked prefill is on, else None; the note saying why) for release `v` serving
    `model` at max_model_len `length`. `asked`: an explicit enable_chunked_prefill (None: not given); `v0`: the run
    is on V0 (None: by release, before 0.8.0; from 0.8.0 where it falls back, kvplan.engines.vllm.v0_fallback)."""
    v0 = v < LAST if v0 is None else v0
    if asked is not None and not v0:
        raise KvplanError(f"{arg('engine_opts')} enable_chunked_prefill is read for vLLM's V0 engine only; "
                          f"{dotted(v)} runs V1 here, whose chunked prefill kvplan plans as always on", EXIT_USAGE,
                          param="engine_opts", value={"enable_chunked_prefill": asked})
    if not v0:
        return None, ""
    if has_mla(model.layers):  # kvplan.engines.vllm.v0_mla's rule
        if asked is not None:
            raise KvplanError(f"{arg('engine_opts')} enable_chunked_prefill is not modelled for an MLA model on vLLM's "
                              f"V0 (kvplan plans its unchunked profile)", EXIT_USAGE, param="engine_opts",
                              value={"enable_chunked_prefill": asked})
        return None, ""
    budget = budget_for(v)
    if asked is not None:
        return ((budget, f"vLLM {dotted(v)} V0: chunked prefill on as asked, {budget:,} tokens a step"
                 + rocm_caveat(gpu))
                if asked else (None, f"vLLM {dotted(v)} V0: chunked prefill off as asked, max(max_model_len, 2048) = "
                                     f"{max(length, 2048):,} tokens a step"))
    if v < FIRST or length <= LONG_CONTEXT:
        return None, ""
    why = exclusion(v, model, gpu, lora)
    if why:
        return None, (f"vLLM {dotted(v)} V0 leaves chunked prefill off at max_model_len {length:,} > 32,768 because "
                      f"{why}: max(max_model_len, 2048) = {max(length, 2048):,} tokens a step")
    return budget, (f"vLLM {dotted(v)} V0 turns chunked prefill on by itself at max_model_len {length:,} > 32,768: "
                    f"{budget:,} tokens a step (assumed: --num-scheduler-steps 1, prefix caching off, no prompt "
                    f"adapter; enable_chunked_prefill=false plans it off)" + rocm_caveat(gpu))


def rocm_caveat(gpu) -> str:
    """What kvplan's speed figures leave out where V0 chunks its prefill on ROCm, in words ("" on other GPUs).

    Why: ROCm's V0 backend runs a prefill whose block tables are filled, as chunked prefill fills them, through
    `PagedAttention.forward_prefix`, vLLM's Triton prefix-prefill kernel, not its flash attention
    (vllm-project/vllm@00df3429:vllm/attention/backends/rocm_flash_attn.py, "prefix-enabled attention", an earlier
    revision read), and vllm-project/vllm#11146 (2024-12-12) turned the automatic chunked prefill off on ROCm from
    0.6.5 for "a suboptimal triton kernel". The speed terms price that attention at the flash rate; the training
    corpus's one such run (dstack's Llama-3.1-405B on 8 MI300X, vLLM 0.6.3.dev116, single prompts of 16,000 to
    128,000 tokens) took 2.9 to 8.1 times the first-token time kvplan priced, and no source gives the kernel's rate
    (docs/speed-history.md, round 35)."""
    if vendor_of(gpu) != "AMD":
        return ""
    return ("; on ROCm its prefill attention runs vLLM's Triton prefix-prefill kernel, not flash attention "
            "(vllm-project/vllm#11146), which the speed figures do not price: expect a slower first token, "
            "several times slower at long prompts")


def serve_flag(v: tuple[int, ...], asked: bool | None) -> list[str]:
    """`vllm serve`'s flag for an explicit enable_chunked_prefill: a plain switch before 0.5.3 (`store_true`, 0.5.2
    arg_utils L482-485), then StoreBoolean's `--enable-chunked-prefill=True|False` (0.5.3 L514-520, L897-900)."""
    if asked is None:
        return []
    if v < FIRST:
        return ["--enable-chunked-prefill"] if asked else []
    return [f"--enable-chunked-prefill={asked}"]


def server_sized(engine: str | None, version: str | None, v1: bool | None = None) -> bool:
    """Whether `engine` at `version` takes its default step budget from the server's max_model_len, not from the
    requests it serves: vLLM's V0 (max(max_model_len, 2048), or this rule's budget over 32K); `v1`: whether the run
    is on V1 (None: by release; a 0.8.0-0.10.x run the oracle sends to V0 is V0, kvplan.engines.vllm.v0_fallback)."""
    if not engine or canonical_engine(engine) != "vllm" or version is None:
        return False
    return parse_version(version) < LAST if v1 is None else not v1
