"""One rank of a distributed validation run: build, shard, decode with collectives, measure, predict.

Started by kvplan.validate.dist_launch (its own processes, or torchrun's), after the process group
exists. The rank:
  1. builds the whole reduced Decoder from the seed and decodes its data-parallel group's
     requests with it: the single-process reference tokens;
  2. keeps only its Shard (shard.py) and drops the rest; measures its weights and its static
     cache by their storages;
  3. prefills and decodes with its collectives (pipeline stages by send/recv, the last stage's
     tokens broadcast back), then recomputes the sequence without cache;
  4. compares with what the planner predicts for this rank: the KV of its stage at its tp
     (kv_profile over the stage's layers, unpaged, x its own batch), its weights as built
     (shard.rank_params, closed form) and the planner's Plan.stages[pp_rank] weights for the
     built model at the same tp, pp, dp and ep (kvplan.planning.layout's placement).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch
import torch.distributed as dist

from kvplan.engines import resolve_engine
from kvplan.model.spec import ModelSpec
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.validate.blueprint import blueprint, built_spec
from kvplan.validate.decoder import Decoder
from kvplan.validate.dist_decoder import RankDecoder
from kvplan.validate.measure import storage_bytes
from kvplan.validate.run import TORCH_DTYPES, option_dtype, torch_dtype
from kvplan.validate.shard import Layout, Shard, rank_params, shard_of


def _groups(layout: Layout, rank: int) -> dict:
    """Every rank creates every group, in one order (torch.distributed requires it); returns this rank's."""
    mine = {}
    for name, lists in (("tp", layout.tp_groups()), ("pipe", layout.pipe_groups()), ("stage", layout.stage_groups())):
        for ranks in lists:
            group = dist.new_group(ranks) if len(ranks) > 1 else None
            if rank in ranks:
                mine[name], mine[name + "_ranks"] = group, ranks
    return mine


def predict_rank(reduced: ModelSpec, bp, layout: Layout, shard: Shard, ctx: int, kv, state, compute: str) -> dict:
    """This rank's figures, no torch: the planner's Plan for the built model at this layout (its stage's
    resident weights, and its KV profile x this rank's own sequences, unpaged as the static cache is),
    and the closed-form count of the shard as built."""
    plan = resolve_engine().plan
    itemsize = {"fp32": 4, "bf16": 2, "fp16": 2}[compute]
    gpu = SimpleNamespace(key="validate", memory_usable_bytes=2**50, bandwidth_bytes_per_s=1)
    p = plan(built_spec(reduced, bp), gpu, Deployment(layout.tp, layout.pp, layout.dp, layout.ep),
             Request(ctx, shard.batch * layout.dp, kv, state, compute, overhead_bytes=0))
    stage = p.stages[shard.pp_rank]
    out = {"predicted_kv_bytes": shard.batch * stage.profile.sequence_bytes(ctx, paged=False),
           "predicted_weights_bytes": rank_params(bp, layout, shard) * itemsize,
           "planner_weights_bytes": stage.weight_bytes}
    return out


def _step(model, inp, start: int, cached: bool, last_only: bool, shard: Shard, layout: Layout, groups: dict,
          batch: int, length: int, hidden: int, dtype, device) -> torch.Tensor:
    """One forward through every stage; returns the greedy tokens [B, T'] on every rank of the pipe."""
    pipe = groups["pipe_ranks"]
    if shard.first:
        x = inp
    else:
        x = torch.empty(batch, length, hidden, dtype=dtype, device=device)
        dist.recv(x, src=pipe[shard.pp_rank - 1])
    out = model(x, start, cached, last_only)
    if not shard.last:
        dist.send(out.contiguous(), dst=pipe[shard.pp_rank + 1])
    width = 1 if last_only else length
    tokens = out.argmax(-1) if shard.last else torch.empty(batch, width, dtype=torch.long, device=device)
    if groups["pipe"] is not None:
        dist.broadcast(tokens, src=pipe[-1], group=groups["pipe"])
    return tokens


