"""The CUDA-graph settings a vLLM start-up log states, as check-log's plan takes them, each said in a note.

vLLM prints the graphs it profiles ("Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)",
kvplan.engines.logparse reads it into `LogRecord.graph_shape`), so check-log prices its graph estimate at those counts
rather than at the counts kvplan derives from an assumed max_num_seqs. Where the log leaves max_num_seqs out, its
FULL graphs bound it: vLLM captures FULL decode graphs at the capture sizes up to max_num_seqs (x the decode query
length; `v1/cudagraph_dispatcher.py` initialize_cudagraph_keys, 0.21.0 L204-230), so with vLLM's default size list
and no drafter the largest FULL graph L puts max_num_seqs in [L, the next size - 1]. A default outside that range is
replaced by its lowest value, and the note says so. A log without that line but with the engine-config line's
resolved `cudagraph_capture_sizes` has its PIECEWISE graphs stated; its FULL graphs are kvplan's rule on that list
(the sizes up to max_num_seqs).
"""

from __future__ import annotations

from kvplan.engines.vllm.cudagraphs import capture_sizes, cudagraph_counts, full_sizes


def shape_text(shape) -> str:
    """The shape as vLLM prints it: "PIECEWISE=51 (largest=512), FULL=35 (largest=256)"."""
    return ", ".join(f"{mode}={n} (largest={top})" for mode, n, top in shape)


def seqs_bound(shape, speculative: bool) -> tuple[int, int] | None:
    """(lowest, highest) max_num_seqs the logged shape allows, or None where it does not bound it: a drafter (FULL
    sizes count query tokens, 1 + k a request), no FULL or no PIECEWISE graphs, FULL graphs up to the largest
    capture (max_num_seqs at or above it), or counts that are not vLLM's default size list (a user's
    cudagraph_capture_sizes, LoRA's per-adapter graphs)."""
    by_mode = {mode: (n, top) for mode, n, top in shape}
    if speculative or "FULL" not in by_mode or "PIECEWISE" not in by_mode:
        return None
    (n_pw, pw_top), (n_full, full_top) = by_mode["PIECEWISE"], by_mode["FULL"]
    sizes = capture_sizes(pw_top)
    if full_top >= pw_top or not sizes or sizes[-1] != pw_top or len(sizes) != n_pw:
        return None
    below = [x for x in sizes if x <= full_top]
    if not below or below[-1] != full_top or len(below) != n_full:
        return None
    return full_top, sizes[len(below)] - 1


def seqs_from_shape(rec, default: int) -> tuple[int | None, str | None]:
    """(the max_num_seqs to plan with where the assumed default contradicts the logged shape, else None; the note on
    max_num_seqs), for a log that does not state max_num_seqs."""
    if "max_num_seqs" in rec.settings:
        return None, f"max_num_seqs {rec.settings['max_num_seqs']} (from the log)"
    bound = seqs_bound(rec.graph_shape, bool(rec.settings.get("speculative")))
    if bound is None:
        return None, f"max_num_seqs {default} assumed (the release's default for the GPU; the log does not state it)"
    lo, hi = bound
    said = (f"the log's FULL graphs stop at {lo} tokens, so max_num_seqs was {lo}..{hi} (FULL decode graphs cover "
            "the capture sizes up to max_num_seqs)")
    if lo <= default <= hi:
        return None, f"max_num_seqs {default} assumed (the release's default for the GPU): {said}"
    return lo, f"max_num_seqs {lo} inferred, the lowest the log allows: {said}, not the assumed default {default}"


def planned_shape(rec, model, max_num_seqs: int) -> tuple:
    """The shape check-log's plan prices: the logged one; else, from the engine config's capture sizes (no drafter
    stated: its FULL sizes count query tokens), PIECEWISE at every size and FULL at those up to max_num_seqs
    (cudagraph_dispatcher.py 0.21.0 L204-230) where the model takes FULL graphs; else () (kvplan's own counts)."""
    if rec.graph_shape or not rec.capture_sizes or rec.settings.get("speculative"):
        return rec.graph_shape
    return _shape(rec.capture_sizes, full_sizes(model, rec.capture_sizes, max_num_seqs))


def _shape(piecewise, full) -> tuple:
    """The ((mode, graphs, largest), ...) shape of ascending PIECEWISE and FULL sizes (no FULL group if none)."""
    return (("PIECEWISE", len(piecewise), piecewise[-1]),) + ((("FULL", len(full), full[-1]),) if full else ())


def graph_note(rec, model, st) -> str | None:
    """Where the plan's CUDA-graph counts came from: the log's shape, the engine config's sizes, or kvplan's counts
    at max_num_seqs."""
    if st.graph_shape and not rec.graph_shape:
        return (f"CUDA-graph capture sizes from the log's engine config ({len(rec.capture_sizes)}, largest "
                f"{rec.capture_sizes[-1]}), FULL graphs up to max_num_seqs {st.max_num_seqs} (kvplan's rule): "
                f"{shape_text(st.graph_shape)}")
    if rec.graph_shape:
        note = f"CUDA-graph capture shape from the log: {shape_text(rec.graph_shape)}; kvplan's estimate counts these"
        if any(mode == "ENCODER" for mode, _, _ in rec.graph_shape):
            note += " (its ENCODER graphs, in vLLM's printed total, are not priced by kvplan)"
        return note
    if not st.cudagraphs and "cudagraph_estimate_gib" not in rec.reported:
        return None
    shape = _shape(*cudagraph_counts(model, st.max_num_seqs))
    return (f"the log does not print its CUDA-graph capture shape: kvplan's counts at max_num_seqs "
            f"{st.max_num_seqs}, {shape_text(shape)}")
