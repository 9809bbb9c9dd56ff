"""The engine interface: one template that makes a Plan the way an engine allocates its cache.

An `Engine` is configured once (name, version, --engine-opt options, the explicit fit flags) and
then, for a model, a GPU, a deployment and a request, runs the same steps:

  settings   the engine's defaults for this GPU and release, overridden by options and flags;
  request    the Request as the engine reads it (its utilisation, page size, overhead, cache dtype);
  budget     per-stage KV bytes (kvplan.planning.plan.budgets, then the engine's own rule, e.g. a fraction);
  capacity   what the engine prints (tokens, concurrency, blocks, its own labelled lines);
  answers    the plan's tokens, concurrency, longest context and fit, from the capacity;
  emit_args  the serve command line that runs the plan (engines that have one).

`result()` is the template: it runs those steps and makes the Plan once (kvplan.planning.plan.assemble).
The engine-neutral planner (kvplan.engines.neutral) is the default engine. What an engine reports lives in
kvplan.engines.capacity, the reading of its version and options in kvplan.engines.versions and
kvplan.engines.options; their names stay importable from here.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.capacity import Capacity, EngineResult, Figure  # noqa: F401 (re-exported)
from kvplan.engines import checkpoint_kv, stage_split
from kvplan.engines.context import neutral_rule
from kvplan.engines.options import (  # noqa: F401 (re-exported: kvplan.engines.base.check_opts, ...)
    check_opts, opt_bool, opt_float, opt_int, parse_engine_opts,
)
from kvplan.engines.versions import check_version, check_version_name, parse_version  # noqa: F401 (re-exported)
from kvplan.engines.versions import dotted, reading, release_post
from kvplan.hardware.facts import assumed_fact
from kvplan.planning.layout import rank_request, vllm_placement, whole_answers
from kvplan.planning.plan import (Answers, Plan, PlanWarning, Request, Stage, Usage, assemble, budgets,
                                  gpu_budget, paged_max_context, prepare, usage)
from kvplan.planning.plan import as_loaded
from kvplan.engines.registry import emitters, engine_class, engine_names
from kvplan.planning.profile import PAGED
from kvplan.speed.eras import era_of
from kvplan.planning.speculative import check_deployment


def _engines_that(does) -> str:
    """'--engine a or --engine b or ' (the engine input, kvplan.core.errors.arg) for the named engines
    whose class `does` (a refusal's advice)."""
    return "".join(f"{arg('engine')} {n} or " for n in engine_names() if does(engine_class(n)))


class Engine:
    """A configured engine. Subclasses set the class attributes and override the steps they change."""

    name = "kvplan"
    display_name = ""  # how its own docs write it, where that is not `name` (vLLM, SGLang)
    aliases: tuple[str, ...] = ()  # other spellings users type (lowercase)
    versions: tuple[str, ...] = ("",)
    default_version = ""
    option_names: tuple[str, ...] = ()
    emits = False  # has emit_args
    # The layer kinds (kvplan.model.layers.Kind) this engine's rules table sizes: a model with a layer of any
    # other kind is refused (check_layers), so a new kind is planned by no engine until it has a row.
    kinds: frozenset = frozenset()
    # Spec types with an `allocation` of their own (kvplan.model.layers: IndexedMLA, DeepSeek Sparse Attention's
    # indexer keys; ParallelHybrid, Falcon-H1's attention + Mamba layers) that this engine sizes as it
    # allocates them; an engine whose allocation of one nobody has read from its source refuses it.
    reads_layers: frozenset[type] = frozenset()
    # The page sizes (tokens) --block-size may name for this engine; None: any from 1 to 4096.
    block_sizes: tuple[int, ...] | None = None
    supports_dp = False  # data-parallel ranks (each its own pool and requests) are modelled
    # Its data-parallel ranks (replicas of one serving command) sit behind one API server, one front end for all
    # (kvplan.simulator.frontend); else one each, with its share of the requests, as servers apart are. Read through
    # dp_front_end, which an engine whose answer depends on the release overrides (vLLM: engines/vllm/api_servers.py).
    dp_one_front_end = False
    supports_dcp = False  # decode context parallel (MLA latents striped over tp ranks) is modelled
    supports_speculative = False  # a drafter's layers, weights and lookahead (kvplan.planning.speculative) are modelled
    dcp_tokens_whole = False  # the printed token capacity already counts every rank of a dcp group
    # the speed fit prices a corpus run's recurrent states in the type this engine's request step pools them in
    # (kvplan.bench.case_request.case_ssm_dtype); False: in the reader's, where following the engine failed the
    # adoption rule (vLLM: docs/speed-history.md, "vLLM's Mamba-2 temporal state by release")
    fit_follows_ssm_dtype = True
    splits_layers_only = False  # GPUs only split the layers (llama.cpp): one layout of N GPUs, no tp to search
    kv_dtype_flags: dict[str, str] = {}  # emit_args: the serve flag's spelling of a kvplan cache dtype
    # Offload tiers below the GPU pool (kvplan.engines.offload): backend ("native": the engine's own,
    # "lmcache", "kvbm") -> tier ("cpu", "disk", "remote") -> rule(TierRequest, Geometry) -> TierPool, each
    # restated from the source that sizes it; `offload_missing`: backend -> why a tier it lacks is absent.
    offload_rules: dict = {}
    offload_missing: dict[str, str] = {}
    # The environment variable the engine reads layers per pipeline stage from, and its first release that does
    # (kvplan.engines.stage_split); "": none read, so --engine-opt pp_layer_partition is refused.
    stage_split_env = ""
    stage_split_since: tuple[tuple[int, ...], int] = ((), 0)  # (release, post) the setting is read from

    def __init__(self, version: str | None = None, opts: dict | None = None, explicit: dict | None = None):
        """Checked: an unknown version or option is a one-line error before any work."""
        self.version = version
        self.opts = dict(opts or {})
        self.explicit = {k: v for k, v in (explicit or {}).items()}
        self.checked_version(version)
        self.check_stage_split()
        check_opts(self.name, self.opts, self.option_names)

    def check_stage_split(self) -> None:
        """A one-line refusal where the options set layers per stage and this engine release reads none."""
        if stage_split.OPT not in self.opts or (
                self.stage_split_env and release_post(self.version or self.default_version) >= self.stage_split_since):
            return
        why = f" before {dotted(*self.stage_split_since)}" if self.stage_split_env else ""
        readers = _engines_that(lambda e: e.stage_split_env).removesuffix(" or ")
        raise stage_split.unread(self.name, self.opts[stage_split.OPT], readers, why)

    def own_stages(self, model, dep):
        """`dep` cut as this release cuts the layers itself where none are set and its cut is uneven (stage_from
        names it, for stage_split.said): kvplan.engines.stage_split.engine_cut, for result() and the log checks."""
        return stage_split.engine_cut(model, dep, self.name, self.version or self.default_version,
                                      self.display_name or self.name)

    def checked_version(self, version: str | None) -> str:
        """The version to model (a release number within `versions`), or a one-line error."""
        return check_version(self.name, version, self.versions, self.default_version)

    def dp_front_end(self, version: str | None = None) -> tuple[bool, str]:
        """(whether its data-parallel ranks share one API server at release `version`, None: its own; a note where
        the release decides it, else "")."""
        return self.dp_one_front_end, ""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version or self.default_version}"

    @property
    def version_note(self) -> str | None:
        """How the asked release is read where it is not a plain X.Y.Z (a development build: the release before;
        kvplan.engines.versions.reading), for every command that takes --engine-version; else None."""
        return reading(self.name, self.version)

    @property
    def speed_key(self) -> str:
        """The speed coefficient set this release reads (kvplan.speed.eras): the engine's, or an older era's
        where --engine-version names a release before a boundary (none named: the current era)."""
        return era_of(self.name, self.version)

    # --- the steps --------------------------------------------------------------------------------
    def deployment(self, dep):
        """The deployment this engine runs on dep.gpus GPUs (llama.cpp: layers split, no tp)."""
        return dep

    def settings(self, model, gpu, dep, req: Request):
        """The engine's settings object (with as_dict()) for this GPU, deployment and request."""
        return None

    def view(self, model, st):
        """The model as this engine caches it (transformers before 5.15 expands MLA)."""
        return model

    def request(self, req: Request, st, model, dep) -> Request:
        """`req` with the engine's own utilisation, page size, overhead and cache dtype."""
        return req

    def rules(self, st):
        """How held tokens become allocated slots (kvplan.planning.profile.PAGED or the engine's own)."""
        return PAGED

    def budget(self, stages: tuple[Stage, ...], req: Request, st) -> tuple[Stage, ...]:
        """Per-stage KV bytes: the planner's budget unless the engine scales it."""
        return stages

    def kv_share(self, stages: tuple[Stage, ...], req: Request, st) -> float:
        """The share of `stages`' KV bytes (what weights, overhead and adapters leave) that budget() keeps, as the
        memory table shows it (Plan.kv_share): all of it unless the engine scales it."""
        return 1.0

    def capacity(self, model, dep, stages, req: Request, st, use: Usage) -> Capacity:
        raise NotImplementedError

    def answers(self, model, dep, stages, req: Request, st, use: Usage, cap: Capacity) -> Answers:
        """The plan's figures from the capacity; the engine's longest context by max_context()."""
        mc = self.max_context(model, dep, stages, req, st, cap)
        return Answers(cap.tokens, cap.max_concurrency_int, mc, self.fits(cap, req))

    def fits(self, cap: Capacity, req: Request) -> bool:
        return cap.max_concurrency >= req.batch

    def max_context(self, model, dep, stages, req: Request, st, cap: Capacity) -> int:
        return paged_max_context(stages, req.batch, model.max_context)

    def float32_served(self) -> tuple[str, str] | None:
        """(dtype, why) this engine release's default --dtype serves a float32 config in (kvplan.engines.served_dtype),
        or None where kvplan reads no such rule: the config's float32 is planned."""
        return None

    def context_limit(self, model):
        """The longest request this engine accepts for `model` (kvplan.engines.context.ContextLimit): kvplan's
        own rule (vLLM's current derivation) unless the engine derives it otherwise."""
        return neutral_rule(model)

    def settings_dict(self, st, model, dep, req: Request) -> dict:
        """The settings as fit --json reports them."""
        return st.as_dict() if st is not None else {}

    def emit_args(self, plan: Plan, model, settings: dict, gpu=None) -> list[str]:
        """The serve command's argv for `plan` on `gpu` (its profile: the dtype facts the flags follow)."""
        raise KvplanError(f"{arg('emit')} supports {', '.join(emitters())}, not {self.name}", EXIT_USAGE,
                          param="emit", value=self.name, allowed=tuple(emitters()))

    def emit_note(self, result: EngineResult, model) -> str | None:
        """The margin the emitted command leaves, in words (None: nothing to say)."""
        return None

    def emit_weights_note(self, result: EngineResult, model) -> str | None:
        """What the emitted command assumes about the weights it loads, in words, where it is not plain."""
        return None

    def parallel_flags(self, dep, model) -> list[str]:
        """The serve flags that lay `dep` out, in the engine's own terms (none for an engine without them)."""
        return []

    # --- the template -----------------------------------------------------------------------------
    def result(self, model, gpu, dep, req: Request) -> EngineResult:
        """`req` on `dep` as this engine allocates: its Plan (made once), printed figures and settings.
        A KvplanError where the engine cannot run the deployment."""
        self.check_layers(model, req.kv_dtype)
        dep = stage_split.staged(model, dep, stage_split.read(self.opts), self.stage_split_env)
        dep = self.own_stages(model, dep)
        self.check_layout(model, dep)
        req, kv_said = self.with_checkpoint_kv(model, req)
        st = self.settings(model, gpu, dep, req)
        view = self.view(model, st)
        r, lora_notes = self.with_lora(view, dep, self.request(req, st, view, dep), st)
        one = rank_request(r, dep)  # one data-parallel rank: its share of the requests, its own pool
        prep = prepare(view, dep, one, self.rules(st), step_tokens=r.batch, placement=self.placement(view, dep, gpu))
        extra = self.loaded_extra(view, dep, st)
        prep = as_loaded(prep, extra, dep)
        budget = gpu_budget(gpu, one)
        left = budgets(prep, budget, one)
        stages, share = self.budget(left, one, st), self.kv_share(left, one, st)
        use = usage(stages, one)
        cap = self.capacity(view, dep, stages, one, st, use)
        cap = cap._replace(notes=(*cap.notes, *lora_notes)) if lora_notes else cap
        if extra:  # the weights line as the engine's log prints it, beside the checkpoint's bytes (issue 22)
            loaded = max(s.weight_bytes for s in prep.stages)
            cap = cap._replace(lines=(*cap.lines, Figure(self.loaded_label, (loaded - extra, extra),
                                                         "checkpoint + loading")))
        ans = whole_answers(self.answers(view, dep, stages, one, st, use, cap), dep, self.dcp_tokens_whole)
        plan = assemble(view, gpu, dep, r, prep, budget, stages, use, ans, name=model.name,
                        assumed=(*kv_said, *stage_split.said(dep), *self.assumptions(view, gpu, dep, st)),
                        pooled=cap.pooled, kv_share=share, span=self.tp_group(view, dep))
        return EngineResult(plan, cap, self.settings_dict(st, view, dep, r), gpu)

    # the engine table's row for weights as loaded, where loading adds to the checkpoint (loaded_extra)
    loaded_label = "weights as loaded per GPU"

    def loaded_extra(self, model, dep, st) -> int:
        """Bytes per GPU this engine's loading adds to the checkpoint's weights (kernel repacking and padding,
        tables built in the model's constructor), booked as weights so a plan's weights are what the engine
        reports loading. The default engine loads the checkpoint as stored."""
        return 0

    def with_checkpoint_kv(self, model, req: Request):
        """`req` with the cache dtype this engine uses for a checkpoint that declares its KV quantization, and the
        plan warnings that say so (kvplan.engines.checkpoint_kv); unchanged for one that declares none."""
        if model.checkpoint_kv is None:
            return req, ()
        return checkpoint_kv.resolve(self.checkpoint_kv_rule(model.checkpoint_kv), model, req)

    def auto_kv_dtype(self, model) -> str | None:
        """The cache dtype this engine's 'auto' gives `model` where it is not the model dtype (a declared KV cache it
        follows), else None: an emitted command passes the plan's dtype by name where they differ."""
        ckv = model.checkpoint_kv
        return None if ckv is None else checkpoint_kv.auto_dtype(self.checkpoint_kv_rule(ckv), model)

    def checkpoint_kv_rule(self, ckv) -> checkpoint_kv.KvRule:
        """What this engine release's 'auto' cache dtype does with a checkpoint's declared KV quantization `ckv`
        (kvplan.model.checkpoint_kv.CheckpointKV; kvplan.engines.checkpoint_kv): unread unless the engine says
        otherwise."""
        return checkpoint_kv.default_rule(self.display_name or self.name)

    def with_lora(self, model, dep, req: Request, st) -> tuple[Request, tuple[str, ...]]:
        """`req` with the bytes per GPU this engine reserves for its LoRA adapters (req.lora), and notes."""
        if req.lora is None:
            return req, ()
        size, notes = self.lora_price(model, dep, req.lora, st)
        return replace(req, lora_bytes=size), notes

    def lora_price(self, model, dep, lora, st) -> tuple[int, tuple[str, ...]]:
        """(bytes per GPU, notes) of `lora` (kvplan.planning.lora.LoraRequest) as this engine reserves it
        (kvplan.engines.lora); an engine that has not read its LoRA allocation refuses."""
        priced = _engines_that(lambda cls: cls.lora_price is not Engine.lora_price)
        raise KvplanError(f"{self.name} has no LoRA pricing in kvplan; use {priced.removesuffix(' or ')}",
                          EXIT_USAGE, param="lora", value=lora.text)

    def tp_group(self, model, dep) -> tuple[int, str]:
        """The ranks of this engine's tensor-parallel group, which the plan checks one node holds
        (kvplan.planning.plan_warnings.node_span_warnings), and what the engine calls it ("": kvplan's tp)."""
        return dep.tp, ""

    def assumptions(self, model, gpu, dep, st) -> tuple:
        """Plan warnings (kvplan.planning.plan.PlanWarning) for the hardware facts this engine's rules read on
        this plan that the GPU's profile leaves out, each with what the rule assumed instead
        (kvplan.hardware.facts.ASSUMED_FACTS). The default engine reads none."""
        return ()

    def restated(self, model, notices: tuple[str, ...]) -> tuple[str, ...]:
        """What resolving `model` noticed, as this engine's options leave it true (vLLM: a tower its
        limit_mm_per_prompt 0 skips is not "counted in the weights"); the default engine: as read."""
        return tuple(notices)

    def check_layers(self, model, kv_dtype=None) -> None:
        """A one-line refusal where the model has a kind of cache this engine's rules do not size: a
        drafter (--speculative) it does not model, a kind without a row in its table, or a spec with
        an allocation of its own it has not read. `kv_dtype`: the plan's cache dtype where known (None: not yet),
        for an engine whose refusal also names the dtype a model needs (vLLM's DeepSeek-V4)."""
        if getattr(model, "speculative", None) is not None:
            self.check_speculative(model.speculative.method)
        for layer in dict.fromkeys(model.layers):
            if layer.kind not in self.kinds:
                others = _engines_that(lambda e, k=layer.kind: k in e.kinds)
                raise KvplanError(f"{self.name} has no rule for {layer.kind} layers ({layer.describe()}); plan it "
                                  f"with {others}the default engine", EXIT_USAGE)
            if layer.allocation and type(layer) not in self.reads_layers:
                others = _engines_that(lambda e, t=type(layer): t in e.reads_layers)
                raise KvplanError(f"{self.name} has no modelled allocation for {layer.allocation}; plan it with "
                                  f"{others}the default engine", EXIT_USAGE)

    def offload_rule(self, backend: str, tier: str):
        """The rule that sizes `tier` under `backend` (kvplan.engines.offload), or a one-line refusal saying why not."""
        if not self.offload_rules:
            others = _engines_that(lambda e: e.offload_rules)
            raise KvplanError(f"{arg('offload')} with {arg('engine')} {self.name}: it has no KV offload tier; plan it "
                              f"with {others}the default engine", EXIT_USAGE, param="offload")
        if backend not in self.offload_rules:
            raise KvplanError(f"{arg('offload_backend')} {backend} does not run under {self.name} (it has: "
                              f"{', '.join(self.offload_rules)})", EXIT_USAGE, param="offload_backend", value=backend,
                              allowed=tuple(self.offload_rules))
        rule = self.offload_rules[backend].get(tier)
        if rule is None:
            why = self.offload_missing.get(backend, f"{self.name} with {backend} has no {tier} tier")
            kvbm = "" if backend == "kvbm" or "kvbm" not in self.offload_rules else \
                f"; try {arg('offload_backend')} kvbm (Dynamo KVBM) for disk and remote"
            raise KvplanError(f"{arg('offload')} {tier}: {why}{kvbm}", EXIT_USAGE, param="offload", value=tier)
        return rule

    def check_speculative(self, method: str) -> None:
        """A one-line refusal where this engine (or this release of it) does not model the drafter
        `method` (kvplan.planning.speculative: "mtp", "draft_model", "ngram"): checked from the flag alone,
        before any model is read, and again for every model planned (check_layers)."""
        if not self.supports_speculative:
            others = _engines_that(lambda e: e.supports_speculative)
            raise KvplanError(f"{arg('speculative')} with {arg('engine')} {self.name}: its drafter's cache and "
                              f"weights are not modelled; plan it with {others}the default engine", EXIT_USAGE,
                              param="speculative", value=method)

    def placement(self, model, dep, gpu=None):
        """Over how many ranks each part of the weights is split (kvplan.planning.layout.Placement): vLLM's."""
        return vllm_placement(dep.tp, dep.dp)

    def check_layout(self, model, dep) -> None:
        """A one-line error for a layout this engine is not modelled for (before any output)."""
        check_deployment(model, dep)
        if dep.dcp > 1 and not self.supports_dcp:
            raise KvplanError(f"{arg('dcp')} with {arg('engine')} {self.name}: the engine's decode-context-parallel "
                              f"pool (pages x dcp) is not modelled; plan it without {arg('engine')}", EXIT_USAGE,
                              param="dcp", value=dep.dcp)
        if dep.dp > 1 and not self.supports_dp:
            others = _engines_that(lambda e: e.supports_dp)
            raise KvplanError(f"{arg('dp')} with {arg('engine')} {self.name}: its data-parallel ranks are not "
                              f"modelled; plan them with {others}the default engine", EXIT_USAGE, param="dp",
                              value=dep.dp)

    def plan(self, model, gpu, dep, req: Request) -> Plan:
        return self.result(model, gpu, dep, req).plan

    def grid(self, model, gpus, dep, requests) -> list[Plan]:
        """[plan(model, gpu, dep, req) for gpu in gpus for req in requests]."""
        return [self.plan(model, gpu, dep, req) for gpu in gpus for req in requests]


def fact_warnings(engine: str, gpu, facts) -> tuple[PlanWarning, ...]:
    """One plan warning per hardware fact in `facts` (of kvplan.hardware.facts.ASSUMED_FACTS) that `engine`'s
    rules read on this plan and the GPU's profile leaves out: what they assumed instead."""
    key = getattr(gpu, "key", "?")
    return tuple(PlanWarning.literal((f"GPU profile '{key}' gives no {fact}: {engine}'s rules assumed "
                                     f"{assumed_fact(gpu, fact)} (kvplan/hardware/profiles/README.md)"))
                 for fact in dict.fromkeys(facts))
