"""A user's layers per pipeline stage (`--engine-opt pp_layer_partition=19,21,20,20`): read, checked, and set on the
Deployment whose stages every memory rule cuts (kvplan.planning.deploy.split_layers, Deployment.stage_layers).

The engines read it from the environment, in the wheels:
  * vLLM, VLLM_PP_LAYER_PARTITION, from 0.5.4: `envs.py` L254-255 and `distributed/utils.py` get_pp_indices L62-75
    (0.5.4); the same checks in 0.6.6 (L67-80), 0.7.3 (L69-82), 0.8.5 (L85-98), 0.10.1 and 0.11.0 (L104-117),
    0.17.0 (L110-121) and 0.33.0 (L214-223).
    0.5.1-0.5.3 have get_pp_indices but read no variable, so a release before 0.5.4 is refused.
  * SGLang, SGLANG_PP_LAYER_PARTITION, from 0.4.6.post2, its first release with pipeline stages (--pp-size:
    kvplan.engines.sglang.layout.check_pp refuses pp > 1 before it): `srt/distributed/utils.py` get_pp_indices,
    0.4.9 and 0.5.3 L71-82, 0.5.10 L107-118, 0.5.23 L118-133 (0.4.0 defines it at L70-81 but calls it nowhere), so
    the option is refused before 0.4.6.
Both parse a comma list with Python's int() on each item ("Invalid partition string" otherwise; kvplan reads it
alike) and raise where its count is not pp (`len(partitions)=... does not match pp_size=...`) or its sum not the
layers (`sum(partitions)=... does not match num_hidden_layers=...`); kvplan refuses the same, before any work.
Neither refuses a stage of 0 layers (or a negative count that the others make up): kvplan plans no stage without
layers and refuses it. SGLang 0.5.23 ignores the variable at pp 1 (L119-122, for a drafter's one-stage group);
kvplan still asks for one count per stage there.
TensorRT-LLM, llama.cpp and transformers: kvplan reads no such setting of theirs, so the option is refused.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.planning.deploy import Deployment, stage_split_problem
from kvplan.planning.plan import PlanWarning

OPT = "pp_layer_partition"


def read(opts: dict) -> tuple[int, ...] | None:
    """The layers per stage an engine's options give (None: not given), or a one-line error for a malformed list."""
    if OPT not in opts:
        return None
    text = str(opts[OPT]).strip()
    try:
        return tuple(int(x) for x in text.split(","))  # as the engines parse it: `int(layer)` for each
    except ValueError:
        raise _refused(text, "must be whole numbers of layers per pipeline stage, separated by commas (19,21,20,20), "
                             f"got {text!r}") from None


def staged(model, dep: Deployment, sizes: tuple[int, ...] | None, env: str) -> Deployment:
    """`dep` with the user's layers per stage set (`env`: the engine's variable, named in a refusal), or a one-line
    refusal where they (or those `dep` carries, a log's: kvplan.engines.logparse) do not split this model over
    dep.pp stages; `dep` itself where none were given."""
    given = sizes is not None
    sizes = sizes if given else dep.stage_layers
    if sizes is None:
        return dep
    problem = stage_split_problem(model.num_layers, dep.pp, sizes)
    if problem and given:
        raise _refused(",".join(map(str, sizes)), f"({env}): {problem}")
    if problem:
        raise KvplanError(f"{env or 'layers per stage'}: {problem}", EXIT_USAGE)
    return replace(dep, stage_layers=sizes)


def unread(engine: str, opts: dict, readers: str, why: str = "") -> None:
    """A one-line refusal where `opts` set the option for an engine (or release) that has no such setting in kvplan's
    reading; `readers`: the engines that do, `why`: the release's reason where the engine has one elsewhere."""
    if OPT in opts:
        raise _refused(str(opts[OPT]), f"is not modelled for {engine}{why}: only {readers} read layers per pipeline "
                                       "stage (VLLM_PP_LAYER_PARTITION, SGLANG_PP_LAYER_PARTITION)")


def said(dep: Deployment) -> tuple[PlanWarning, ...]:
    """The assumption a plan states where the user set the layers per stage (none where the engine's split stands)."""
    if dep.stage_layers is None:
        return ()
    sizes = ",".join(map(str, dep.stage_layers))
    return (PlanWarning(f"layers per pipeline stage {sizes} as given ({arg('engine_opts')} {OPT}); memory is the "
                        "binding stage's"),)


def _refused(value: str, problem: str) -> KvplanError:
    return KvplanError(f"{arg('engine_opts')} {OPT} {problem}", EXIT_USAGE, param="engine_opts", value={OPT: value})
