"""vLLM's bitsandbytes by release: a bitsandbytes checkpoint, or NF4 asked of a 16-bit one, refused where none is.

vLLM registers BitsAndBytesConfig through 0.27.1 (the 0.27.1 wheel's `model_executor/layers/quantization/__init__.py`
L28, L156, and its `bitsandbytes.py`); the 0.28.0 wheel has no `bitsandbytes.py` and no "bitsandbytes" among its
QuantizationMethods, and `config/model.py` `_verify_quantization` raises on a method not listed ("Unknown quantization
method: ...", 0.28.0 L1280-1285): a checkpoint whose `quant_method` is bitsandbytes, and `--quantization bitsandbytes`
(kvplan's `weight_dtype` nf4: kvplan.engines.emit), stop vLLM at start-up from 0.28.0 on.
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version

DROPPED, LAST = "0.28.0", "0.27.1"  # the first release without bitsandbytes, the last with it


def check_release(model, req, version: str, defaulted: bool = False) -> None:
    """A one-line refusal where vLLM `version` has no bitsandbytes and the plan needs it: the checkpoint's own
    `quant_method`, or NF4 weights asked of a 16-bit checkpoint; `defaulted`: `version` is kvplan's default."""
    if parse_version(version) < parse_version(DROPPED):
        return
    if model.quantization.quant_method == "bitsandbytes":
        what = "this bitsandbytes checkpoint"
    elif req.weight_dtype == "nf4":
        what = f"{arg('weight_dtype')} nf4 (its bitsandbytes quantization as it loads)"
    else:
        return
    which = f"{version} (kvplan's default; none was given)" if defaulted else version
    raise KvplanError(f"vLLM {which} registers no bitsandbytes quantization method (dropped in {DROPPED}: \"Unknown "
                      f"quantization method\" at start-up), so it cannot run {what}; {arg('engine_version')} {LAST} or "
                      "earlier does", EXIT_USAGE, param="engine_version", value=version, allowed=(f"<= {LAST}",))
