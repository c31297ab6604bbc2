"""Why a TensorFlow op made NaN/Inf, and the fix, in the words of the hazard catalogue.

The rules live once in `nanguard.core.why`; this adapter names TensorFlow's op types as the
rules do (``RealDiv`` is ``div``, `canonical`), and `TfProbe` answers their questions from
what the detector kept: exact summaries of the op's tensors, the op that produced its first
input, the zeros on a square input's diagonal and the inputs of exp above its limit (eager
only). The suggestion is the hazard's fix worded for TensorFlow (``fix_text("tf")``), the
same texts ``nanguard lint`` prints.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from nanguard.core import why
from nanguard.core.hazards import HAZARDS
from nanguard.core.summary import TensorSummary
from nanguard.core.why import Probe, Said

# TensorFlow's op types whose canonical name is not their snake_case spelling
_CANONICAL: Dict[str, str] = {
    "RealDiv": "div", "DivNoNan": "div", "FloorDiv": "div", "Xdivy": "div", "Inv": "reciprocal", "AddV2": "add",
    "Exp2": "exp2"}
# the ops that make a mean's denominator: a count (a sum of ones, a cast size, a clamp of one)
_COUNTERS = ("Sum", "Cast", "Count", "Size", "Maximum")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def canonical(op_type: str) -> str:
    """The rules' name of a TensorFlow op type: ``Sqrt`` -> ``sqrt``, ``RealDiv`` -> ``div``,
    ``LogSoftmax`` -> ``log_softmax``."""
    return _CANONICAL.get(op_type) or _CAMEL.sub("_", op_type).lower()


def mixed_precision() -> bool:
    """Whether the program runs under a Keras mixed precision policy (``mixed_float16``,
    ``mixed_bfloat16``): then "use mixed precision" is no remedy for a float16 overflow."""
    keras = sys.modules.get("keras")
    try:
        return keras is not None and keras.mixed_precision.global_policy().name.startswith("mixed_")
    except Exception:  # noqa: BLE001  (another Keras layout: worded as for a plain float16 program)
        return False


@dataclass
class Evidence:
    """What a rule may read: the op, its phase, the summaries and the producer of its first input."""

    op: str                      # the forward op type (for a backward finding, the op differentiated)
    phase: str                   # "forward" or "backward"
    kind: str                    # "nan" or "inf"
    inputs: List[TensorSummary]  # the forward op's inputs
    outputs: List[TensorSummary] = field(default_factory=list)
    producer: Optional[str] = None   # the op type that made the first input (``Softmax`` before a Log)
    diagonal_zeros: Optional[int] = None  # zeros on the diagonal of a square first input (eager only)
    over: Optional[int] = None       # inputs of exp above its overflow limit (eager only)
    mixed: bool = field(default_factory=mixed_precision)  # under a Keras mixed precision policy


def _square(s: TensorSummary) -> bool:
    return len(s.shape) >= 2 and s.shape[-1] == s.shape[-2] and s.shape[-1] > 1


class TfProbe(Probe):
    """The answers of `Probe` from the summaries, the producer's op type and the eager counts."""

    def __init__(self, ev: Evidence) -> None:
        self._ev = ev

    def root(self) -> Tuple[str, Dict[str, Any]]:
        ev = self._ev
        x = ev.inputs[0] if ev.inputs else None
        if x is None:
            return "", {}
        if ev.phase != "backward":
            return ("distance_matrix", {"diagonal": ev.diagonal_zeros or 0}) if _square(x) else ("", {})
        if ev.diagonal_zeros:
            return "distance_matrix", {"diagonal": ev.diagonal_zeros}
        # graph values: the diagonal is not counted, many zeros on a square matrix stand for it
        if ev.diagonal_zeros is None and _square(x) and (not x.counted or x.zeros >= x.shape[-1] // 2):
            return "distance_matrix", {}
        return ("norm_zero", {}) if ev.producer in ("Sum", "SquaredDifference") else ("", {})

    def log_source(self) -> str:
        return {"Softmax": "log_softmax", "Sigmoid": "log_sigmoid"}.get(self._ev.producer or "", "log_zero")

    def above(self, limit: float) -> Optional[int]:
        return self._ev.over

    def empty_groups(self) -> bool:
        ev = self._ev
        if len(ev.inputs) < 2 or (ev.inputs[0].counted and not ev.inputs[0].zeros):
            return False
        return ev.producer in _COUNTERS or ev.inputs[-1].dtype.startswith("int")


def _exponent(ev: Evidence) -> Optional[float]:
    """A pow's exponent when it is one number (its summary's min and max agree)."""
    if ev.op != "Pow" or len(ev.inputs) < 2 or ev.inputs[1].min != ev.inputs[1].max:
        return None
    return ev.inputs[1].max


def _facts(ev: Evidence, counted: bool) -> why.Facts:
    return why.Facts(phase=ev.phase, kind=ev.kind, names=(canonical(ev.op),), framework="tf", inputs=ev.inputs,
                     forward_inputs=ev.inputs if ev.phase == "backward" else [], outputs=ev.outputs,
                     exponent=_exponent(ev), mixed=ev.mixed, counted=counted, probe=TfProbe(ev),
                     fn=ev.op, node=f"{ev.op} gradient", op_name=ev.op)


def diagnose(ev: Evidence, counted: bool = True) -> Said:
    """The hazard behind a finding, with its facts; ``unexplained`` when no rule applies.
    ``counted=False``: the values were not read, the op's type and producer decide."""
    return why.diagnose(_facts(ev, counted))


def words(said: Said) -> Tuple[str, str]:
    """(explanation, suggestion) in the catalogue's words, the fix worded for TensorFlow."""
    return why.words(said, "tf")


def explain(ev: Evidence, counted: bool = True) -> Tuple[str, str]:
    return words(diagnose(ev, counted))


def update_words(name: str, optimizer: Any, kind: str) -> Tuple[str, str]:
    """The words of an optimizer update that made a variable non-finite (its hyperparameters quoted)."""
    settings = {}
    for attr, label in (("learning_rate", "learning_rate"), ("epsilon", "epsilon"), ("weight_decay", "weight_decay")):
        value = getattr(optimizer, attr, None)
        try:
            settings[label] = float(value)
        except (TypeError, ValueError):
            continue  # absent, or a schedule
    said = Said("optimizer_step", "forward", {"optimizer": name, "what": "NaN" if kind == "nan" else "Inf",
                                              "hp": ", ".join(f"{k}={v:g}" for k, v in settings.items())})
    why_text, fix = words(said)
    if settings.get("epsilon") == 0:
        why_text = f"{why_text}; {HAZARDS['optimizer_step'].evidence_text('eps0')}"
    return why_text, fix


def input_words(name: str, nan: int, numel: int, data: bool = False) -> Tuple[str, str]:
    """The words of a NaN that was already in the data when an op consumed it (``data``: in the
    batch a tf.data iterator returned)."""
    return words(Said("nan_input", "data" if data else "forward", {"name": name, "nan": nan, "numel": numel}))


__all__ = ["Evidence", "Said", "TfProbe", "canonical", "diagnose", "explain", "input_words", "mixed_precision",
           "update_words", "words"]
