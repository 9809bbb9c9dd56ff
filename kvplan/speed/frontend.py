"""What a served run's API server does with a request before the engine sees it: the endpoint a corpus point
states (`endpoint_of`), whether an engine's front end renders a model's chat request without its Python chat
template and tokenizer (`native_chat`), and how many crossings of the front end, the fitted `ingress` term, a
load's latencies and throughput carry (`ingress_queue`, `front_end_burst`, `ingress_rate`): none for a request
rendered natively or driven in process; and where the engine steps while its front end still hands a burst on
(`PIPELINED`: SGLang), the run as the longer of the two, not their sum (`front_share`, `divisor_row`)."""

from __future__ import annotations

from kvplan.speed.bench_load import Load, at_rate, busy
from kvplan.speed.model import priced

ENDPOINTS = ("chat", "completions")  # /v1/chat/completions, /v1/completions


def endpoint_of(p: dict) -> str | None:
    """The point's `endpoint` (chat | completions), None where not stated; any other value is refused."""
    value = p.get("endpoint")
    if value is None:
        return None
    if str(value) not in ENDPOINTS:
        raise ValueError(f"endpoint {value!r}: one of {', '.join(ENDPOINTS)}")
    return str(value)


# Chat formats (kvplan.readers.chat_format) whose chat requests an engine's API server renders to token ids without
# its Python chat template and tokenizer, per engine: vLLM renders harmony (gpt-oss's) through
# openai_harmony (Rust), `render_for_completion` returning token ids, in place of `_preprocess_chat` (the HF
# tokenizer's Jinja chat template, then its tokenizer): `self.use_harmony = self.model_config.hf_config.model_type ==
# "gpt_oss"` and the `# For GPT-OSS.` branch of create_chat_completion (vllm-project/vllm@
# 99c5632fc2d252a6f25afa76347df392eb898c42:vllm/entrypoints/openai/serving_chat.py; the corpus's runs are 0.10.2,
# assumed, not read, to take the same branch). Only a stated chat endpoint (`endpoint: chat`)
# reads it: /v1/completions tokenizes a gpt-oss prompt as any other. Applied by kvplan.speed.fit.Built (Load.templated).
NATIVE_CHAT = {"vllm": frozenset({"harmony"})}


def native_chat(engine: str, chat_format: str, endpoint: str | None) -> bool:
    """Whether `engine`'s front end renders a chat request in `chat_format` (kvplan.readers.chat_format) without its
    Python template."""
    return endpoint == "chat" and chat_format in NATIVE_CHAT.get(engine, frozenset())


def ingress_queue(load: Load) -> float:
    """The requests' crossings of the serving front end a request's TTFT and E2E carry before the engine sees it: the
    multiple of the `ingress` term (seconds per request, kvplan.speed.terms). The API server (vLLM's, SGLang's,
    trtllm-serve's: one process apart from the engine's steps) parses, templates and tokenises each request before it
    hands it on, and the client times TTFT from its send. N, the burst's requests, where they all arrive at once
    (`front_end_burst`): the server interleaves the N of them, so most reach the engine only once most are through
    (GPUStack's vLLM 0.11 bursts of 1,000: the TTFT of 128-token prompts, 4 out, is most of the run and about the
    ShareGPT run's, whatever the prompt). 1 for a request that arrives spread (a closed loop, an open loop at a rate,
    a run of untold size): its own crossing, which it waits for alone (issue 21: GPUStack's Qwen3-8B page, one H100,
    the same `vllm bench serve` chat client for each engine: vLLM 0.11.0's TTFT 59-75 ms at concurrency 1-8, where
    the step terms give 24-26 ms; SGLang 0.5.3's 28 ms at 4). 0 where no Python front end runs: an in-process harness
    (`served` false), or a chat request whose prompt the front end renders to token ids natively (`templated` false:
    kvplan.speed.frontend.native_chat), skipping the Python chat template and tokenizer this term prices."""
    if not _crosses(load):
        return 0.0
    return float(load.num_prompts) if front_end_burst(load) else 1.0


def _crosses(load: Load) -> bool:
    """Whether a load's requests cross a Python front end: served (not in process), templated, a `serve` bench."""
    return load.served and load.templated and load.bench == "serve"


def front_end_burst(load: Load) -> bool:
    """Whether a served, templated load's requests all reach the front end at once: a burst of a stated count, no
    rate, no closed loop (ingress_queue's N)."""
    return bool(_crosses(load) and not at_rate(load) and not load.concurrency and load.num_prompts)


def ingress_rate(load: Load) -> float:
    """The multiple of the `ingress` term a throughput's divisor (a request's time on a replica) carries for a burst
    (`front_end_burst`): the front end takes the burst's N requests one by one, N x ingress of the run before the
    last reaches the engine, over N requests on d busy replicas (`busy`): d x ingress a request. 0 for a request that
    arrives spread: its own crossing delays it, not the replica, which serves others meanwhile (a closed loop's
    clients wait it out too, not priced: under 1% of GPUStack's Qwen3-8B rate at concurrency 1)."""
    return float(busy(load)) if front_end_burst(load) else 0.0


# Engines whose API server hands each request to the engine the moment it has tokenised it, in a process apart from the
# engine's steps, so a burst's later crossings run while the engine already steps through the requests handed on.
# SGLang: the TokenizerManager (in the HTTP server's process; the Scheduler a subprocess) tokenises a request and sends
# it to the Scheduler at once, with no await between (`tokenized_obj = await self._tokenize_one_request(obj)`, then
# `self._send_one_request(...)`, whose `send_to_scheduler.send_pyobj`: sglang 0.5.3 wheel,
# srt/managers/tokenizer_manager.py L400-402 and L815; 0.5.12 wheel L555-556; the tokenizer called synchronously,
# `self.tokenizer(tokenizer_input)` L538-540, unless --enable-dynamic-batch-tokenizer, off by default, server_args.py
# L423), and the Scheduler drains whatever has arrived before each batch (`recv_pyobj(zmq.NOBLOCK)` until empty,
# scheduler.py L1136-1138). So a burst's run lasts the longer of the front end's d x ingress a request and the engine's
# time a request, not their sum (vLLM's API server renders a burst's templates back to back before most hand-offs,
# docs/speed-history.md "A served burst's front end and engine as a pipeline": it keeps the sum). What a burst's request
# waits before its first token keeps the fitted N crossings (ingress_queue): a pipelined wait was tried and not adopted.
PIPELINED = frozenset({"sglang"})


def front_share(engine: str, share: float, t_engine: float) -> float:
    """Seconds a throughput's divisor adds to the engine's `t_engine` a request for the front end's `share` (d x
    ingress, ingress_rate): all of it, or under a PIPELINED engine only what the front end takes beyond the engine, so
    the divisor is max(t_engine, share)."""
    return max(0.0, share - t_engine) if engine in PIPELINED else share


def divisor_row(row: list, crossings: float, engine: str, coef, at: int) -> list:
    """A throughput divisor's feature row (`row`, the engine's) with the front end's `crossings` of the ingress term
    (column `at`): added, or under a PIPELINED engine whichever of the two the previous pass's coefficients `coef`
    (None: the first pass, the engine's) find longer, which keeps the row linear."""
    out = list(row)
    if engine not in PIPELINED:
        out[at] += crossings
    elif coef is not None and crossings * coef[at] > priced(coef, row):  # front_share's max(0, share - engine) > 0
        out = [0.0] * len(row)
        out[at] = crossings
    return out
