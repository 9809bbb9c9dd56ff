"""What a benchmark's load makes of the step times: an analytic steady state, no simulation.

Two step costs carry everything: t_wave, the prefill of the B requests that run together (their
prompts in chunks of steps, each request's fixed cost included), and t_dec(B), one decode step of
the B requests at the mean context (isl + osl / 2). Every metric is then a x t_wave + b x t_dec
(times), or the inverse of one (throughputs), so it stays linear in the coefficients and 1,800
points fit in seconds:

  GPU time per request     T = (t_wave + osl x t_dec) / B
  output tokens/s          dp x osl / T;   requests/s dp / T
  closed loop, c running   E2E = c x T (Little's law); B = min(c, the batch cap); the c - B requests
                           over the cap queue, and the B running arrive together (a closed loop
                           starts them at once and equal lengths keep them in step), each waiting
                           for the prefills before it: TTFT = (c - B) x T + (B + 1) / 2B x t_wave
  all at once (N <= c)     E2E = (N + B) / 2 x T (waves of B); TTFT = (B + 1) / 2B x t_wave +
                           (N - B)^2 / 2N x T
  N not told, all at once  the steady state at the cap (c = B = cap): a throughput run
  open loop at rate r      as a closed loop of c = r x E2E requests (Little's law, E2E from the
                           previous estimate), N <= c once r passes what the deployment serves
  TPOT (= mean ITL)        (E2E - TTFT) / (osl - 1)
  llama-bench              pp = n_prompt / t_wave (one request, no request cost, ubatch chunks);
                           tg = 1 / t_dec(1)

Queueing is thus Little's law over a saturated server plus the waves of a burst: no arrival
variance (Poisson bursts would add waiting time), and a wave's prefills never share a step with decodes.
"""

from __future__ import annotations

from dataclasses import dataclass

RATE_METRICS = ("output_throughput", "request_throughput", "total_throughput", "pp_tok_s", "tg_tok_s")


@dataclass(frozen=True)
class Load:
    """A benchmark's load on one data-parallel replica of the deployment."""

    isl: float
    osl: float
    concurrency: float | None = None  # closed loop; None: open loop or all at once
    rate: float | None = None  # requests/s over the deployment; None or inf: all at once
    num_prompts: float | None = None
    cap: float = 256  # the most requests a replica runs at once (engine limit, KV room)
    dp: int = 1
    bench: str = "serve"  # serve | pp | tg (llama-bench)
    depth: float = 0  # llama-bench: cached tokens before the measured ones
    ubatch: int = 512  # llama-bench's prompt chunk


def batch_and_mode(load: Load, e2e_estimate: float | None) -> tuple[float, float, bool]:
    """(B running, c in the system, burst?) per replica."""
    if not load.num_prompts and not load.concurrency and not (load.rate and load.rate != float("inf")):
        return load.cap, load.cap, False  # a throughput run of untold length: the steady state at the cap
    n = (load.num_prompts or 1e9) / load.dp
    if load.concurrency:
        c = load.concurrency / load.dp
    elif load.rate and load.rate != float("inf"):
        c = load.rate / load.dp * e2e_estimate if e2e_estimate else 1.0
    else:
        c = n
    c = max(1.0, min(c, n))
    return max(1.0, min(c, load.cap)), c, c >= n


def combos(load: Load, e2e_estimate: float | None = None) -> tuple[float, dict]:
    """(B, {metric: (a, b, inverse scale or 0)}): a metric is a x t_wave + b x t_dec, or scale / that
    where `inverse` is non-zero (a throughput)."""
    if load.bench == "pp":
        return 1.0, {"pp_tok_s": (1.0, 0.0, load.isl)}
    if load.bench == "tg":
        return 1.0, {"tg_tok_s": (0.0, 1.0, 1.0)}
    b, c, burst = batch_and_mode(load, e2e_estimate)
    osl = max(1.0, load.osl)
    t = (1.0 / b, osl / b)  # T = (t_wave + osl x t_dec) / B
    first = ((b + 1) / (2 * b), 0.0)  # the mean request of a wave gets its first token half-way through it
    if burst:
        n = c
        e2e = ((n + b) / 2 * t[0], (n + b) / 2 * t[1])
        wait = (n - b) ** 2 / (2 * n)
    else:
        e2e = (c * t[0], c * t[1])
        wait = c - b
    ttft = (first[0] + wait * t[0], wait * t[1])
    k = max(1.0, osl - 1)
    out = {
        "e2el": (e2e[0], e2e[1], 0.0),
        "ttft": (ttft[0], ttft[1], 0.0),
        "tpot": ((e2e[0] - ttft[0]) / k, (e2e[1] - ttft[1]) / k, 0.0),
        "output_throughput": (t[0], t[1], load.dp * osl),
        "request_throughput": (t[0], t[1], float(load.dp)),
        "total_throughput": (t[0], t[1], load.dp * (load.isl + osl)),
    }
    return b, out


def value(combo: tuple, t_wave: float, t_dec: float) -> float:
    a, b, inv = combo
    t = a * t_wave + b * t_dec
    if inv:
        return inv / t if t > 0 else float("inf")
    return t
