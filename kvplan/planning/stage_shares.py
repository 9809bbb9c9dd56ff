"""Each pipeline stage's share of the split weights by role, priced from its own layers (issue 22).

vLLM and SGLang cut the decoder into contiguous runs of layers by count (kvplan.planning.deploy.split_layers:
vLLM `get_pp_indices`, vllm/distributed/utils.py; SGLang's of the same name in sglang/srt/distributed/utils.py),
and each stage builds only its own layers (vLLM `make_layers`: PPMissingLayer for the others; the embedding on the
first rank, the LM head on the last, kvplan.planning.layout.rank_weights). A hybrid's layers differ in size:
Nemotron-H-56B's Mamba-2 mixer is 438,304,768 parameters, an attention layer's 150,994,944, an MLP block's
536,870,912 and the MLP block has no mixer, so a stage's weights are its own layers' tensors, not its share of the
layer count. Mixer parameters: an attention layer's q / k / v / o from its heads (q twice as wide where it also
gives an output gate: kvplan.readers.block_scales.mixer_params, the tensors its block scales are counted over), the
rest of the model's mixer count spread evenly over its recurrent layers where they are all alike; MLP and MoE blocks
placed by kvplan.readers.mlp_layout.ffn_kinds. Where the layers do not add up to the model's counts (a family whose
shapes kvplan does not read apart), the shares are the layer count's.
"""

from __future__ import annotations

from kvplan.model.layers import Kind
from kvplan.readers.block_scales import mixer_params
from kvplan.readers.mlp_layout import ffn_kinds


def layer_mixers(model) -> list[int] | None:
    """Each layer's mixer (attention or recurrent) linear parameters, or None where they do not add up to the
    model's attention count (the layer count's shares then stand)."""
    out, recurrent = [], []
    for layer in model.layers:
        if layer.kind == Kind.NONE:
            out.append(0)
        elif layer.kind == Kind.STATE:
            out.append(0)
            recurrent.append(layer)
        elif layer.kind in (Kind.FULL, Kind.SLIDING, Kind.CHUNKED) and getattr(layer, "head_dim", 0):
            n = mixer_params(model, layer)  # q / k / v / o from its heads, as the block-scale reader sums them
            if n is None:
                return None
            out.append(n)
        else:
            return None
    left = model.params.attention - sum(out)
    if not recurrent:
        return out if left == 0 else None
    if left <= 0 or left % len(recurrent) or len(set(recurrent)) != 1:
        return None
    each = left // len(recurrent)
    return [each if layer.kind == Kind.STATE else x for layer, x in zip(model.layers, out)]


def stage_mixes(model, ranges: list[tuple[int, int]]) -> list[tuple[float, float, float] | None]:
    """Per stage of `ranges` (kvplan.planning.deploy.stage_ranges: the deployment's pipeline stages, a user's layers
    per stage included) its share of the mixers, of the dense-MLP layers, of the MoE layers, each counted from its own
    layers wherever the reader places them: a model whose layers are all alike gets the layer count's shares here
    too (Llama-3.1-8B at pp 4: (0.25, 0.25, 0.0) a stage). A mixer share is the layer count's where the mixers are
    alike or not read (layer_mixers), an MLP / MoE share where ffn_kinds does not place the blocks; None for every
    stage where neither is read, and [None] for one stage (kvplan.planning.layout.rank_weights: the count's)."""
    if len(ranges) == 1:
        return [None]
    p = model.params
    kinds = ffn_kinds(model, model.num_layers)
    if kinds.count("moe") != p.num_moe_layers:
        kinds = []  # a layout the reader does not place
    mixers = layer_mixers(model)
    if mixers is not None and len(set(mixers)) == 1:
        mixers = None  # every mixer alike: the count's share
    if not kinds and mixers is None:
        return [None] * len(ranges)
    dense, moe, total = kinds.count("dense"), kinds.count("moe"), sum(mixers or ())
    out = []
    for a, b in ranges:
        frac = (b - a) / model.num_layers
        f_mix = sum(mixers[a:b]) / total if mixers and total else frac
        f_dense = (kinds[a:b].count("dense") / dense if dense else 0.0) if kinds else frac
        f_moe = (kinds[a:b].count("moe") / moe if moe else 0.0) if kinds else frac
        out.append((f_mix, f_dense, f_moe))
    return out
