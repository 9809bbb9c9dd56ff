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

The graph and compile modes the log states (kvplan.engines.logparse_graphs: the engine config's cudagraph_mode, or a
later "setting cudagraph_mode=X" downgrade) decide which groups there are, as vLLM's dispatcher keys them
(`v1/cudagraph_dispatcher.py` initialize_cudagraph_keys, 0.21.0 L165-230): NONE, no graphs (vLLM's estimate is 0);
PIECEWISE, PIECEWISE graphs at every capture size; FULL (one routine), FULL graphs at every capture size;
FULL_DECODE_ONLY, FULL decode graphs at the sizes up to max_num_seqs; FULL_AND_PIECEWISE (the default) both. A mode
that needs piecewise compilation under a compilation mode other than VLLM_COMPILE (3) is NONE (config/vllm.py 0.21.0
L1020-1030). Where the log prints its shape, the shape is what vLLM profiled and wins; the note says which mode it
read either way, and kvplan's rule where the log states no mode (FULL_AND_PIECEWISE).
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


VLLM_COMPILE = 3  # CompilationMode.VLLM_COMPILE (config/compilation.py 0.21.0 L41-48): the one piecewise graphs need
_COMPILE_NAMES = {0: "NONE", 1: "STOCK_TORCH_COMPILE", 2: "DYNAMO_TRACE_ONCE", VLLM_COMPILE: "VLLM_COMPILE"}
NO_GRAPHS = (("NONE", 0, 0),)  # the shape of a run with no CUDA graphs: cudagraph_estimate prices it at 0


def logged_mode(rec) -> str | None:
    """The cudagraph_mode the log states (None where it states none), NONE where it needs piecewise compilation that
    the stated compilation mode does not give (config/vllm.py 0.21.0 L1020-1030)."""
    mode = rec.cudagraph_mode
    if mode and "PIECEWISE" in mode and rec.compilation_mode not in (None, VLLM_COMPILE):
        return "NONE"
    return mode


def planned_shape(rec, model, max_num_seqs: int, tokens: int | None = None, v: tuple = (0, 21, 0),
                  gpu=None) -> tuple:
    """The shape check-log's plan prices: the logged one; else the groups the logged cudagraph_mode keys
    (mode_shape) at the engine config's capture sizes or kvplan's (no drafter stated: its FULL sizes count query
    tokens); else, from the engine config's sizes, PIECEWISE at every size and FULL at those up to max_num_seqs
    (cudagraph_dispatcher.py 0.21.0 L204-230) where the model takes FULL graphs; else () (kvplan's own counts)."""
    mode = logged_mode(rec)
    if rec.graph_shape or mode == "NONE":
        return rec.graph_shape or NO_GRAPHS
    if rec.settings.get("speculative") or not (rec.capture_sizes or mode):
        return rec.graph_shape
    sizes = list(rec.capture_sizes) or cudagraph_counts(model, max_num_seqs, tokens, v, gpu)[0]
    return mode_shape(mode or "FULL_AND_PIECEWISE", sizes, full_sizes(model, sizes, max_num_seqs))


def mode_shape(mode: str, sizes: list, decode: list) -> tuple:
    """The ((mode, graphs, largest), ...) groups a cudagraph_mode captures (cudagraph_dispatcher.py 0.21.0 L188-230):
    the mixed routine at every capture size (PIECEWISE, or FULL in FULL mode), and a separate routine's FULL decode
    graphs at `decode` (the sizes up to max_num_seqs, none where the model takes no FULL graph)."""
    piecewise = sizes if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") else []
    full = sizes if mode == "FULL" else decode if mode in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE") else []
    return _shape(piecewise, full)


def _shape(piecewise, full) -> tuple:
    """The ((mode, graphs, largest), ...) shape of ascending PIECEWISE and FULL sizes (no group for a mode without
    sizes; NO_GRAPHS for neither)."""
    groups = tuple((mode, len(xs), xs[-1]) for mode, xs in (("PIECEWISE", piecewise), ("FULL", full)) if xs)
    return groups or NO_GRAPHS


def graph_note(rec, model, st) -> str | None:
    """Where the plan's CUDA-graph counts came from: the log's shape, its graph mode and capture sizes (each the log's
    or kvplan's default), or kvplan's counts at max_num_seqs; the mode the log states, said either way."""
    mode, said = logged_mode(rec), _mode_said(rec)
    if rec.graph_shape:
        note = f"CUDA-graph capture shape from the log: {shape_text(rec.graph_shape)}; kvplan's estimate counts these"
        if any(m == "ENCODER" for m, _, _ in rec.graph_shape):
            note += " (its ENCODER graphs, in vLLM's printed total, are not priced by kvplan)"
        return note + (f"; {said}" if said else "")
    if not st.cudagraphs and "cudagraph_estimate_gib" not in rec.reported:
        return None  # the release subtracts none and the log prints none (or enforce_eager, said apart)
    if mode == "NONE":
        return f"{said}: vLLM captures no CUDA graphs, estimate 0"
    if st.graph_shape:
        sizes = (f"capture sizes from the log's engine config ({len(rec.capture_sizes)}, largest "
                 f"{rec.capture_sizes[-1]})" if rec.capture_sizes else
                 "capture sizes: vLLM's default list (the log prints none)")
        how = said or "FULL_AND_PIECEWISE assumed (vLLM's default; the log states no cudagraph_mode)"
        decode = (f", FULL decode graphs up to max_num_seqs {st.max_num_seqs} (kvplan's rule)"
                  if mode in (None, "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE") else "")
        note = f"CUDA-graph {sizes}, {how}{decode}: {shape_text(st.graph_shape)}"
        if not any(m == "PIECEWISE" for m, _, _ in st.graph_shape):
            note += ("; with no PIECEWISE capture first, the first FULL capture is priced by kvplan's "
                     "FULL_AND_PIECEWISE rule (the larger first capture), an extrapolation")
        return note
    shape = _shape(*cudagraph_counts(model, st.max_num_seqs, st.max_num_batched_tokens, st.v, st.gpu,
                                           st.max_capture))
    return (f"the log does not print its CUDA-graph capture shape: kvplan's counts at max_num_seqs "
            f"{st.max_num_seqs}, {shape_text(shape)}")


def _mode_said(rec) -> str:
    """The sentence naming the cudagraph_mode the log states and where, with its compilation mode; "" if none."""
    if not rec.cudagraph_mode:
        return ""
    said = f"cudagraph_mode {rec.cudagraph_mode} (from {rec.cudagraph_mode_from}"
    if rec.compilation_mode is not None:
        said += f"; compilation mode {rec.compilation_mode}, {_COMPILE_NAMES.get(rec.compilation_mode, '?')}"
    if logged_mode(rec) != rec.cudagraph_mode:
        said += ", not VLLM_COMPILE, so vLLM overrides it to NONE"
    return said + ")"
