"""SGLang's quantization methods by release: a checkpoint whose `quant_method` the release does not register is refused.

SGLang resolves a checkpoint's `quant_method` against its QUANTIZATION_METHODS and raises on any other ("Unknown
quantization method: ...", `configs/model_config.py` ModelConfig._verify_quantization, 0.5.16 wheel L1466-1471).
fbgemm_fp8 (Meta's Llama-3.1-405B-Instruct-FP8) is registered with SGLang's own FBGEMMFp8Config through 0.5.15
(`layers/quantization/__init__.py`: 0.5.3 wheel L51, L88; 0.5.15 L95) and before that taken from vLLM (0.4.9 L23, L93,
VLLM_QUANTIZATION_METHODS); none of the 0.5.16-0.5.23 wheels has fbgemm anywhere under `srt/`, so a release from
0.5.16 on cannot load such a checkpoint.

SGLang reads an fp8 or fbgemm_fp8 checkpoint's exclusion list by rules of its own (kvplan.readers.exclusion_rules: its
key, and its entries at dotted-path boundaries from 0.5.11, as substrings in 0.5.10), and a ModelOpt checkpoint's too
(kvplan.readers.modelopt_sglang: its key by algorithm, is_layer_excluded's glob over dotted words, from 0.5.10; before
that vLLM's reading, said): the reader keeps the readings (`Quantization.readings`) and `as_read` gives the model the
one its release makes.
"""

from __future__ import annotations

import dataclasses

from kvplan.core.errors import EXIT_USAGE, KvplanError, arg
from kvplan.engines.versions import parse_version
from kvplan.readers.modelopt_sglang import UNREAD
from kvplan.readers.quantization import is_w4a8

DROPPED = {"fbgemm_fp8": "0.5.16"}  # quant_method -> the first release without it
LAST = {"fbgemm_fp8": "0.5.15"}  # the last release that loads it
# the first release whose is_layer_skipped matches at dotted-path boundaries (_module_path_match: in the 0.5.11 wheel's
# srt/layers/quantization/utils.py L46-57, not in 0.5.10's or 0.5.10.post1's, which test `ignored in prefix` L68, L80)
DOTTED_FROM = "0.5.11"


# the first release whose ModelOpt configs read is_layer_excluded's glob over dotted words (kvplan.readers.
# modelopt_sglang; 0.5.8.post1's wheel matches otherwise, 0.5.10's as 0.5.23's)
MODELOPT_FROM = "0.5.10"


def reading(version: str, quant_method: str = "") -> str:
    """The rule SGLang `version` reads an exclusion list by: fp8 / fbgemm_fp8 (kvplan.readers.exclusion_rules) and
    ModelOpt's from 0.5.10 (kvplan.readers.modelopt_sglang) at dotted-path boundaries or as substrings; ModelOpt's
    before 0.5.10 by rules not read (modelopt_sglang.UNREAD)."""
    v = parse_version(version)
    if quant_method == "modelopt" and v < parse_version(MODELOPT_FROM):
        return UNREAD
    return "dotted" if v >= parse_version(DOTTED_FROM) else "substring"


def as_read(model, version: str):
    """`model` with its checkpoint as SGLang `version` reads its exclusion list: what it keeps in 16 bits, and a
    one-line refusal where kvplan cannot plan that reading; `model` itself where SGLang reads it as the reader did."""
    q = model.quantization
    return dataclasses.replace(model, quantization=q.read_by(reading(version, q.quant_method))) if q.readings else model


def restated(model, version: str, notices) -> tuple[str, ...]:
    """`notices` with the reader's notes on the exclusion list (vLLM's reading) replaced by SGLang's reading's (none
    where the reader left this release's reading out: it keeps what the reader kept and has nothing to say)."""
    q = model.quantization
    if not q.readings:
        return tuple(notices)
    theirs = dict(q.readings).get(reading(version, q.quant_method))
    mine = () if theirs is None or isinstance(theirs, str) else theirs.notes
    return (*(n for n in notices if n not in q.notes), *mine)


def check_release(model, version: str, defaulted: bool = False) -> None:
    """A one-line refusal where `model`'s checkpoint names a quant_method SGLang `version` does not register;
    `defaulted`: no release was asked, `version` is kvplan's default, and the line says which release to pass; a
    compressed-tensors W4A8 checkpoint, which no SGLang linear scheme takes."""
    method = model.quantization.quant_method
    if is_w4a8(model.quantization):
        # W4A8: SGLang's linear schemes take int4 weights without input activations only (WNA16); a pack-quantized
        # scheme with them reaches "No compressed-tensors compatible scheme was found." (0.5.23 compressed_tensors.py
        # _get_scheme_from_parts L733-862; its W4A8 classes are MoE methods); other releases not read
        raise KvplanError(f"SGLang {version} has no linear scheme for int4 weights with quantized activations (W4A8): "
                          "\"No compressed-tensors compatible scheme was found\" (read in 0.5.23)", EXIT_USAGE)
    if method not in DROPPED or parse_version(version) < parse_version(DROPPED[method]):
        return
    which = f"{version} (kvplan's default; none was given)" if defaulted else version
    raise KvplanError(f"SGLang {which} registers no {method} quantization method (dropped in {DROPPED[method]}) and "
                      f"refuses this checkpoint at start-up (\"Unknown quantization method\"); {arg('engine_version')} "
                      f"{LAST[method]} or earlier loads it", EXIT_USAGE, param="engine_version", value=version,
                      allowed=(f"<= {LAST[method]}",))
