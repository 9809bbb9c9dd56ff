"""The recurrent-state dtype a corpus run states, and the model as that run holds its states.

SGLang's --mamba-ssm-dtype is the element type of the recurrent-state pool (kvplan.engines.sglang.mamba), which its
decode kernel loads and stores back once a step in that type
(sgl-project/sglang@f1dea624c8f596e1a789784fce46f6f3b77c0be4:
python/sglang/srt/layers/attention/fla/fused_sigmoid_gating_recurrent.py L75-85 `tl.load(p_h0 ...)`, L145-156
`tl.store(p_h0, b_h.to(p_h0.dtype.element_ty))`): a run that states bfloat16 moves half the bytes of float32, so
the speed fit prices its states in the stated type, not the config's; and a plan's speed figures (kvplan.speed.plan)
price them in the type its engine's pool holds them in (`Request.ssm_dtype`).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.model.recurrent import ssm_as

SSM_DTYPE = "mamba_ssm_dtype"  # the run's flag, as the corpus spells SGLang's --mamba-ssm-dtype


def stated_ssm_dtype(flags: dict | None) -> str:
    """The recurrent-state dtype a run's flags state (SSM_DTYPE), "" where they state none."""
    return str((flags or {}).get(SSM_DTYPE) or "")


def as_stated(spec, flags: dict | None):
    """The model with its recurrent states in the dtype a corpus run's flags state; the spec itself where they
    state none."""
    return in_dtype(spec, stated_ssm_dtype(flags))


def in_dtype(spec, dtype: str):
    """The model with its recurrent states in `dtype` ("": the spec itself): a corpus run's stated dtype, or a
    plan's `Request.ssm_dtype` or a corpus run's engine's (kvplan.bench.running `case_ssm_dtype`), the one its
    engine pools them in (SGLang's request step: mamba_ssm_dtype, else its release's default), so the speed figures
    read the bytes its pool holds."""
    return replace(spec, layers=ssm_as(spec.layers, dtype)) if dtype else spec
