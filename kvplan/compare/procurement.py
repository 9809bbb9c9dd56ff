"""The answer a sweep gives a buyer: per model × context, the cheapest deployment that fits, and its costs.

Pure (no I/O). From a ranked SweepResult, each (model, context) gets one headline: among the plans
that fit (the sweep's batch of requests at that context), the lowest cost per hour where GPUs are
priced, else the fewest GPUs (then the most concurrent requests). Its costs: per hour (price per
GPU-hour × GPUs), per concurrent user-hour (÷ the requests it holds at once), and per million output
tokens (cost per hour ÷ the decode tokens per hour of all those requests together, from the
bandwidth roofline re-planned at that batch). Headroom is how many times the asked batch it holds.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine
from kvplan.planning.plan import limit_name


def headlines(result, gpus) -> list[dict]:
    """One dict per (model, context) in the sweep, in the sweep's model then context order."""
    neutral = resolve_engine()  # the roofline at full concurrency, with kvplan's engine-neutral rules
    by_key = {g.key: g for g in gpus}
    groups: dict[tuple, list] = {}
    for p in result.plans:
        groups.setdefault((p.model, p.request.context), []).append(p)
    out = []
    for (model, context), plans in sorted(groups.items()):
        fitting = [p for p in plans if p.fits]
        row = {"model": model, "context": context, "batch": plans[0].request.batch, "fits": bool(fitting),
               "plans": len(plans)}
        if not fitting:
            spec = result.models.get(model)
            limit = getattr(spec, "max_context", None)
            if limit is not None and context > limit:  # no GPU count helps: say so rather than "nothing fits"
                whose = limit_name(bool(getattr(spec, "max_model_len", 0)))
                row["why"] = f"{context:,} tokens is beyond {whose} ({limit:,} tokens)"
            out.append(row)
            continue
        priced = [p for p in fitting if result.price(p) is not None]
        if priced:
            best = min(priced, key=lambda p: (result.price(p) * p.deployment.gpus, p.deployment.gpus,
                                              -p.max_concurrency))
        else:
            best = min(fitting, key=lambda p: (p.deployment.gpus, -p.max_concurrency))
        price = result.price(best)
        cost = None if price is None else price * best.deployment.gpus
        full = best.max_concurrency
        tps = best.decode_tokens_per_second
        gpu = by_key.get(best.gpu)
        if gpu is not None and full > best.request.batch:
            try:  # the roofline with every slot busy: what the deployment serves when full
                spec = result.models[model]
                tps = neutral.plan(spec, gpu, best.deployment,
                                   replace(best.request, batch=full)).decode_tokens_per_second
            except KvplanError:  # the full batch cannot be planned: keep the plan's own figure
                pass
        row.update({
            "gpu": best.gpu, "gpus": best.deployment.gpus, "tp": best.deployment.tp, "pp": best.deployment.pp,
            "kv_dtype": best.request.kv_dtype.name if best.request.kv_dtype else "", "weight_dtype":
            best.request.weight_dtype or "checkpoint", "max_concurrency": full,
            "headroom": full / best.request.batch, "decode_tokens_per_second_full": tps,
            "price_per_gpu_hour": price, "cost_per_hour": cost,
            "cost_per_concurrent_user_hour": cost / full if cost is not None and full else None,
            "cost_per_million_output_tokens": cost / (tps * 3600) * 1e6 if cost is not None and tps else None,
            "priced": bool(priced),
        })
        out.append(row)
    return out