def _decode(step, prompt_tokens: torch.Tensor, steps: int) -> torch.Tensor:
    out = [step(prompt_tokens, 0, prompt_tokens.shape[1])[:, -1]]
    for i in range(steps):
        out.append(step(out[-1][:, None], prompt_tokens.shape[1] + i, 1)[:, -1])
    return torch.stack(out, 1)  # [B, steps + 1]


def _whole_model(bp, s, shard: Shard, dev, kv_t, state_t, compute_t):
    """The whole reduced Decoder from the seed (the same on every rank), this dp group's prompts
    [b, P], and the greedy tokens the whole model gives for them on this one process."""
    torch.manual_seed(s.seed)
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(compute_t)
        with torch.device(dev):
            whole = Decoder(bp, kv_t, state_t).eval()
    finally:
        torch.set_default_dtype(default)
    gen = torch.Generator().manual_seed(s.seed)
    every = torch.randint(0, bp.vocab, (s.batch, s.ctx - s.steps), generator=gen)  # all requests, all dp ranks
    tokens = every[shard.dp_rank * shard.batch:(shard.dp_rank + 1) * shard.batch].to(dev)  # [b, P]
    with torch.inference_mode():
        whole.setup_caches(shard.batch, s.ctx)
        reference = _decode(lambda t, start, _len: whole(t, start, cached=True).argmax(-1), tokens, s.steps)
    return whole, tokens, reference


def run_rank(rank: int, full: ModelSpec, s, layout: Layout) -> dict:
    """Everything one rank does once the process group exists; returns its record."""
    n = s.layers or full.num_layers
    reduced = full if n == full.num_layers else full.with_layers(n)
    bp = blueprint(full, n, s.widths)
    dev = torch.device(s.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    kv = option_dtype(s.kv_dtype, full.dtype, "kv_dtype")
    state = option_dtype(s.state_dtype, full.dtype, "state_dtype")
    compute = s.compute_dtype or ("fp32" if dev.type == "cpu" else full.dtype)
    kv_t, state_t, compute_t = torch_dtype(kv, "kv_dtype"), torch_dtype(state, "state_dtype"), TORCH_DTYPES[compute]
    groups = _groups(layout, rank)
    shard = shard_of(bp, layout, rank, s.batch)
    prompt = s.ctx - s.steps

    whole, tokens, reference = _whole_model(bp, s, shard, dev, kv_t, state_t, compute_t)
    with torch.device(dev):
        model = RankDecoder(whole, bp, shard, layout, groups).eval()
    del whole
    model.setup_caches(shard.batch, s.ctx)
    measured_weights = storage_bytes(list(model.parameters()))
    measured_kv = storage_bytes(model.cache_tensors())

    def step(cached: bool, last_only: bool):
        return lambda t, start, length: _step(model, t, start, cached, last_only, shard, layout, groups,
                                              shard.batch, length, bp.hidden, compute_t, dev)

    t0 = time.perf_counter()
    with torch.inference_mode():
        generated = _decode(step(True, True), tokens, s.steps)
        seconds = time.perf_counter() - t0
        whole_seq = torch.cat([tokens, generated[:, :-1]], 1)  # [b, ctx]
        recomputed = step(False, False)(whole_seq, 0, s.ctx)[:, prompt - 1:]
    pred = predict_rank(reduced, bp, layout, shard, s.ctx, kv, state, compute)
    return {
        "rank": rank, "dp_rank": shard.dp_rank, "pp_rank": shard.pp_rank, "tp_rank": shard.tp_rank,
        "layers": list(shard.layers), "heads": list(shard.heads), "experts": list(shard.experts),
        "vocab": list(shard.vocab), "batch": shard.batch, **pred,
        "measured_kv_bytes": measured_kv, "measured_kv_after_bytes": storage_bytes(model.cache_tensors()),
        "measured_weights_bytes": measured_weights,
        "tokens_match": bool(torch.equal(recomputed, generated)),
        "matches_single_process": bool(torch.equal(generated, reference)),
        "decode_seconds": round(seconds, 4), "device": str(dev),
    }
