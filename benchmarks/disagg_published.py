"""Published disaggregated-serving results next to `kvplan disagg`'s predictions for the same setting.

Run by hand: `.venv/bin/python benchmarks/disagg_published.py`. tests/test_disagg.py runs `compare()` and
checks the one thing a roofline step-time model promises: its latencies are lower bounds of measured ones.

Source: the Mooncake team's SGLang PD benchmark, kvcache-ai/Mooncake docs/source/en/sglang-benchmark-results-v1.md
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
        r = kvplan.disagg(MODEL, GPU, speed="roofline", weight_dtype=WEIGHTS, isl=isl, osl=osl, prefill_tp=tp, decode_tp=tp, qps=qps,
                          duration=n / qps, seed=seed, max_gpus=2 * tp, link=LINK, engine=ENGINE, slo_ttft=1e3,
                          slo_tpot=1e3)
        ours = {"1P1D": r.search["tried"][0], "2 regular": r.search["aggregated_same_gpus"]}
        for name, (ttft, itl) in theirs.items():
            rows.append({"setting": f"tp {tp}, {isl}/{osl}, {qps:g} req/s", "config": name,
                         "their_ttft_ms": ttft, "our_ttft_ms": 1000 * ours[name]["ttft_s"]["mean"],
                         "their_itl_ms": itl, "our_tpot_ms": 1000 * ours[name]["tpot_s"]["mean"],
                         "our_balanced_ratio": f"{r.ratio[0]}P:{r.ratio[1]}D"})
    return rows


def main() -> None:
    print(f"{MODEL} ({WEIGHTS}) on {GPU}, {ENGINE}, link {LINK} (assumed); means in ms")
    print(f"{'setting':28} {'config':9} {'TTFT pub':>9} {'kvplan':>7} {'ITL pub':>8} {'kvplan':>7} {'ratio':>6}")
    for row in compare():
        print(f"{row['setting']:28} {row['config']:9} {row['their_ttft_ms']:9.1f} {row['our_ttft_ms']:7.1f} "
              f"{row['their_itl_ms']:8.2f} {row['our_tpot_ms']:7.2f} {row['our_balanced_ratio']:>6}")


if __name__ == "__main__":
    main()
