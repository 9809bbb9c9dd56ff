"""Speculative decoding: the model as served with its drafter (`--speculative`).

The flag follows vLLM's `--speculative-config` (`vllm/config/speculative.py`: `method`,
`num_speculative_tokens`, `model`):

  mtp[:N]            the checkpoint's own multi-token-prediction modules (ModelSpec.mtp_layers), N
                     speculative tokens (default: the number of modules, vLLM's n_predict);
  draft:MODEL:N      a separate draft model (catalog name, folder or Hub id), N tokens (required, as in vLLM);
  ngram:N            prompt lookup (prompt_lookup_min = max = 5, vLLM's default): no weights, no cache;
  eagle / eagle3     refused: EAGLE heads are not read by kvplan.

What the drafter costs, as vLLM v0.33.0 allocates it (docs/engines.md section 1.6):
  * its attention layers get KV cache specs like the target's and join the same groups and block
    tables (`v1/kv_cache_interface.py` L215 `is_draft` "excluded from equality so it never affects
    grouping"; `v1/spec_decode/llm_base_proposer.py` L1318-1340): kvplan appends them to the layers;
  * its weights load beside the target's ("Model loading took" covers both: `v1/worker/gpu_model_runner.py`
    load_model L4989-5012); an MTP module shares the target's embedding and LM head, a draft model
    keeps its own (`v1/spec_decode/draft_model.py` L115-122);
  * lookahead slots: the scheduler asks `num_speculative_tokens` more slots per step but never past
    max_model_len (`v1/core/kv_cache_manager.py` L551-552; v0.11.0 L260-262), so a request of the
    planned context needs no extra block; Mamba-style states keep `1 + num_speculative_tokens` pages
    (`v1/kv_cache_interface.py` L1141, `model_executor/layers/mamba/abstract.py` L86);
  * the whole drafter sits on the last pipeline stage (`gpu_model_runner.py` L593-597), and a draft
    model runs with the target's tensor parallelism (`draft_model.py` L63-79).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.model.weights import weight_bytes
from kvplan.planning.deploy import Deployment, validate_deployment
from kvplan.readers.mtp import add_params, why_no_mtp
from kvplan.sources.origin import model_arg

NGRAM_LOOKUP = 5  # vLLM's prompt_lookup_min/max default (config/speculative.py, ngram branch)
METHODS = ("mtp", "draft", "ngram")
MAX_TOKENS = 64


@dataclass(frozen=True)
class SpecRequest:
    """`--speculative` as parsed: the method, the tokens asked (None: the method's default), the draft named."""

    method: str  # "mtp", "draft_model" or "ngram"
    num_speculative_tokens: int | None = None
    draft: str | None = None


@dataclass(frozen=True)
class Speculative:
    """What a served drafter added to the model (ModelSpec.speculative)."""

    method: str
    num_speculative_tokens: int
    draft_model: str | None = None  # the draft model's name as an engine loads it (Hub repo or path)
    draft_name: str | None = None  # its kvplan name
    layers: int = 0  # cache layers appended after the target's
    params: int = 0  # parameters added (an MTP module's own, or the whole draft model)
    weight_bytes: int = 0  # their bytes in the checkpoint's own format

    def config(self) -> dict:
        """vLLM's --speculative-config JSON object for this drafter."""
        out = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.method == "draft_model":
            out["model"] = self.draft_model
        if self.method == "ngram":
            out.update(prompt_lookup_min=NGRAM_LOOKUP, prompt_lookup_max=NGRAM_LOOKUP)
        return out

    def flag(self) -> str:
        """The --speculative spelling of this drafter (a sweep's CSV column)."""
        if self.method == "draft_model":
            return f"draft:{self.draft_name}:{self.num_speculative_tokens}"
        return f"{self.method}:{self.num_speculative_tokens}"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse(text: str | None) -> SpecRequest | None:
    """`mtp`, `mtp:2`, `draft:llama-3.2-1b-instruct:4`, `ngram:3` -> SpecRequest; a one-line error otherwise."""
    if text is None:
        return None
    raw = text.strip()
    head, _, rest = raw.partition(":")
    head = head.strip().lower()
    if head in ("eagle", "eagle3", "medusa", "dflash", "dspark", "suffix"):
        raise _refused(f"{head}: not modelled (kvplan does not read {head} drafter checkpoints, whose layers and "
                       "shared weights vary by head); use mtp[:N], draft:MODEL:N or ngram:N", text)
    if head not in ("mtp", "draft", "draft_model", "ngram"):
        raise _refused(f"expects mtp[:N], draft:MODEL:N or ngram:N, got {text!r}", text)
    if head == "ngram" and not rest.strip():
        raise _refused("ngram:N needs N, the speculative tokens (vLLM requires num_speculative_tokens)", text)
    if head in ("draft", "draft_model"):
        model, _, n = rest.rpartition(":")
        if not model.strip() or not n.strip():
            raise _refused("draft:MODEL:N needs the draft model and N, the speculative tokens (vLLM requires "
                           "num_speculative_tokens with a draft model)", text)
        return SpecRequest("draft_model", _tokens(n), model.strip())
    return SpecRequest(head, _tokens(rest) if rest.strip() else None)


def _refused(problem: str, value=None) -> KvplanError:
    """'--speculative <problem>': the drafter asked for, refused (a usage error blaming `speculative`)."""
    return KvplanError(f"{arg('speculative')} {problem}", EXIT_USAGE, param="speculative", value=value)


def _tokens(text: str) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        raise KvplanError(f"{arg('speculative')}: speculative tokens must be an integer, got {text.strip()!r}",
                          EXIT_USAGE, param="speculative", value=text) from None
    if not 1 <= n <= MAX_TOKENS:
        raise KvplanError(f"{arg('speculative')}: speculative tokens must be between 1 and {MAX_TOKENS}, got {n}",
                          EXIT_USAGE, param="speculative", value=n, allowed=(1, MAX_TOKENS))
    return n


def apply(model, req: SpecRequest | None, resolve=None):
    """`model` as served with the drafter `req` asks for (unchanged for None). `resolve(name)` finds a
    draft model's ModelSpec (kvplan.sources.resolve.resolve_model(...).spec in the CLI)."""
    if req is None:
        return model
    if req.method == "mtp":
        return _with_mtp(model, req)
    if req.method == "ngram":
        info = Speculative("ngram", req.num_speculative_tokens)
        return dataclasses.replace(model, speculative=info)
    draft = resolve(req.draft)
    return _with_draft(model, draft, req)


def _with_mtp(model, req: SpecRequest):
    k = len(model.mtp_layers)
    if not k:
        raise _refused(f"mtp: {model.name} has no multi-token-prediction layers kvplan reads "
                       f"({why_no_mtp(model)})", "mtp")
    n = req.num_speculative_tokens or k  # vLLM: num_speculative_tokens defaults to n_predict
    if n > k and n % k:
        raise _refused(f"mtp:{n}: vLLM requires num_speculative_tokens ({n}) to be divisible by the {k} MTP "
                       "layer(s) when larger (config/speculative.py)", f"mtp:{n}")

    kept = model.quantization.mtp_kept
    if kept:
        raise _refused(f"mtp: {model.name}'s quantization_config keeps part of its MTP module in 16 bits "
                       f"({', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''}); kvplan sizes a drafter in the "
                       "checkpoint's one format and does not guess which of its modules those entries keep", "mtp")
    p = model.mtp_params
    mtp_only = dataclasses.replace(model, params=p, layers=model.mtp_layers, checkpoint_bytes=None,
                                   mtp_layers=(), mtp_params=None, draft=None)
    nbytes = weight_bytes(mtp_only).total  # its embedding and LM head are the target's: 0 here
    info = Speculative("mtp", n, layers=k, params=p.total, weight_bytes=nbytes)
    checkpoint = model.checkpoint_bytes
    if checkpoint is not None:
        checkpoint += nbytes
    return dataclasses.replace(model, layers=(*model.layers, *model.mtp_layers), params=add_params(model.params, p),
                               checkpoint_bytes=checkpoint, speculative=info)


def _with_draft(model, draft, req: SpecRequest):
    if draft.vocab_size != model.vocab_size:
        raise _refused(f"draft:{req.draft}: its vocabulary ({draft.vocab_size:,}) differs from {model.name}'s "
                       f"({model.vocab_size:,}); vLLM refuses that by default (verify_equal_vocab_size_if_draft_model)",
                       f"draft:{req.draft}")
    if draft.draft is not None or draft.speculative is not None:
        raise KvplanError(f"{arg('speculative')}: a draft model cannot itself have a drafter", EXIT_USAGE,
                          param="speculative", value=f"draft:{req.draft}")
    nbytes = draft.checkpoint_bytes or weight_bytes(draft).total
    info = Speculative("draft_model", req.num_speculative_tokens, model_arg(draft), draft.name,
                       layers=draft.num_layers, params=draft.params.total, weight_bytes=nbytes)
    checkpoint = model.checkpoint_bytes
    if checkpoint is not None:
        checkpoint += nbytes
    return dataclasses.replace(model, layers=(*model.layers, *draft.layers), checkpoint_bytes=checkpoint,
                               draft=draft, speculative=info)


def check_deployment(model, dep) -> None:
    """A one-line refusal for a deployment whose drafter placement kvplan does not model."""
    info = model.speculative
    if info is None:
        return
    if dep.pp > 1 and info.layers:
        raise KvplanError(f"{arg('speculative')} with {arg('pp')}: vLLM puts the whole drafter on the last pipeline "
                          "stage, on top of that stage's share of the target's layers, which kvplan's stage cuts do "
                          "not model", EXIT_USAGE, param="pp", value=dep.pp)
    if model.draft is not None:
        why = validate_deployment(model.draft, Deployment(dep.tp, 1))
        if why:
            raise _refused(f"draft: the draft model runs at the target's tp {dep.tp} in vLLM (draft_model.py), and "
                           f"{model.draft.name}: {why}")


def explain_line(model, plan) -> str | None:
    """The drafter's share of the cache and weights, for --explain."""
    info = model.speculative
    if info is None:
        return None
    if info.method == "ngram":
        return (f"Speculative decoding: ngram, {info.num_speculative_tokens} tokens per step: no drafter weights "
                "and no drafter cache")
    prof = plan.stages[-1].profile
    drafter = model.layers[len(model.layers) - info.layers:]
    per_tok = sum(la.token_bytes(prof.kv_dtype, prof.tp) for la in drafter)
    what = "MTP layer(s)" if info.method == "mtp" else f"layers of draft model {info.draft_name}"
    return (f"Speculative decoding ({info.method}, {info.num_speculative_tokens} tokens per step): of the layers "
            f"above, the last {info.layers} are {what}: {per_tok:,} B/token per GPU; weights include its "
            f"{info.params:,} parameters")


def report(model, plan) -> dict | None:
    """The drafter in fit --json: what was asked, its layers by kind, its cache per token and weights."""
    info = model.speculative
    if info is None:
        return None
    copies = plan.deployment.tp
    prof = plan.stages[-1].profile
    drafter = model.layers[len(model.layers) - info.layers:] if info.layers else ()
    kinds: dict = {}
    for layer in drafter:
        row = kinds.setdefault(layer.kind, {"kind": layer.kind, "layers": 0, "kv_bytes_per_token": 0})
        row["layers"] += 1
        row["kv_bytes_per_token"] += copies * layer.token_bytes(prof.kv_dtype, prof.tp)
    return {**info.as_dict(), "config": info.config(),
            "kv_bytes_per_token": sum(r["kv_bytes_per_token"] for r in kinds.values()),
            "layer_kinds": list(kinds.values())}
