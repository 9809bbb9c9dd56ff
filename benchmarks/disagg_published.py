"""Published disaggregated-serving results next to `kvplan disagg`'s predictions for the same setting.

Run by hand: `.venv/bin/python benchmarks/disagg_published.py`. tests/test_disagg.py runs `compare()` and
checks the one thing a roofline step-time model promises: its latencies are lower bounds of measured ones.

Sources: aiconfigurator's silicon points (AIC_PUBLISHED below, `compare_aiconfigurator()`: the test checks
one prompt's roofline TTFT stays below theirs), and the Mooncake team's SGLang PD benchmark,
kvcache-ai/Mooncake docs/source/en/sglang-benchmark-results-v1.md
("PD Disaggregation Performance", two A10 servers, Qwen2.5-7B-Instruct-GPTQ-Int4, sglang bench random dataset):
1P1D against two regular (aggregated) instances of the same TP on the same GPUs, means in ms.
The link between the servers is not stated; kvplan assumes InfiniBand HDR 200 Gb/s (`ib-200g`).
"""

from __future__ import annotations

# (tp per instance, input, output, request rate/s, prompts) -> {config: (mean TTFT ms, mean ITL ms)}
PUBLISHED = {
    (4, 8192, 512, 1.0, 50): {"1P1D": (732.54, 7.23), "2 regular": (767.18, 10.30)},
    (2, 2048, 512, 4.0, 200): {"1P1D": (1111.94, 17.06), "2 regular": (310.01, 25.74)},
}
MODEL, GPU, WEIGHTS, LINK, ENGINE = "qwen2.5-7b-instruct", "a10", "int4", "ib-200g", "sglang"


def compare(seed: int = 0) -> list[dict]:
    """One row per published setting and configuration: theirs and ours (mean TTFT and TPOT in ms)."""
    import kvplan

    rows = []
    for (tp, isl, osl, qps, n), theirs in PUBLISHED.items():
        r = kvplan.disagg(MODEL, GPU, speed="roofline", weight_dtype=WEIGHTS, isl=isl, osl=osl, prefill_tp=tp,
                          decode_tp=tp, qps=qps, duration=n / qps, seed=seed, max_gpus=2 * tp, link=LINK,
                          engine=ENGINE, slo_ttft=1e3, slo_tpot=1e3)
        ours = {"1P1D": r.search["tried"][0], "2 regular": r.search["aggregated_same_gpus"]}
        for name, (ttft, itl) in theirs.items():
            rows.append({"setting": f"tp {tp}, {isl}/{osl}, {qps:g} req/s", "config": name,
                         "their_ttft_ms": ttft, "our_ttft_ms": 1000 * ours[name]["ttft_s"]["mean"],
                         "their_itl_ms": itl, "our_tpot_ms": 1000 * ours[name]["tpot_s"]["mean"],
                         "our_balanced_ratio": f"{r.ratio[0]}P:{r.ratio[1]}D"})
    return rows


# aiconfigurator's measured disaggregated points ("silicon"),
# ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce:
# aic-core/src/aiconfigurator_core/systems/silicon_sample.csv, mode disagg: Qwen/Qwen3-32B fp8 on h100_sxm, ISL 4000 /
# OSL 1000, Dynamo 0.8.0 images (vLLM 0.12.0, SGLang 0.5.6.post2), measured
# 2026-01-23..25. (engine, prefill workers, prefill tp, decode workers, decode tp, decode batch size)
# -> (silicon TTFT ms, silicon TPOT ms); prefill batch size 1 in every row.
AIC_PUBLISHED = {
    ("vllm", 8, 1, 2, 4, 224): (367.7027398125, 8.745754870954954),
    ("sglang", 5, 1, 11, 1, 48): (566.66623309375, 22.31141111796171),
    ("sglang", 8, 1, 2, 4, 256): (9109.412752625, 111.94401688433608),
    ("sglang", 8, 1, 1, 8, 424): (16117.815196, 113.39223651232874),
    ("sglang", 6, 1, 5, 2, 128): (8501.219904, 559.833725140625),
}
AIC_MODEL, AIC_GPU, AIC_WEIGHTS, AIC_ISL, AIC_OSL = "qwen3-32b", "h100", "fp8", 4000, 1000


def compare_aiconfigurator(speed: str = "roofline") -> list[dict]:
    """One row per aiconfigurator silicon point: their xPyD, TTFT and TPOT beside kvplan's balanced
    ratio on the same layouts, one prompt's TTFT alone (prefill + transfer, no queue) and the TPOT at
    their decode batch (--max-num-seqs, as far as the decode replica's KV holds it)."""
    import kvplan

    rows = []
    for (engine, xp, ptp, yd, dtp, batch), (ttft, tpot) in AIC_PUBLISHED.items():
        r = kvplan.disagg(AIC_MODEL, AIC_GPU, speed=speed, weight_dtype=AIC_WEIGHTS, isl=AIC_ISL, osl=AIC_OSL,
                          prefill_tp=ptp, decode_tp=dtp, engine=engine, max_num_seqs=batch, link="ib-400g")
        rows.append({"engine": engine, "their_split": f"{xp}P(tp{ptp}):{yd}D(tp{dtp})", "their_batch": batch,
                     "their_ttft_ms": ttft, "their_tpot_ms": tpot, "our_ratio": f"{r.ratio[0]}P:{r.ratio[1]}D",
                     "our_batch": r.decode_batch, "our_ttft_ms": 1000 * (r.prefill_s + r.transfer_s),
                     "our_tpot_ms": 1000 * r.tpot_s})
    return rows


def main() -> None:
    print(f"{MODEL} ({WEIGHTS}) on {GPU}, {ENGINE}, link {LINK} (assumed); means in ms")
    print(f"{'setting':28} {'config':9} {'TTFT pub':>9} {'kvplan':>7} {'ITL pub':>8} {'kvplan':>7} {'ratio':>6}")
    for row in compare():
        print(f"{row['setting']:28} {row['config']:9} {row['their_ttft_ms']:9.1f} {row['our_ttft_ms']:7.1f} "
              f"{row['their_itl_ms']:8.2f} {row['our_tpot_ms']:7.2f} {row['our_balanced_ratio']:>6}")
    print(f"\naiconfigurator silicon: {AIC_MODEL} ({AIC_WEIGHTS}) on {AIC_GPU}, {AIC_ISL}/{AIC_OSL}; kvplan's "
          "roofline, link ib-400g (assumed)")
    print(f"{'engine':7} {'their split':20} {'batch':>5} {'TTFT pub':>9} {'kvplan':>7} {'TPOT pub':>8} "
          f"{'kvplan':>7} {'ratio':>6}")
    for row in compare_aiconfigurator():
        print(f"{row['engine']:7} {row['their_split']:20} {row['their_batch']:5} {row['their_ttft_ms']:9.1f} "
              f"{row['our_ttft_ms']:7.1f} {row['their_tpot_ms']:8.2f} {row['our_tpot_ms']:7.2f} {row['our_ratio']:>6}")


if __name__ == "__main__":
    main()
