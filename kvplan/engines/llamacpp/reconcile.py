"""A llama.cpp start-up log against kvplan's llama.cpp arithmetic: the KV buffer from the layers
the log prints (or the model's), by cache type (kvplan.engines.logcheck holds the rows)."""

from __future__ import annotations

from kvplan.core.dtypes import canonical_kv_dtype
from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.llamacpp import engine as llamacpp
from kvplan.engines.logcheck import MIB, WHATIF_CONTEXTS, Reconciliation, Row, rel
from kvplan.model.layers import FullAttention


def reconcile_llamacpp(rec, model, gpu, version, kv_name, tp):
    s, r = rec.settings, rec.reported
    if rec.layers:
        layers = tuple(FullAttention(1, k, v if v != k else 0) for k, v in rec.layers)
        where = f"{len(layers)} layers of K {rec.layers[0][0]} / V {rec.layers[0][1]} values (from the log)"
        if s.get("n_layer") and s["n_layer"] != len(layers):
            where += f"; the log also says n_layer = {s['n_layer']}"
    elif model is not None:
        layers, where = model.layers, model.name
    elif s.get("n_layer") and (s.get("n_embd_k_gqa") or s.get("n_embd")):
        k = s.get("n_embd_k_gqa") or s["n_embd"]
        v = s.get("n_embd_v_gqa") or k
        layers = tuple(FullAttention(1, k, v if v != k else 0) for _ in range(s["n_layer"]))
        where = f"{s['n_layer']} layers x {k} values per K row (from the log's n_layer / n_embd)"
    else:
        raise KvplanError(f"the log shows no per-layer geometry; pass {arg('model')}", EXIT_USAGE, param="model")
    cells = r.get("cells")
    n_stream = s.get("n_stream", 1)
    n_ctx = int(cells.value) * n_stream if cells else (s.get("kv_size") or s.get("n_ctx_slot") or s.get("n_ctx"))
    if not n_ctx:
        raise KvplanError("the log shows no n_ctx / kv_size", EXIT_USAGE)
    # The log prints n_ctx after padding; the 2023 "kv self size = X MB" line is the 2023-04 era's.
    ver = version or {"2025": "current", "2023": "2023-04"}.get(rec.era, "2024-03")

    def layout_for(type_k: str, type_v: str):
        st = llamacpp.Settings(ver, 512, True, n_stream == 1, rec.era != "2025",
                               canonical_kv_dtype(type_k), canonical_kv_dtype(type_v))
        return st, llamacpp.layout(layers, n_ctx, max(1, n_stream), st)

    note = None
    if kv_name or s.get("type_k"):
        st, lay = layout_for(kv_name or s["type_k"], kv_name or s.get("type_v") or s["type_k"])
    else:
        # Not printed: f16 is llama.cpp's default, but llama-cpp-python before 0.1.4x defaulted to
        # f16_kv=False, an f32 cache. Take the one whose size the log reports, and say so.
        st, lay = layout_for("f16", "f16")
        note = f"the log does not print the cache type; f16 assumed (llama.cpp's default), see {arg('kv_dtype')}"
        reported = r.get("kv_self_mib")
        if reported is not None and f"{lay.total / MIB:.{reported.decimals}f}" != reported.text:
            st32, lay32 = layout_for("f32", "f32")
            if f"{lay32.total / MIB:.{reported.decimals}f}" == reported.text:
                st, lay = st32, lay32
                note = ("the log does not print the cache type; its size is an f32 cache's (llama-cpp-python "
                        f"0.1.x defaulted to f16_kv=False), so f32 is used; see {arg('kv_dtype')}")
    tk, tv = st.type_k, st.type_v
    out = Reconciliation("llama.cpp", ver, where, gpu.key if gpu else None)
    if note:
        out.notes.append(note)
    for key, label, pred in (("k_mib", f"K ({tk.name})", lay.k_bytes), ("v_mib", f"V ({tv.name})", lay.v_bytes),
                             ("kv_self_mib", "KV self size", lay.k_bytes + lay.v_bytes)):
        if key in r:
            rep = r[key]
            txt = f"{pred / MIB:.{rep.decimals}f}"
            d, e = rel(pred / MIB, rep.value)
            out.rows.append(Row(f"{label} for {n_ctx:,} cells", f"{rep.text} MiB", f"{txt} MiB",
                                "exact" if txt == rep.text else d, txt == rep.text, e))
    per_layer = lay.layer_bytes
    bufs = {k: v for k, v in r.items() if k.startswith("kv_buffer_")}
    if bufs and per_layer and len(set(per_layer)) == 1:
        for k, v in bufs.items():
            n = v.value * MIB / per_layer[0]
            out.whatif.append((f"{k[10:-4]} KV buffer", f"{v.text} MiB = {n:g} layers of {per_layer[0] / MIB:g} MiB"))
    for c in WHATIF_CONTEXTS:
        for t in ("fp16", "q8_0", "q4_0"):
            dt = canonical_kv_dtype(t)
            lay2 = llamacpp.layout(layers, c, 1, llamacpp.Settings("current", 512, True, True, False, dt, dt))
            out.whatif.append((f"-c {c:,} -ctk/-ctv {t.replace('fp16', 'f16')}", f"{lay2.total / MIB:,.2f} MiB"))
    return out
