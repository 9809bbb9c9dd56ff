"""kvplan's engine-neutral rules, the default engine: whole pages of the held tokens, budget =
usable x utilisation - weights - overhead estimate (kvplan.plan), concurrency by division and the
longest context by search over the same arithmetic.
"""

from __future__ import annotations

from kvplan.engines.base import Capacity, Engine
from kvplan.plan import (Answers, assemble, budgets, gpu_budget, paged_concurrency, paged_max_context, paged_tokens,
                         prepare, prepare_key, usage)


class NeutralEngine(Engine):
    name = "kvplan"
    label = None  # reports say "engine-neutral" where an engine's label would go

    def capacity(self, model, dep, stages, req, st, use) -> Capacity:
        conc = paged_concurrency(stages, use)
        return Capacity(self.name, "", use.kv_memory_bytes_per_gpu, paged_tokens(stages, req.block_size),
                        float(conc), req.context, use.growth_bytes_per_token_per_gpu, None, req.block_size)

    def fits(self, cap, req) -> bool:
        return cap.kv_memory_bytes > 0 and cap.max_concurrency >= req.batch

    def answers(self, model, dep, stages, req, st, use, cap, memo=None, key=None) -> Answers:
        if memo is None:
            mc = paged_max_context(stages, req.batch, model.max_context)
        else:  # the longest context does not depend on the asked one: once per stage budget
            mc = memo.get(key)
            if mc is None:
                mc = memo[key] = paged_max_context(stages, req.batch, model.max_context)
        return Answers(cap.tokens, cap.max_concurrency_int, mc, use.room and cap.max_concurrency >= req.batch)

    def grid(self, model, gpus, dep, requests) -> list:
        """Every plan of gpus x requests, sharing the work that depends on neither the GPU nor the
        context (weights per stage, overhead, KV profiles) and the longest context per budget.
        Every number is result()'s own (tests/test_planner.py checks they agree)."""
        prepared: dict = {}
        max_context_memo: dict = {}
        out = []
        for gpu in gpus:
            for req in requests:
                pkey = prepare_key(req)
                prep = prepared.get(pkey)
                if prep is None:
                    prep = prepared[pkey] = prepare(model, dep, req)
                stages = budgets(prep, gpu, req)
                use = usage(stages, req)
                cap = self.capacity(model, dep, stages, req, None, use)
                mkey = (pkey, gpu_budget(gpu, req), req.kv_cache_memory_bytes)
                ans = self.answers(model, dep, stages, req, None, use, cap, max_context_memo, mkey)
                out.append(assemble(model, gpu, dep, req, prep, stages, use, ans))
        return out


ENGINE = NeutralEngine
