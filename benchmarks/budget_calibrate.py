"""The constants of kvplan/engines/vllm/overhead.py and non_torch.py re-fitted on the start-up corpus's
training split (`budget_corpus.py --calibrate` prints them): least squares per term and era of vLLM's V1
engine, from what each training log printed. Split from budget_corpus.py, which scores the constants."""

from __future__ import annotations

import dataclasses
import statistics

GIB = 2**30


def _cudagraph_row(rec: dict, model, printed: float, tp: int, pp: int, max_seqs: int, cg_gpu) -> tuple:
    """One record's CUDA-graph estimate (`printed` bytes, on its card `cg_gpu`) as _fit_cudagraphs reads it: (FA
    accumulator, further graphs, the most loaded stage's layers, printed, FULL graphs?, W8A8?, MoE?)."""
    from kvplan.core.dtypes import canonical_weight_dtype
    from kvplan.engines.vllm import cudagraphs as vllm_cudagraphs
    from kvplan.engines.vllm import overhead as vllm_overhead
    from kvplan.planning.deploy import split_layers

    # the stages as the release cuts them: calibrate() passes 0.8.0+ records only, and from 0.8.0 vLLM's own cut
    # (kvplan.engines.stage_split.CUTS) is split_layers' default, so no engine is built per record for it
    layers = max(b - a for a, b in split_layers(model.num_layers, pp))
    piecewise, full = vllm_overhead.cudagraph_counts(model, max_seqs)
    further = max(0, len(piecewise) - 1) + max(0, len(full) - 1)
    wd = canonical_weight_dtype(rec["weights"]) if rec.get("weights") else None
    return (vllm_overhead.fa_split_accumulator(model, tp, max(full, default=0), cg_gpu), further, layers, printed,
            bool(full), vllm_cudagraphs.activation_quantized(model, wd),
            bool(model.params.num_experts and model.params.experts_per_token))


