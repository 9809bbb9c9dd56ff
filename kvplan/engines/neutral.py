"""kvplan's engine-neutral rules, the default engine: whole pages of the held tokens, budget =
usable x utilisation - weights - overhead estimate (kvplan.planning.plan), concurrency by division and the
longest context by search over the same arithmetic.
"""

from __future__ import annotations

from kvplan.core.errors import arg
from kvplan.engines import checkpoint_kv
from kvplan.engines.base import Capacity, Engine
from kvplan.engines.lora import sglang_bytes as exact_lora_bytes
from kvplan.model.compressed import CompressedMLA
from kvplan.model.layers import IndexedMLA, Kind
from kvplan.model.recurrent import ParallelHybrid
from kvplan.planning.layout import rank_request, whole_answers
from kvplan.planning.offload import Geometry, TIERS, TierPool, TierRequest, check_kinds
from kvplan.planning.plan import (Answers, assemble, budgets, context_cost, gpu_budget, paged_answers,
                                  paged_max_context,
                         prepare, prepare_key, usage)


# (model, deployment, prepare_key) -> Prepared, across grids. Keyed by values (hashing a model costs
# about 12 us, once per grid and dtype). It pays only when one process sweeps the same models
# again, as benchmarks/sweep_bench.py does: best of 3 CPU 1.52 s with it, 1.65 s without (old
# tree, with its id()-keyed caches: 1.44-1.60 s); a single sweep, first run, gains nothing.
_PREPARED: dict = {}
_PREPARED_LIMIT = 1024  # entries; a 100k-plan sweep of 50 models needs about 600


def page_pool(req: TierRequest, g: Geometry) -> TierPool:
    """kvplan's own offload tier: B bytes for the replica hold B // (page tokens x one rank's bytes per
    token x ranks) whole GPU pages, every rank keeping its shard of every page as in the GPU pool."""
    check_kinds(g)
    per_block = g.block_size * g.bytes_per_token * g.ranks
    asked = g.whole(req)
    blocks = asked // per_block
    tokens = blocks * g.block_size
    total = blocks * per_block
    rule = f"{asked:,} B // ({g.block_size} x {g.bytes_per_token:,} B x {g.ranks} ranks) = {blocks:,} pages (kvplan)"
    return TierPool(req.tier, "kvplan", "", total // g.ranks, g.ranks, total, blocks, g.block_size, tokens,
                    g.contexts(tokens), rule)


class NeutralEngine(Engine):
    name = "kvplan"
    supports_dp = True
    supports_dcp = True
    supports_speculative = True  # vLLM's rules: the drafter's layers join the pool (kvplan.planning.speculative)
    label = None  # reports say "engine-neutral" where an engine's label would go
    # its arithmetic is each spec's own (tokens_held, elements_per_token, state_elements): every kind
    kinds = frozenset(Kind)
    reads_layers = frozenset({IndexedMLA, ParallelHybrid, CompressedMLA})
    # Pages of a power of two tokens, as engines page them (vLLM's BlockSize 1-256, SGLang's and TRT-LLM's
    # page sizes in practice); a page of 7 tokens is no engine's (issue 25).
    block_sizes = tuple(2**i for i in range(13))
    offload_rules = {"native": {tier: page_pool for tier in TIERS}}

    def checkpoint_kv_rule(self, ckv) -> checkpoint_kv.KvRule:
        """kvplan's own plan follows a ModelOpt checkpoint's declared FP8 KV cache, as every engine's current 'auto'
        does (vLLM from 0.14.0, SGLang from 0.5.3, TensorRT-LLM); any other declaration keeps the model dtype, as
        vLLM's 'auto' does (it follows ModelOpt's alone), the declared cache a name away
        (kvplan.engines.checkpoint_kv)."""
        if ckv is not None and ckv.producer == "modelopt" and ckv.kind == "FP8":
            return checkpoint_kv.KvRule(True, "kvplan's own plan follows it, as vLLM's 'auto' from 0.14.0, SGLang's "
                                              "from 0.5.3 and TensorRT-LLM's do "
                                              f"({arg('engine')} for one release's rule)")
        return checkpoint_kv.KvRule(False, "kvplan's own plan keeps the model dtype: vLLM's 'auto' follows a ModelOpt "
                                           f"declaration of FP8 alone ({arg('engine')} for one release's rule)")

    def lora_price(self, model, dep, lora, st):
        """kvplan's own: max_loras slots of A and B on the wrapped projections, nothing else (the packed
        projections whole, as every engine wraps them: kvplan.engines.lora)."""
        return exact_lora_bytes(model, dep, lora)

    def capacity(self, model, dep, stages, req, st, use) -> Capacity:
        return Capacity(self.name, "", use.kv_memory_bytes_per_gpu, use.token_slots, float(use.concurrency),
                        req.context, use.growth_bytes_per_token_per_gpu, None, req.block_size)

    def answers(self, model, dep, stages, req, st, use, cap):
        return paged_answers(stages, use, req, model.max_context)

    def grid(self, model, gpus, dep, requests) -> list:
        """Every plan of gpus x requests, sharing the work that depends on neither the GPU nor the
        context (one rank's request, weights per stage, overhead, KV profiles: once per request)
        and, per GPU budget, the stages and the longest context (it does not depend on the asked
        context). Every number is result()'s own (tests/test_reports.py)."""
        self.check_layers(model)
        self.check_layout(model, dep)
        if not gpus:
            return []
        prepared: dict = {}  # (prepare_key, whole batch) -> (index, Prepared)
        per_request = []
        for whole in requests:
            whole, kv_said = self.with_checkpoint_kv(model, whole)
            whole = self.with_lora(model, dep, whole, None)[0]
            req = rank_request(whole, dep)  # one data-parallel rank's share
            pkey = (prepare_key(req), whole.batch)
            if pkey not in prepared:
                prepared[pkey] = (len(prepared), _prepared(model, dep, req, pkey, whole.batch))
            index, prep = prepared[pkey]
            per_request.append((whole, req, index, prep, context_cost(prep.stages, req), kv_said))
        by_budget: dict = {}  # (prepared index, budget, exact KV size) -> (stages, longest context)
        out = []
        limit = model.max_context
        for gpu in gpus:
            for whole, req, index, prep, cost, kv_said in per_request:
                budget = gpu_budget(gpu, req)
                bkey = (index, budget, req.kv_cache_memory_bytes, req.lora_bytes)
                hit = by_budget.get(bkey)
                if hit is None:
                    stages = budgets(prep, budget, req)
                    hit = by_budget[bkey] = (stages, paged_max_context(stages, req.batch, limit))
                stages, mc = hit
                use = usage(stages, req, cost)
                ans = Answers(use.token_slots, int(use.concurrency), mc, use.room and use.concurrency >= req.batch)
                out.append(assemble(model, gpu, dep, whole, prep, budget, stages, use, whole_answers(ans, dep),
                                    assumed=kv_said))
        return out


def _prepared(model, dep, req, pkey, step_tokens: int):
    """prepare(), remembered by value; `pkey` includes the whole deployment's batch (step_tokens)."""
    key = (model, dep, pkey)
    prep = _PREPARED.get(key)
    if prep is None:
        if len(_PREPARED) >= _PREPARED_LIMIT:
            _PREPARED.clear()
        prep = _PREPARED[key] = prepare(model, dep, req, step_tokens=step_tokens)
    return prep


ENGINE = NeutralEngine
