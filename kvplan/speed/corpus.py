"""The speed corpus (tests/fixtures/speed/*.yaml, schema in its README.md) read into cases to fit and to score.

A case is one published measurement: the deployment (engine, GPU profile, catalog model, tp / ep / dp, dtypes), its
`Load` and its figures in seconds or tokens/s (mean where stated, else median or the one value; MLPerf's ns read as
such). A point is skipped, with its reason counted, when its model is not in the catalog (kvplan_model null), its GPU is
not a profile key, its engine is not one of the four, or its lengths cannot be told. Lengths: isl/osl, else a drawn
distribution's stated totals over num_prompts, else its mean, else a random length with a range ratio r as
len x (1 + r) / 2 (SGLang's and vLLM's uniform draw); a dataset (ShareGPT) only through the stated totals or the
total / output throughput ratio (input tokens = (total - output) / request rate); a stated osl is the most a request may
generate, so where the run's output tokens/s over its requests/s says fewer were (its requests stopped at end of
sequence), that mean is the osl (`generated`). Output lengths that differ request to request (no fixed osl and no range
ratio of 1, or a stated osl the requests stopped short of) are `drawn` (kvplan.speed.load.group). A point at a finite
request rate names its arrival process (`arrival`: poisson | gamma(k) | constant | closed | burst | unstated; absent
reads as unstated), which sets the open loop's queueing wait (kvplan.speed.load); any other value is refused. `harness`
names a benchmark tool that sets the engine's limits itself (trtllm-bench: kvplan.bench.running); `sliding_window: none`
a run whose engine applied none of the model's sliding windows (kvplan.speed.fit.Built prices the model without them); a
run stating its engine's CUDA graphs off (vLLM's --enforce-eager, SGLang's --disable-cuda-graph, TensorRT-LLM's
use_cuda_graph false or cuda_graph_config null: kvplan.speed.fields.graphless) is skipped, as is a point marked `layout:
unstated` (several GPUs whose tp / dp split the source does not give, where the harness does not run them as one
group). A per-GPU total (input + output) throughput whose definition the point states (`per_gpu_total`) is read as
output tok/s where no output rate is stated
(kvplan.speed.pergpu). The named fields (`backend`, `harness_kind`, `sliding_window`, `arrival`) are checked by
kvplan.speed.fields.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.speed.eras import era_of
from kvplan.speed.fields import (GRAPHS_OFF, arrival_of, backend_of, bool_flags_check, graphless, harness_kind_of,
                                 served, windowed_of)
from kvplan.speed.frontend import endpoint_of
from kvplan.speed.load import Load
from kvplan.speed.pergpu import check as per_gpu_total_check, output_rate as per_gpu_total_output
from kvplan.speed.spread import SHAREGPT_OUTPUT_CV2, random_range_cv2

ENGINES = ("vllm", "sglang", "trtllm", "llama.cpp")
DEFAULT_MAX_SEQS = {"vllm": 256, "sglang": 4096, "trtllm": 2048, "llama.cpp": 1}  # a cap; KV room binds first
# A running limit the run stated. gpu_batch_size is NVIDIA's MLPerf harness's: the TensorRT-LLM engine's
# max_batch_size, of each engine instance (one tp x pp group of GPUs; the runtime limit defaults to it)
# (mlcommons/inference_results_v5.1@965182b03376a00fcae415c54e560e1c83937932:closed/NVIDIA/code/llmlib/config.py,
# TrtllmHarnessConfig: build max_batch_size = GeneralizedBatchSize().e2e(), the config's gpu_batch_size).
RUNNING = ("max_num_seqs", "max_running_requests", "max_batch_size", "gpu_batch_size")
# Engines whose running limit under attention DP is each attention rank's, and that flag: TensorRT-LLM's
# max_batch_size with enable_attention_dp (the same file, TrtllmEndpointConfig: "max-bs applies per attention-rank").
# Under the flag TensorRT-LLM's tensor_parallel_size counts the attention ranks, each with its own requests and pool
# (kvplan.engines.trtllm.layout): a point that states tp N with it is read as N attention-DP ranks (tp 1, dp N), as
# one that states only its GPUs is, and the flag's limit is each rank's (kvplan.bench.running sizes the ranks).
PER_RANK_LIMIT = {"trtllm": "enable_attention_dp"}
# Engines whose DP attention is a flag over ranks the run counts as one tensor-parallel group, and that flag. SGLang's
# `--tp N --dp D --enable-dp-attention` runs on N GPUs, not N x D: its --tp-size counts every rank, each of the D
# attention replicas has N / D of them, and its MoE runs over all N (tensor parallel, or expert parallel with
# --ep / a DeepEP or MegaMoE backend), so the experts a rank holds serve every replica's tokens (kvplan.engines.sglang
# .engine.settings: tp_size = tp x dp; kvplan.planning.layout: experts over tp x dp). A case is read in kvplan's
# terms: tp the attention replica's, ep the MoE group's (its tensor-parallel split priced as expert parallel).
# --max-running-requests is the deployment's too: each DP-attention worker gets // dp_size (0.5.4 wheel
# `model_executor/model_runner.py` L1657-1666, "Init max running requests", as kvplan.engines.sglang.mamba cites it).
# vLLM's --tensor-parallel-size and max_num_seqs are one data-parallel rank's; TensorRT-LLM's attention DP is read
# with tp 1 already (case_of).
DP_ATTENTION = {"sglang": "enable_dp_attention"}
PREFIX_CACHE_OFF = {"sglang": "disable_radix_cache"}  # the flag that turns an engine's prefix cache off
BOOL_FLAGS = ("enable_attention_dp", "disable_custom_all_reduce", *DP_ATTENTION.values(), *PREFIX_CACHE_OFF.values(),
              *(key for key, _ in GRAPHS_OFF.values()))  # true / false only (_on; model.NCCL_FLAGS; fields.GRAPHS_OFF)
ATTENTION_BACKEND = {"sglang": "attention_backend"}  # the flag that names an engine's attention backend
# The flag that names an engine's MoE kernel, and the values that run TensorRT-LLM-gen's fused MoE through FlashInfer
# (trtllm_fp8_block_scale_moe / trtllm_fp4_block_scale_moe: sgl-project/sglang@dec8155f6d073c78b0c7fd94953b838eccbdf9df
# :python/sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py, fused_experts_none_to_flashinfer_trtllm_fp8)
MOE_RUNNER, TRTLLM_GEN_MOE = {"sglang": "moe_runner_backend"}, ("flashinfer_trtllm",)
TRAIN_SHARE = 70  # percent of sources (by hash) the coefficients are fitted on
def in_training(source_id: str) -> bool:
    """The split rule: a source trains when the first two bytes of sha256(id), as a number, mod 100 < 70."""
    h = hashlib.sha256(source_id.encode()).digest()
    return (h[0] * 256 + h[1]) % 100 < TRAIN_SHARE


@dataclass
class Case:
    source: str
    id: str
    engine: str
    gpu: str
    model: str
    tp: int
    ep: int
    dp: int
    gpus: int
    weight_dtype: str | None
    kv_dtype: str | None
    load: Load
    targets: dict = field(default_factory=dict)  # metric -> value (s, or tokens/s)
    max_seqs: int | None = None  # the running limit the run stated, per data-parallel replica (DP_ATTENTION)
    date: str = ""
    era: str = ""  # the coefficient set (era_of): the engine, or an older version era
    version: str | None = None  # the engine's release as stated
    flags: dict = field(default_factory=dict)  # the engine flags the run stated (dashes read as underscores)
    pp: int = 1  # pipeline stages (the load then counts dp x pp micro-batch replicas: kvplan.speed.fit.Built)
    harness: str | None = None  # the benchmark tool as stated (`harness`), where the engine's settings depend on it
    windowed: bool = True  # False: the engine applied none of the model's sliding windows (`sliding_window: none`)


def _stat(v):
    if isinstance(v, dict):
        for k in ("mean", "value", "median"):
            if v.get(k) is not None:
                return float(v[k])
        return None
    return None if v is None else float(v)


# kvplan's TPOT is a run's decode time over its decode tokens, (E2E - TTFT) / (osl - 1) at the means
# (kvplan.speed.load): the mean gap between tokens over every token, the benchmark's mean ITL. The mean TPOT a
# benchmark prints is another average, of each request's own (latency - ttft) / (output_len - 1)
# (vllm-project/vllm@0049e29c41fd383bda519a3f250e3227713081ef:benchmarks/benchmark_serving.py, calculate_metrics:
# mean_tpot_ms over `tpots`, one per request; mean_itl_ms over `itls`, every gap pooled; SGLang's bench_serving
# likewise): where output lengths vary (ShareGPT, random lengths with a range ratio) it weighs a request of two
# tokens, whose one gap waits behind other requests' prefills, as much as one of 2,000 (GPUStack's ShareGPT runs:
# mean TPOT 1.2-3.4x the mean ITL). So where a run printed both means, the mean ITL is the figure compared, unless
# it is the longer of the two: the client's chunks then carried several tokens (speculative decoding, a stream
# interval) and a gap is a chunk's, not a token's; the mean TPOT stays there.


def _mean(metrics: dict, name: str) -> float | None:
    """The stated mean of `name` (ttft, tpot, itl, e2el) in seconds, or None."""
    for unit, div in (("ms", 1e3), ("ns", 1e9)):
        v = metrics.get(f"{name}_{unit}")
        if isinstance(v, dict) and v.get("mean") is not None and float(v["mean"]) > 0:
            return float(v["mean"]) / div
    return None


def targets(metrics: dict, gpus: int) -> dict:
    out = {}
    for name in ("ttft", "tpot", "e2el", "itl"):
        for unit, div in (("ms", 1e3), ("ns", 1e9)):
            v = _stat(metrics.get(f"{name}_{unit}"))
            if v is not None and v > 0:
                out[name] = v / div
    if "tpot" not in out and "itl" in out:
        out["tpot"] = out["itl"]
    itl, tpot = _mean(metrics, "itl"), _mean(metrics, "tpot")
    if itl and tpot and itl <= tpot:  # the per-token mean kvplan's TPOT is (above)
        out["tpot"] = itl
    out.pop("itl", None)
    if "tpot" not in out and metrics.get("per_user_output_throughput"):
        out["tpot"] = 1.0 / float(metrics["per_user_output_throughput"])
    for name in ("output_throughput", "request_throughput", "total_throughput", "pp_tok_s", "tg_tok_s"):
        v = _stat(metrics.get(name))
        if v:
            out[name] = v
    if "output_throughput" not in out and metrics.get("per_gpu_output_throughput"):
        out["output_throughput"] = float(metrics["per_gpu_output_throughput"]) * gpus
    return out


def median_gap(metrics: dict) -> bool:
    """Whether a point's TPOT figure (targets) is the median gap between tokens: no TPOT stated, and its ITL only as
    a median (the JSONL lines of sglang.bench_serving's late-2024 releases carry median_ttft_ms, median_itl_ms and
    mean_e2e_latency_ms, no mean ITL: the datacrunch-h200-sglang-outputs rows). The client pools every request's
    gaps and takes their median (sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c:python/sglang/
    bench_serving.py, `calculate_metrics`: itls += outputs[i].itl, median_itl_ms = np.median(itls)), so a few long
    gaps (a prefill batch run between two decode steps) move it little: kvplan.speed.load prices it apart."""
    if any(metrics.get(f"tpot_{u}") is not None for u in ("ms", "ns")) or metrics.get("per_user_output_throughput"):
        return False
    for unit in ("ms", "ns"):
        v = metrics.get(f"itl_{unit}")
        if v is not None:
            return isinstance(v, dict) and v.get("mean") is None and v.get("value") is None and v.get("median") is not None
    return False


def _length(p: dict, side: str, metrics: dict) -> float | None:
    fixed = p.get("isl" if side == "in" else "osl")
    if fixed:
        return float(fixed)
    dist = p.get("input_dist" if side == "in" else "output_dist") or {}
    n = p.get("num_prompts")
    total = dist.get(f"total_{'input' if side == 'in' else 'output'}_tokens")
    if total and n:
        return float(total) / float(n)
    if dist.get("mean"):
        return float(dist["mean"])
    nominal = dist.get(f"random_{'input' if side == 'in' else 'output'}_len")
    if nominal and dist.get("range_ratio") is not None:
        return float(nominal) * (1 + float(dist["range_ratio"])) / 2
    rr, out_t, tot = (_stat(metrics.get(k)) for k in ("request_throughput", "output_throughput", "total_throughput"))
    if rr and out_t:
        if side == "out":
            return out_t / rr
        if tot:
            return (tot - out_t) / rr
    return None


def drawn_lengths(p: dict) -> bool:
    """Whether a point's output lengths differ request to request: no fixed osl, and not a random draw pinned by a
    range ratio of 1 (a dataset's own lengths; a random range, SGLang's bench_serving default 0.0 drawing
    uniformly up to the stated length)."""
    if p.get("osl"):
        return False
    ratio = (p.get("output_dist") or {}).get("range_ratio")
    return ratio is None or float(ratio) < 1


def output_cv2(p: dict, made: float | None = None) -> float:
    """The squared coefficient of variation of a point's output lengths (kvplan.speed.spread): 0 where they are
    all the same (drawn_lengths false); a random range's uniform draw as the engine's own client draws it (vLLM's
    vllm bench serve on [L (1 - r), L (1 + r)], its default ratio 0.0 where none is stated; otherwise
    sglang.bench_serving's on [r L, L], its default 0.0: spread.random_range_cv2); every corpus point with a random range names its
    engine's client; ShareGPT's cited SHAREGPT_OUTPUT_CV2 (`dataset` or the output_dist's kind names
    it); a dataset's cited spread where the point states it (output_dist `cv2`, its citation under `inferred`: MLPerf's
    DeepSeek-R1 set, whose reference outputs are the model's own). A run whose requests stopped at end of sequence
    (`made`, generated) and any other dataset have a spread no source gives: 0, priced as if every request had the
    mean's length (the running set unbiased)."""
    if made or not drawn_lengths(p):
        return 0.0
    dist = p.get("output_dist") or {}
    if dist.get("cv2") is not None:
        return max(0.0, float(dist["cv2"]))
    kind = f"{dist.get('kind') or ''} {p.get('dataset') or ''}".lower()
    if dist.get("random_output_len") or dist.get("range_ratio") is not None or kind.split() == ["random", "random"]:
        return random_range_cv2(p.get("engine"), dist.get("range_ratio"))
    if "sharegpt" in kind:
        return SHAREGPT_OUTPUT_CV2
    return 0.0


SHORT = 0.9  # a run's outputs stopped early: fewer than this share of the stated osl generated on average
RATE_FLOOR = 0.1  # requests/s: below it a request rate printed to 0.01 cannot tell 10% apart


def generated(p: dict, metrics: dict) -> float | None:
    """The output tokens a run generated per request, where its figures show fewer than the stated `osl`: a
    stated output length is the most a request may generate (`vllm bench serve` sends it as max_tokens and,
    without --ignore-eos, a request stops at the model's end of sequence), so the block's output tokens/s over
    its requests/s, below SHORT x osl, is what ran (gpt-oss on random prompts: 105 of 200). None where the
    point states no osl, no such pair of figures, a request rate too coarse to tell (RATE_FLOOR), or no shortfall."""
    osl = p.get("osl")
    rr, out_t = (_stat(metrics.get(k)) for k in ("request_throughput", "output_throughput"))
    if not osl or not rr or not out_t or rr < RATE_FLOOR:
        return None
    made = out_t / rr
    return made if made < SHORT * float(osl) else None


def _int(v, default: int) -> int:
    try:
        return int(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def _on(flags: dict, key: str | None) -> bool:
    """Whether a run's boolean flag `key` is stated true (None: the engine has no such flag)."""
    return key is not None and str(flags.get(key, "")).lower() == "true"


def prefix_cache(case: Case) -> bool:
    """Whether a case's engine ran with its prefix cache on (its default), not turned off by a flag it states
    (PREFIX_CACHE_OFF: SGLang's disable_radix_cache)."""
    return not _on(case.flags or {}, PREFIX_CACHE_OFF.get(case.engine))


def attention_backend(case: Case) -> str | None:
    """The attention backend a case's run names (ATTENTION_BACKEND: SGLang's --attention-backend), None: the
    engine's default (kvplan.speed.mlaform)."""
    key = ATTENTION_BACKEND.get(case.engine)
    value = (case.flags or {}).get(key) if key else None
    return str(value) if value else None


def trtllm_gen_moe(case: Case) -> bool:
    """Whether a case's run names TensorRT-LLM-gen's fused MoE as its MoE kernel (MOE_RUNNER, TRTLLM_GEN_MOE), whose
    shortfall at few tokens an expert is not the one its engine's set fits (kvplan.speed.terms, `grouped`)."""
    key = MOE_RUNNER.get(case.engine)
    return bool(key) and str((case.flags or {}).get(key) or "") in TRTLLM_GEN_MOE


def attention_dp(case: Case) -> bool:
    """Whether a case's data-parallel replicas are attention-DP ranks of one engine (SGLang's DP attention,
    TensorRT-LLM's attention DP), not independent engines (MLPerf harnesses' one engine per tp x pp group)."""
    flags = case.flags or {}
    return _on(flags, "enable_attention_dp") or _on(flags, DP_ATTENTION.get(case.engine))


def _refused(p: dict, engine, flags: dict) -> str:
    """Why a point is not priced, before its load is read ("" where nothing refuses it)."""
    if engine not in ENGINES:
        return f"engine {engine} not fitted"
    if not p.get("kvplan_model"):
        return "model not in the catalog"
    if not p.get("gpu"):
        return "GPU not a profile key"
    if str(p.get("layout") or "").lower() == "unstated":  # several GPUs whose tp / dp the source does not give
        return "layout not stated"
    if off := graphless(engine, flags):  # kvplan.speed.fields.GRAPHS_OFF
        return f"run without CUDA graphs (eager, {off}), which no set is fitted on"
    return ""


def case_of(p: dict, source: str, date: str) -> tuple[Case | None, str]:
    """(the case, "") or (None, why it is skipped)."""
    engine = p.get("engine")
    flags = {str(k).replace("-", "_"): v for k, v in (p.get("flags") or {}).items()}  # as written, dashes read as _
    if why := _refused(p, engine, flags):
        return None, why
    metrics = p.get("metrics") or {}
    gpus = max(1, _int(p.get("gpus"), 1))
    pp = max(1, _int(p.get("pp"), 1))
    dp = max(1, _int(p.get("dp"), 1))
    attn_dp = _on(flags, "enable_attention_dp")
    ranks = attn_dp and dp == 1 and engine in PER_RANK_LIMIT  # its tp counts attention ranks (PER_RANK_LIMIT)
    if ranks or (attn_dp and dp == 1 and not p.get("tp")):
        dp = max(1, gpus // pp)
    tp = 1 if ranks else _int(p.get("tp") or flags.get("tp") or flags.get("tp_size"), max(1, gpus // (pp * dp)))
    ep = _int(p.get("ep"), tp * dp if attn_dp else 1)
    t = targets(metrics, gpus)
    if p.get("n_prompt") is not None or p.get("n_gen") is not None:  # a llama-bench test
        if not t:
            return None, "no metric kvplan predicts"
        load = _bench_load(p, t)
        if load is None:
            return None, "llama-bench test not told (n_prompt / n_gen)"
    else:
        isl, osl = _length(p, "in", metrics), _length(p, "out", metrics)
        out = per_gpu_total_output(p, t, gpus, isl, osl)  # a per-GPU total read as output tok/s (kvplan.speed.pergpu)
        if out:
            t["output_throughput"] = out
        if not t:
            return None, "no metric kvplan predicts"
        if not isl or not osl:
            return None, "lengths not stated"
        made = generated(p, metrics)
        osl = made or osl
        rate = p.get("request_rate")
        rate = math.inf if rate in ("inf", None) and not p.get("concurrency") else rate
        load = Load(isl, osl, _float(p.get("concurrency") or flags.get("batch_size")), _float(rate),
                    _float(p.get("num_prompts")), dp=dp * pp,  # a pipeline's stages: pp micro-batches in flight
                    arrival_cv2=arrival_of(p.get("arrival")), drawn=drawn_lengths(p) or bool(made),
                    out_cv2=output_cv2(p, made),
                    fixed=bool(p.get("isl") and p.get("osl") and not made), median_gap=median_gap(metrics),
                    served=served(engine, p), endpoint=endpoint_of(p))
    limit = _int(next((flags[k] for k in RUNNING if flags.get(k)), None), 0) or None
    if dp > 1 and _on(flags, DP_ATTENTION.get(engine)):  # the deployment's figures
        tp, ep = max(1, tp // dp), max(ep, tp)  # the attention replica's tp; the MoE over every rank
        limit = max(1, limit // dp) if limit else None  # the running limit per replica
    case = Case(source, str(p.get("id")), engine, p["gpu"], p["kvplan_model"], tp, ep, dp, gpus,
                p.get("weight_dtype") or None, p.get("kv_dtype") or None, load, t, limit,
                date, era_of(engine, p.get("version"), date if date not in ("", "None") else None,
                               backend_of(engine, p.get("backend")), harness_kind_of(engine, p.get("harness_kind"))),
                str(p["version"]) if p.get("version") else None, dict(flags), pp,
                p.get("harness") or None, windowed_of(p.get("sliding_window")))
    return case, ""


def _float(v):
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _bench_load(p: dict, t: dict) -> Load | None:
    depth = float(p.get("n_depth") or 0)
    ub = _int(p.get("ubatch"), 512)
    if t.get("pp_tok_s") and p.get("n_prompt"):
        t.pop("tg_tok_s", None)
        return Load(float(p["n_prompt"]), 0, bench="pp", depth=depth, ubatch=ub)
    if t.get("tg_tok_s") and p.get("n_gen"):
        t.pop("pp_tok_s", None)
        return Load(0, float(p["n_gen"]), bench="tg", depth=depth + float(p["n_gen"]) / 2)
    return None


def read_corpus(folder: Path) -> tuple[list[Case], dict]:
    """(cases, {reason: points skipped}) of every *.yaml in `folder`. libyaml's safe loader where PyYAML has it (the
    same documents as the pure-Python one, about 7x faster over the corpus: 1.1 against 8.5 CPU-s, 123 files)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    cases, skipped = [], {}
    for f in sorted(Path(folder).glob("*.yaml")):
        doc = yaml.load(f.read_text(), Loader=loader)
        src = doc["source"]
        defaults = doc.get("defaults") or {}
        for point in doc.get("points") or ():
            p = {**defaults, **point}
            try:
                arrival_of(p.get("arrival"))  # every point's, priced or skipped
                backend_of(p.get("engine"), p.get("backend"))
                harness_kind_of(p.get("engine"), p.get("harness_kind"))
                per_gpu_total_check(p)
                bool_flags_check(p.get("flags"), BOOL_FLAGS)
            except ValueError as e:
                raise ValueError(f"{f.name}, point {p.get('id')}: {e}") from None
            case, why = case_of(p, src["id"], str(src.get("date", "")))
            if case is None:
                skipped[why] = skipped.get(why, 0) + 1
            else:
                cases.append(case)
    return cases, skipped