def calibrate(records: list[dict], is_held_out, parsed) -> dict:
    """Least-squares fit of the overhead constants on the training split (`is_held_out` says which records
    are not in it; `parsed` reads a record's log), per era of the V1 engine."""
    from kvplan.sources.catalog import require_in_catalog
    from kvplan.engines.vllm import cudagraphs as vllm_cudagraphs
    from kvplan.engines.vllm import non_torch as vllm_non_torch
    from kvplan.engines.vllm import overhead as vllm_overhead
    from kvplan.engines.base import parse_version
    from kvplan.hardware.gpus import GPU, find_gpu

    act_x, act_y, cg_x, cg_y = [], [], [], []
    cg_graphs: list[tuple] = []  # (FA accumulator, further graphs, layers, printed, FULL graphs?, W8A8?, MoE?)
    act11: list[tuple] = []  # v0.11: (features, MoE elements, torch peak); the sampler is fitted last
    moe: list[tuple] = []  # v0.19 MoE records: fitted after the dense terms, on their residual
    nt = {k: [] for k in ("single", "tp", "pp", "single_v011", "tp_v011", "tp_legacy")}
    for rec in records:
        if is_held_out(rec) or rec.get("engine") != "vllm" or not rec.get("kvplan_model") or not rec.get("version"):
            continue
        v = parse_version(rec["version"])
        if v < (0, 8, 0):
            continue
        model = require_in_catalog(rec["kvplan_model"])
        rep = parsed(rec).reported
        tp, pp = int(rec.get("tp") or 1), int(rec.get("pp") or 1)
        flags = rec.get("flags") or {}
        if v < (0, 11, 0):
            if tp > 1 and "model_loading_gib" in rep and "available_kv_gib" in rep and rec.get("gpu"):
                nt["tp_legacy"].append(_legacy_non_torch(rec, model, rep, tp))
            continue
        t, s = int(flags.get("max_num_batched_tokens", 8192)), int(flags.get("max_num_seqs", 1024))
        eager = str(flags.get("enforce_eager", "")).lower() == "true"
        # non-torch memory: the 0.18+ constants from the release that profiles CUDA graphs in the window, less the
        # source-derived FlashInfer all-reduce workspace (kvplan/engines/vllm/non_torch.py)
        era = "" if vllm_non_torch.graph_profile_residue(v) else "_v011"
        v2 = _v2_runner(rec, model, v)  # the V2 runner's peak and graph estimate fit none of the V1 terms
        sort_sampler = vllm_overhead.sort_sampler(v, rec.get("flashinfer_sampler"), min(s, t))  # the per-logit cost
        if "non_torch_gib" in rep:
            # a record without its GPU: the corpus's machine, an HGX H100 (as check-log assumes without --gpu)
            fi_gpu = (find_gpu(rec["gpu"]) if rec.get("gpu")
                      else vllm_non_torch.corpus_gpu(GPU.of_memory("log", "GPU from the log", 80 * GIB, "a record")))
            fi_ws = vllm_non_torch.fi_allreduce_workspace(v, tp, model.hidden_size, vllm_non_torch.dtype_bytes(model),
                                                          t, pp, 1, eager, fi_gpu)
            key = ("tp" if tp > 1 else "pp" if pp > 1 else "single") + era
            nt[key].append(rep["non_torch_gib"].value * GIB - fi_ws)
        if "activation_peak_gib" in rep and pp == 1 and not v2:
            x = (min(s, t) * model.vocab_size, t * model.intermediate_size / tp, t * model.hidden_size)
            gpu = find_gpu(rec["gpu"]) if rec.get("gpu") else None
            # a multimodal model's peak also holds the dummy encoder outputs, and from 0.17 the Triton sampler's
            # buffer of one vocabulary row per SM (both source-derived; a record without its GPU: the H100's SMs)
            known = (vllm_overhead.encoder_profile_bytes(model, t, v)
                     + vllm_overhead.triton_buffer_bytes(v, min(s, t), model.vocab_size, gpu,
                                                         rec.get("flashinfer_sampler")))
            rep = dict(rep)
            peak = rep["activation_peak_gib"]
            rep["activation_peak_gib"] = dataclasses.replace(peak, value=peak.value - known / GIB)
            # (MXFP4 experts: by the backend the release picks on the GPU, or the one the index names)
            moe_elems = vllm_overhead.moe_workspace_elements(model, tp, t, gpu, v, rec.get("mxfp4_backend"))
            if sort_sampler:
                act11.append((x, moe_elems, rep["activation_peak_gib"].value * GIB))
            elif moe_elems:
                moe.append((model, tp, t, s, moe_elems, rep["activation_peak_gib"].value * GIB))
            else:
                act_x.append(x)
                act_y.append(rep["activation_peak_gib"].value * GIB)
        # a hybrid's recurrent layers launch other kernels than the attention layers the per-layer cost describes
        # (vLLM's GDN layer: causal_conv1d_update and the gated delta-rule update, kvplan.engines.vllm.cudagraphs)
        hybrid = vllm_cudagraphs.has_recurrent_layers(model)
        # and the card must be known (named or inferred) and run the graphs the terms describe: the per-graph cost and
        # FA3's split-KV accumulator (fa3_graphs) come from Hopper logs; an A100's FlashAttention-2 graphs are not
        # modelled (the inferred A100 of vllm-mindsafe-llama31-70b-awq-tp2 misses by -37% as an A100 or priced as a
        # Hopper, and read as one it had held the first capture at 209 MiB by a wrong card; read as an A100 it pulls
        # it to 255 and the 19 Hopper records up to +4.9%), and a card kvplan has no profile for would be priced as
        # the corpus's H100 (docs/budget.md round 35; LMCache#3430's RTX A5000, profiled since, is FA2 and stays out)
        card = rec.get("gpu") or rec.get("gpu_inferred")
        cg_gpu = find_gpu(card) if card else None  # named or inferred (FA3's accumulator: fa3_graphs)
        if "cudagraph_estimate_gib" in rep and not v2 and not hybrid and cg_gpu and vllm_cudagraphs.fa3_graphs(cg_gpu):
            row = _cudagraph_row(rec, model, rep["cudagraph_estimate_gib"].value * GIB, tp, pp, s, cg_gpu)
            cg_x.append((1.0, float(row[2])))
            cg_y.append(row[3])
            cg_graphs.append(row)
    a = _lstsq(act_x, act_y)
    moe_xy = []
    for model, tp, t, s, moe_elems, y in moe:
        dense = (a[0] * min(s, t) * model.vocab_size
                 + t * (a[1] * model.intermediate_size / tp + a[2] * model.hidden_size))
        moe_xy.append((moe_elems, y - dense))
    moe_b = sum(x * y for x, y in moe_xy) / sum(x * x for x, _ in moe_xy) if moe_xy else 0.0
    v011 = [(x[0], y - x[1] * a[1] - x[2] * a[2] - m * moe_b) for x, m, y in act11]  # the same forward, MoE
    c = _lstsq(cg_x, cg_y)
    first, per_graph_layer, act_quant, moe_extra = _fit_cudagraphs(cg_graphs)
    med = {k: (statistics.median(v) / 2**20 if v else None) for k, v in nt.items()}
    return {"n_activation": len(act_y), "SAMPLER_BYTES": a[0], "FORWARD_MLP_BYTES": a[1], "FORWARD_HIDDEN_BYTES": a[2],
            "n_activation_moe": len(moe_xy),
            "MOE_WORKSPACE_BYTES": moe_b,
            "n_activation_v011": len(v011),
            "SAMPLER_BYTES_V011": sum(x * y for x, y in v011) / sum(x * x for x, _ in v011) if v011 else None,
            "NON_TORCH_SINGLE_MIB": med["single"], "NON_TORCH_TP_MIB": med["tp"], "NON_TORCH_PP_MIB": med["pp"],
            "NON_TORCH_SINGLE_V011_MIB": med["single_v011"], "NON_TORCH_TP_V011_MIB": med["tp_v011"],
            "NON_TORCH_TP_LEGACY_MIB": med["tp_legacy"],
            "n_cudagraph": len(cg_y), "CUDAGRAPH_BASE_MIB": c[0] / 2**20, "CUDAGRAPH_PER_LAYER_MIB": c[1] / 2**20,
            "CUDAGRAPH_FIRST_PIECEWISE_MIB": first / 2**20, "CUDAGRAPH_PER_GRAPH_LAYER_MIB": per_graph_layer / 2**20,
            "CUDAGRAPH_ACT_QUANT": act_quant, "CUDAGRAPH_MOE": moe_extra}


