"""The KV a disaggregated deployment moves per request: from the prefill pool's ranks to the decode pool's.

A prompt of P tokens leaves, in every layer, the tokens that layer holds (all P; the last `window` of
a sliding window; one fixed state for a recurrent layer) at the cache dtype. Counted once (tp 1) that
is the request's KV. Each decode rank receives what its own cache holds at the decode layout: its
share of the KV heads (`kv_heads_per_rank`: split, or replicated when tp exceeds the KV heads), the
whole latent for MLA (replicated on every rank), its stage's layers only under pp. Each decode rank
pulls its part from the prefill rank that holds those heads (vLLM's NixlConnector with prefill tp !=
decode tp; SGLang's Mooncake/NIXL backends): a head held by several prefill ranks is read once, and
a decode rank that replicates a head receives its own copy. Ranks move in parallel, each through
its own share of the link, so the time is the link's latency plus the larger of the bytes one decode
rank receives and the bytes one prefill rank sends (received in all / prefill ranks), over one GPU's
bandwidth. Sources: vLLM docs/features/nixl_connector_usage.md (heterogeneous TP, MLA), SGLang
docs/advanced_features/pd_disaggregation.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.core.intmath import cdiv
from kvplan.core.dtypes import DType
from kvplan.planning.deploy import Deployment, stage_ranges
from kvplan.planning.profile import kv_profile


@dataclass(frozen=True)
class Moved:
    """One request's KV on its way from prefill to decode, in bytes."""

    prompt: int  # tokens
    kv_bytes: int  # the request's KV counted once (tp 1, every layer)
    per_prefill_rank: int  # what the busiest prefill rank holds of it
    per_decode_rank: int  # what the busiest decode rank receives
    received_bytes: int  # every decode rank's part added up (replicated heads and latents each time)
    sent_per_prefill_rank: int  # received_bytes spread over the prefill ranks that hold them

    @property
    def wire_bytes_per_rank(self) -> int:
        """The bytes that bound one rank's transfer: the larger of receive and send."""
        return max(self.per_decode_rank, self.sent_per_prefill_rank)


def _per_rank(spec, prompt: int, dep: Deployment, kv_dtype: DType, state_dtype: DType) -> list[int]:
    """Bytes one rank of each pipeline stage holds for a `prompt`-token sequence (no paging)."""
    return [kv_profile(spec.layers[a:b], dep.tp, kv_dtype, state_dtype, 1).sequence_bytes(prompt, paged=False)
            for a, b in stage_ranges(spec, dep)]


def kv_moved(spec, prompt: int, kv_dtype: DType, state_dtype: DType, prefill: Deployment,
             decode: Deployment) -> Moved:
    """What a `prompt`-token request moves from one prefill replica (`prefill`: its tp x pp) to one decode
    replica (`decode`), by the rules in the module docstring."""
    once = sum(_per_rank(spec, prompt, Deployment(1, 1), kv_dtype, state_dtype))
    pre = _per_rank(spec, prompt, prefill, kv_dtype, state_dtype)
    dec = _per_rank(spec, prompt, decode, kv_dtype, state_dtype)
    received = sum(b * decode.tp for b in dec)
    return Moved(prompt=prompt, kv_bytes=once, per_prefill_rank=max(pre), per_decode_rank=max(dec),
                 received_bytes=received, sent_per_prefill_rank=cdiv(received, prefill.tp * prefill.pp))


def transfer_seconds(moved: Moved, link) -> float:
    """Seconds the move takes over `link` (a kvplan.hardware.links.Link): ranks in parallel."""
    return link.seconds(moved.wire_bytes_per_rank)
