"""The one link between the planner and the simulator: a plan becomes a SimModel.

Kept to one function on purpose (the planner's internals may move); it reads only a plan's
public figures, the model spec and the GPU profile.
"""

from __future__ import annotations

from fractions import Fraction

from kvplan.model.weights import own_format, weight_bytes
from kvplan.planning.plan import expected_experts_touched
from kvplan.simulator.model import Group, SimModel, StageCost
from kvplan.speed.coverage import label
from kvplan.speed.mlaform import mla_heads_per_rank
from kvplan.speed.model import absorbed_prefill, step_model
from kvplan.speed.plan import plan_shape
from kvplan.speed.shape import attention_flops, lm_head, sparse_reads

_BIG = 1 << 40  # a sequence length past every window


def sim_model(plan, spec, gpu, *, max_model_len: int | None = None, step_overhead_s: float = 0.0,
              speed: str = "calibrated", engine: str | None = None, version: str | None = None) -> SimModel:
    """The simulator's view of `plan` (model `spec` on GPU profile `gpu`).

    KV pool: the binding pipeline stage (Plan.binding_stage, fit's memory column), its layers
    grouped by the tokens they hold (all, or a window: sliding or chunked attention), plus fixed
    recurrent states; where the engine keeps those states in a pool of their own (SGLang's hybrids:
    Plan.state_pool_bytes_per_gpu), the token pool alone, the states' slots bounding the running requests. Step time
    inputs, per stage on one rank: weights read per step (routed experts apart: a step reads the share its tokens
    touch), KV bytes per cached token, 2 x active parameters FLOPs per token (the embedding's lookup and the LM head
    apart: the last stage's head, 2 x vocab x hidden / tp tied or not, per sequence in a step,
    kvplan.speed.terms.head_rows), and 4 x query heads x head dim per query-key pair (an MLA prefill's pairs at its
    decompressed width where `engine` decompresses: kvplan.speed.shape.attention_flops). The page size is the plan's
    block size; the scheduler's steps and admission are the engine's own (kvplan.simulator.limits hands the simulator
    its rules: SGLang's prefill first, vLLM's mixed budget else). speed="calibrated" (the default): steps take
    kvplan.speed's calibrated time under `engine`'s coefficients (vLLM's for kvplan's own rules) at its release
    `version` (None: the current one; the MXFP4 MoE rules of kvplan.speed.mxfp4 read it); "roofline": the bare roofline
    of the inputs above.
    """
    tp = plan.deployment.tp
    # the stage fit's memory table shows (Plan.binding_stage: the fewest requests of the context; with a --kv-cache-
    # memory every stage's room is the same, so the one whose sequence costs most): not the fewest token slots, which
    # on tied slots took the first stage, fewer full-attention layers beside more sliding ones (Gemma-2 at pp 2)
    stage = plan.token_pool_stage  # beside a state pool, the stage whose cell sized the token pool
    groups, state = _kv_groups(stage.profile, tp)
    budget = stage.kv_memory_bytes
    if plan.state_pool_bytes_per_gpu:  # SGLang's hybrids: states in a pool of their own (its slots bound the
        # running requests, kvplan.simulator.limits), tokens in the rest
        budget, state = plan.token_pool_bytes_per_gpu, 0
    costs = _stage_costs(plan, spec, engine, version, gpu)
    flops = dict(gpu.dense_flops)
    return SimModel(
        name=plan.model, kv_budget_bytes=max(0, budget), block_size=plan.request.block_size,
        groups=groups, state_bytes=state, max_model_len=max_model_len or plan.request.context,
        stages=costs, bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        flops_per_s=float(flops.get("bf16") or flops.get("fp16") or 0), step_overhead_s=step_overhead_s,
        speed=calibrated(plan, spec, gpu, speed, engine, version), speed_label=label(engine, speed),
    )


def calibrated(plan, spec, gpu, speed: str = "calibrated", engine: str | None = None, version: str | None = None):
    """The calibrated StepModel of `plan` (kvplan.speed) under `engine` at release `version`, or None for the
    roofline."""
    return step_model(plan_shape(plan, spec, gpu, engine, version), engine, speed) if speed == "calibrated" else None


def _kv_groups(prof, tp: int) -> tuple[tuple, int]:
    """(a stage's layers grouped by the tokens they hold: all (None) or a window, with their bytes per
    token; the fixed recurrent-state bytes of one sequence)."""
    windows: dict = {}
    state = 0
    for layer, n in prof.groups:
        # one entry per compress_ratio tokens (DeepSeek-V4): its bytes spread over the tokens it stands for
        tb = Fraction(prof.token_bytes(layer) * n, layer.compress_ratio)
        if layer.state_elements(tp):
            state += prof.state_dtype.bytes_for(layer.state_elements(tp)) * n
        state += layer.fixed_bytes(prof.kv_dtype) * n  # DeepSeek-V4's window and compressor states (else 0)
        if tb:
            w = layer.tokens_held(_BIG) if layer.bounded else None
            windows[w] = windows.get(w, 0) + tb
    groups = tuple(Group(int(b), w) for w, b in sorted(windows.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0)))
    return groups, state


def _stage_costs(plan, spec, engine: str | None = None, version: str | None = None, gpu=None) -> tuple:
    """Each pipeline stage's step-time inputs on one rank (StageCost): weights read per step (routed
    experts apart), KV bytes per token, FLOPs per token and per query-key pair."""
    tp = plan.deployment.tp
    p = spec.params
    wb = weight_bytes(spec, plan.request.weight_dtype)
    scale = spec.checkpoint_bytes / wb.total if (own_format(spec, plan.request.weight_dtype) and spec.checkpoint_bytes
                                                 and wb.total) else 1.0
    touched = 0.0
    if p.num_experts:
        touched = expected_experts_touched(p.num_experts, p.experts_per_token, plan.request.batch) / p.num_experts
    costs, head = [], lm_head(spec, wb)[0]
    for s in plan.stages:
        start, end = s.layers
        frac = (end - start) / spec.num_layers
        experts = int(wb.experts * scale * frac / tp)
        pairs, prefill, attn_topk, decompress = attention_flops(spec.layers[start:end], spec.num_attention_heads, tp)
        # a rank's MLA heads over the engine's whole tp size, DP attention's ranks included (as plan_shape)
        heads = mla_heads_per_rank(spec, tp * plan.deployment.dp if plan.request.attention_dp else tp)
        # the backend and prefix-cache state the engine's options set (Request.attention_backend, .prefix_cache)
        req = plan.request
        if absorbed_prefill(engine, version, req.prefix_cache, gpu, heads, req.attention_backend or None,
                            spec.architecture):  # as its decode does
            prefill, decompress = pairs, 0.0
        sp = s.profile
        costs.append(StageCost(
            dense_read_bytes=max(0, s.weight_read_bytes - int(experts * touched)),
            expert_bytes=experts, num_experts=p.num_experts, top_k=p.experts_per_token,
            kv_bytes_per_token=sp.growth_bytes_per_token(),
            kv_window_bytes=tuple((sp.token_bytes(layer) * n, layer.tokens_held(_BIG))
                                  for layer, n in sp.groups if layer.bounded and sp.token_bytes(layer)),
            flops_per_token=2.0 * (p.active - p.embedding - p.lm_head) * frac / tp,
            head_flops=2.0 * head / tp if s is plan.stages[-1] else 0.0,  # the LM head on the last stage
            attn_flops_per_pair=pairs, kv_topk=sparse_reads(sp), attn_topk=attn_topk,
            attn_prefill_flops_per_pair=prefill, decompress_flops=decompress,
        ))
    return tuple(costs)