def _fit_cudagraphs(samples: list[tuple]) -> tuple[float, float, float, float]:
    """vLLM's estimate as kvplan/engines/vllm/cudagraphs.py restates it: max(first PIECEWISE capture,
    FA accumulator + one graph) + further graphs x a per-graph cost, that cost a cost per layer (with its W8A8
    and MoE surcharges) rounded up to 2 MiB. A grid over the cost per layer (0.100-0.200 MiB, steps of 0.002) and
    the two surcharges (0-0.5, steps of 0.05), a scan of the first capture over whole MiB for each; the smallest
    squared error wins (the first in grid order on a tie)."""
    import numpy as np

    mib = 2**20
    acc, further, layers, y, full, quant, moe = (np.array(col, dtype=float) for col in zip(*samples))
    firsts = np.arange(32, 512, dtype=float)[:, None] * mib
    best = (float("inf"), 0.0, 0.0, 0.0, 0.0)
    for c in np.arange(100, 201, 2) / 1000:
        for a in np.arange(0, 11) / 20:
            for m in np.arange(0, 11) / 20:
                raw = np.floor(c * mib * layers * (1 + a * quant + m * moe))
                g = np.maximum(np.ceil(raw / (2 * mib)) * 2 * mib, mib)
                pred = np.maximum(firsts, np.where(full > 0, acc + g, 0)) + g * further
                sse = ((pred - y) ** 2).sum(axis=1)
                k = int(sse.argmin())
                if sse[k] < best[0]:
                    best = (float(sse[k]), float(firsts[k, 0]), float(c * mib), float(a), float(m))
    return best[1:]


def _v2_runner(rec: dict, model, v: tuple) -> bool:
    """Whether the record ran on vLLM's V2 model runner (0.22+, kvplan.engines.vllm.runner). The fitted profile-run
    terms are the V1 runner's (its _dummy_sampler_run and profile_cudagraph_memory); the V2 runner samples in its own
    code (vllm@0.22.0 v1/worker/gpu/sample/sampler.py) and estimates its graphs in its own (0.29.0
    gpu/cudagraph_utils.py: FULL graphs extrapolated from two), so its printed peak and estimate say nothing about
    them."""
    from kvplan.engines.vllm import runner
    from kvplan.hardware.gpus import find_gpu

    gpu = find_gpu(rec["gpu"]) if rec.get("gpu") else None
    fell_back = str((rec.get("flags") or {}).get("model_runner", "")).lower() == "v1"
    return runner.runs_v2(model, v, gpu, rec.get("weights"), fell_back)


def _legacy_non_torch(rec, model, rep, tp) -> float:
    """Releases before 0.19 print no breakdown: non-torch is the residual of the printed budget,
    total x gmu - printed weights - printed KV - kvplan's activation peak (bytes)."""
    from kvplan.engines.vllm import engine as vllm
    from kvplan.engines.vllm import overhead as vllm_overhead
    from kvplan.engines.base import parse_version
    from kvplan.hardware.gpus import find_gpu
    from kvplan.planning.deploy import Deployment
    from kvplan.planning.plan import Request

    gpu = find_gpu(rec["gpu"])
    flags = rec.get("flags") or {}
    dep = Deployment(tp, int(rec.get("pp") or 1))
    req = Request(context=int(flags.get("max_model_len") or model.max_context))
    opts = {k: str(flags[k]) for k in ("max_num_batched_tokens", "max_num_seqs") if k in flags}
    st = vllm.settings(model, gpu, dep, req, rec["version"], opts,
                       {"gpu_memory_utilization": flags["gpu_memory_utilization"]})
    act = vllm_overhead.activation_peak(model, tp, st.max_num_batched_tokens, st.max_num_seqs,
                                        version=parse_version(rec["version"]), gpu=gpu,
                                        flashinfer_sampler=rec.get("flashinfer_sampler"))
    return (gpu.memory_usable_bytes * st.gpu_memory_utilization - rep["model_loading_gib"].value * GIB
            - rep["available_kv_gib"].value * GIB - act)


def _lstsq(xs, ys):
    """Non-negative least squares by active set over a handful of columns (normal equations)."""
    n = len(xs[0]) if xs else 0
    active = list(range(n))
    while active:
        sol = _solve([[sum(x[i] * x[j] for x in xs) for j in active] for i in active],
                     [sum(x[i] * y for x, y in zip(xs, ys)) for i in active])
        neg = [active[k] for k, v in enumerate(sol) if v < 0]
        if not neg:
            out = [0.0] * n
            for k, i in enumerate(active):
                out[i] = sol[k]
            return out
        active.remove(neg[0])
    return [0.0] * n


def _solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if m[c][c] == 0:
            return [0.0] * n
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]
