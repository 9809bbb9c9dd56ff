"""When a new request joins an engine's running batch: at its first scheduled step, or only once its own prefill
batch has run, which decides whether its prefill holds a running slot in an open loop's Little's law
(kvplan.speed.load's `joins_late`, carried by kvplan.bench.running).

SGLang prefills new requests in a batch of their own (or, with mixed chunks, beside the decodes) and merges that batch
into `running_batch` at the next `get_next_batch_to_run`, once its first tokens are out; a chunked prompt stays out
until its last chunk (sglang 0.5.15 wheel, srt/managers/scheduler.py `get_next_batch_to_run` L2616-2669: the chunked
request excluded, `last_batch` merged after an extend; 0.5.23 L3934-3961; 0.4.0.post1 L715-730; 0.3.3
`process_batch_result_prefill` L726-730; sgl-project/sglang@0003215cf1464f44b389cd0b18d0b4c56f2a3da6:
python/sglang/srt/managers/scheduler.py `get_next_batch_to_run`). vLLM's V1 scheduler appends a request to `running` in
the step that schedules its first prompt chunk, beside the running decodes in one token budget (vllm 0.25.0 wheel,
v1/core/sched/scheduler.py `schedule` L969 `self.running.append(request)`, L988 RUNNING;
vllm-project/vllm@00024d314514900f361ad072af6931e403b7f589:vllm/v1/core/sched/scheduler.py), so it counts from its
first scheduled step: not such. Other engines: no rule here, counted from their first scheduled step.
"""

from __future__ import annotations

from kvplan.engines.registry import canonical_engine

JOINS_AFTER_PREFILL = frozenset({"sglang"})


def joins_after_prefill(engine: str | None) -> bool:
    """Whether a request of `engine` joins the running batch only once its prefill batch has run
    (JOINS_AFTER_PREFILL), not at its first scheduled step."""
    return bool(engine) and canonical_engine(engine) in JOINS_AFTER_PREFILL
