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
    the option is refused before 0.4.6.post2.
Both parse a comma list with Python's int() on each item ("Invalid partition string" otherwise; kvplan reads it
alike) and raise where its count is not pp (`len(partitions)=... does not match pp_size=...`) or its sum not the
layers (`sum(partitions)=... does not match num_hidden_layers=...`); kvplan refuses the same, before any work.
Neither refuses a stage of 0 layers (or a negative count that the others make up): kvplan plans no stage without
layers and refuses it. SGLang 0.5.23 ignores the variable at pp 1 (L119-122, for a drafter's one-stage group);
kvplan still asks for one count per stage there.
TensorRT-LLM, llama.cpp and transformers: kvplan reads no such setting of theirs, so the option is refused.

Unset, each engine cuts the layers its own way, by release (CUTS; the forms are kvplan.planning.deploy.cut_sizes'):
  * vLLM before 0.8.0: the whole remainder to the last stage (0.7.3 wheel `distributed/utils.py` get_pp_indices
    L85-91, "the last partition will have the remaining layers"; the same in 0.5.4 and 0.6.6); from 0.8.0 one layer
    apiece to the stages before the last, from the second-to-last backwards (0.8.0 wheel L98-103,
    `partitions[-i] += 1` for i in 2 .. remainder + 1; vllm-project/vllm#13839, merged 2025-02-26; 0.17.0 L122-128).
  * SGLang before 0.5.6: the whole remainder to the last stage (0.4.0 L83-89, 0.5.5 and 0.5.5.post3 L85-91); from
    0.5.6 one layer apiece to the last `remainder` stages (0.5.6 L85-97, sgl-project/sglang#13282; 0.5.23 L136-148).
  * TensorRT-LLM: `Mapping.pp_layers`, torch.tensor_split over the layers ("first n ranks get one extra layer",
    tensorrt_llm/mapping.py @05ebebb2; NVIDIA/TensorRT-LLM#4399 made the TensorRT flow and the C++ runtime's layer
    count the same, May 2025). Read in the code index's 1.x snapshots; 0.20.0's tree is not in reach, planned alike
    and said.
  * llama.cpp (`--split-mode layer`): layer i on the first device whose cumulative `--tensor-split` share exceeds
    i / (n_layer + 1), the output layer the last slot (src/llama-model.cpp load_tensors, `act_gpu_layers =
    min(n_gpu_layers, n_layer + 1)`, `std::upper_bound(splits, float(il - i_gpu_start) / act_gpu_layers)`); unset,
    the shares are the devices' free memory, planned as equal (identical idle GPUs: 80 layers over 4 are 21, 20,
    20, 19 with the output on the last).
A plan says among its assumptions where its layers per stage came from (`said`, Deployment.stage_from): the user's
option (`staged`), the log a check reads them from (kvplan.engines.logrecord.logged_split) or the engine release's own
uneven cut (`engine_cut`).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.core.releases import release_of
from kvplan.planning.deploy import FIRST_ONES, LAST, LAST_ONES, MIDDLE, SHARES, Deployment, cut_sizes
from kvplan.planning.deploy import stage_split_problem
from kvplan.planning.plan import PlanWarning

OPT = "pp_layer_partition"

# engine -> ((first release, form, how it reads), ...), newest first, the last from (0, 0, 0): every release has one
CUTS = {
    "vllm": (((0, 8, 0), MIDDLE, "the remainder one layer apiece before the last stage"),
             ((0, 0, 0), LAST, "the remainder on the last stage")),
    "sglang": (((0, 5, 6), LAST_ONES, "the remainder one layer apiece on the last stages"),
               ((0, 0, 0), LAST, "the remainder on the last stage")),
    "trtllm": (((1, 0, 0), FIRST_ONES, "the remainder one layer apiece on the first stages"),
               ((0, 0, 0), FIRST_ONES, "the remainder one layer apiece on the first stages, 1.x's split (this "
                                       "release's is not read)")),
    "llama.cpp": (((0, 0, 0), SHARES, "its layer split at equal free memory, the output layer last"),),
}


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
    return replace(dep, stage_layers=sizes, stage_from=f" as given ({arg('engine_opts')} {OPT})") if given else dep


def own_cut(engine: str, version: str | None) -> tuple[str, str] | None:
    """(form, how it reads) of the engine release's own cut (CUTS; a named release, llama.cpp's eras, takes the
    engine's newest row), or None for an engine kvplan has read none of (split_layers' default)."""
    rows = CUTS.get(engine)
    if not rows:
        return None
    v = release_of(version) or rows[0][0]
    return next((form, how) for since, form, how in rows if v >= since)


def engine_cut(model, dep: Deployment, engine: str, version: str | None, shown: str) -> Deployment:
    """`dep` cut as the engine release cuts it by itself where no layers per stage are set and its cut is uneven
    (Deployment.stage_layers, so every stage rule reads it), its stage_from naming that cut (`shown`: the engine's
    name as its docs write it) for the assumption `said` states; `dep` as it is else."""
    cut = own_cut(engine, version) if dep.stage_layers is None and dep.pp > 1 else None
    if cut is None:
        return dep
    sizes = cut_sizes(model.num_layers, dep.pp, cut[0])
    if len(set(sizes)) == 1:
        return dep
    return replace(dep, stage_layers=sizes, stage_from=f": {shown} {version}'s own split ({cut[1]})")


def unread(engine: str, value, readers: str, why: str = "") -> KvplanError:
    """The one-line refusal of the option set to `value` for an engine (or release) that has no such setting in
    kvplan's reading (the caller, kvplan.engines.base.Engine.check_stage_split, has seen it set); `readers`: the
    engines that do, `why`: the release's reason where the engine has one elsewhere."""
    return _refused(str(value), f"is not modelled for {engine}{why}: only {readers} read layers per pipeline stage "
                                "(VLLM_PP_LAYER_PARTITION, SGLANG_PP_LAYER_PARTITION)")


def said(dep: Deployment) -> tuple[PlanWarning, ...]:
    """The assumption a plan states where its layers per stage are set, naming where they came from
    (Deployment.stage_from; the module docstring); none where the engine's even split stands."""
    if dep.stage_layers is None:
        return ()
    sizes = ",".join(map(str, dep.stage_layers))
    return (PlanWarning(f"layers per pipeline stage {sizes}{dep.stage_from or ' as given'}; memory is the binding "
                        "stage's", note=True),)  # where the cut came from: a note, not a danger


def _refused(value: str, problem: str) -> KvplanError:
    return KvplanError(f"{arg('engine_opts')} {OPT} {problem}", EXIT_USAGE, param="engine_opts", value={OPT: value})
