"""Why a TensorFlow op made NaN/Inf, and the fix, in the words of the hazard catalogue.

A rule keyed by the *forward* op's type (``Sqrt``, ``Log``, ``RealDiv``...) reads the evidence,
exact summaries of the op's tensors and the op that produced its first input, and names a
hazard of `nanguard.core.hazards` with the counts that prove it. The explanation is those
facts followed by the hazard's why; the suggestion is the hazard's fix worded for TensorFlow
(``fix_text("tf")``), the same texts ``nanguard lint`` prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from nanguard.core.dtypes import exp_limit, limits
from nanguard.core.hazards import HAZARDS, explanation, suggestion
from nanguard.core.summary import TensorSummary, format_number



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


@dataclass(frozen=True)
class Said:
    key: str
    evidence: str = ""
    fields: Dict[str, Any] = field(default_factory=dict)


Rule = Callable[[Evidence], Optional[Said]]
RULES: Dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn
    return register


def _first(ev: Evidence) -> Optional[TensorSummary]:
    return ev.inputs[0] if ev.inputs else None


def _counts(s: TensorSummary) -> Dict[str, Any]:
    return {"zeros": s.zeros, "numel": s.numel, "negative": s.negative, "min": format_number(s.min),
            "max": format_number(s.max), "neginf": s.neginf, "posinf": s.posinf, "nan": s.nan}


def _square(s: TensorSummary) -> bool:
    return len(s.shape) >= 2 and s.shape[-1] == s.shape[-2] and s.shape[-1] > 1


@rule("Sqrt")
def _sqrt(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    if x is None:
        return None
    fields = _counts(x)
    if ev.phase == "forward" and x.negative:
        return Said("distance_matrix" if _square(x) else "sqrt_negative", "forward", fields)
    if x.zeros:
        if ev.diagonal_zeros:
            return Said("distance_matrix", "diagonal", {**fields, "diagonal": ev.diagonal_zeros})
        if ev.diagonal_zeros is None and _square(x) and x.zeros >= x.shape[-1] // 2:
            return Said("distance_matrix", "backward", fields)  # graph values: the diagonal is not counted
        if ev.producer in ("Sum", "SquaredDifference"):
            return Said("norm_zero", "backward", fields)
        return Said("sqrt_zero", "backward", fields)
    return None


@rule("Rsqrt")
def _rsqrt(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    return Said("negative_power_zero", "forward", _counts(x)) if x is not None and (x.zeros or x.negative) else None


@rule("Log", "Log1p")
def _log(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    if x is None:
        return None
    fields = _counts(x)
    if ev.op == "Log1p":
        return Said("log1p_domain", "range", fields)
    if x.negative and ev.kind == "nan":
        return Said("log_negative", "forward", fields)
    if x.zeros:
        if ev.producer == "Softmax":
            return Said("log_softmax", "forward", fields)
        if ev.producer == "Sigmoid":
            return Said("log_sigmoid", "forward", fields)
        return Said("log_zero", ev.phase, fields)
    return None


@rule("Exp", "Expm1")
def _exp(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    if x is None:
        return None
    limit = exp_limit(x.dtype)
    fields = {**_counts(x), "limit": f"{limit:.2f}", "dtype": x.dtype, "over": ev.over if ev.over is not None else "some"}
    if x.max is not None and x.max > limit:
        return Said("exp_overflow", "backward" if ev.phase == "backward" else "forward", fields)
    return None


@rule("RealDiv", "Div", "Reciprocal", "Inv", "DivNoNan", "FloorDiv", "Xdivy")
def _div(ev: Evidence) -> Optional[Said]:
    if not ev.inputs:
        return None
    den = ev.inputs[-1]
    fields = _counts(den)
    if ev.op in ("Reciprocal", "Inv"):
        return Said("div_zero", "reciprocal", fields) if den.zeros else None
    if not den.zeros:
        return None
    if ev.phase == "backward":
        return Said("div_zero", "backward", fields)
    num = ev.inputs[0]
    if ev.kind == "nan" and num.zeros:
        if ev.producer in ("Sum", "Cast", "Count", "Size", "Maximum") or den.dtype.startswith("int"):
            return Said("mean_empty", "forward", fields)
        return Said("div_zero", "zero_over_zero", {**fields, "num_zeros": num.zeros})
    return Said("div_zero", "x_over_zero", fields)


@rule("Mean")
def _mean(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    if x is not None and x.numel == 0:
        return Said("mean_empty", "empty", _counts(x))
    return Said("mean_empty", "", {}) if ev.kind == "nan" else None


@rule("Softmax", "LogSoftmax")
def _softmax(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    if x is None or not x.neginf:
        return None
    name = "log_softmax" if ev.op == "LogSoftmax" else "softmax"
    return Said("softmax_masked_row", "neginf", {"neginf": x.neginf, "op": name, "fn": f"nanguard.tf.{name}"})


@rule("Acos", "Asin")
def _inverse_trig(ev: Evidence) -> Optional[Said]:
    x = _first(ev)
    if x is None or x.min is None:
        return None
    peak = max(abs(x.min), abs(x.max or 0))
    return Said(f"{ev.op.lower()}_domain", "forward", {"peak": format_number(peak)}) if peak >= 1 else None


@rule("Pow")
def _pow(ev: Evidence) -> Optional[Said]:
    if len(ev.inputs) < 2:
        return None
    base, exponent = ev.inputs[0], ev.inputs[1]
    p = exponent.max if exponent.min == exponent.max else None
    fields = {**_counts(base), "p": format_number(p)}
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", fields)
    if ev.phase == "backward" and base.zeros:
        return Said("fractional_power_zero", "backward", fields)
    return Said("fractional_power_zero", "forward", fields) if base.negative or base.zeros else None


@rule("Mul")
def _mul(ev: Evidence) -> Optional[Said]:
    zeros = sum(s.zeros for s in ev.inputs)
    inf = sum(s.posinf + s.neginf for s in ev.inputs)
    if ev.kind == "nan" and zeros and inf:
        return Said("zero_times_inf", "forward", {"zeros": zeros, "inf": inf})
    return None


@rule("AddV2", "Add", "Sub")
def _add(ev: Evidence) -> Optional[Said]:
    pos = sum(s.posinf for s in ev.inputs)
    neg = sum(s.neginf for s in ev.inputs)
    return Said("inf_minus_inf", "forward", {"posinf": pos, "neginf": neg}) if ev.kind == "nan" and pos and neg else None


@rule("Xlogy")
def _xlogy(ev: Evidence) -> Optional[Said]:
    return Said("xlogy_zero", "backward", _counts(ev.inputs[0])) if ev.inputs else None


def _max_text(dtype: str) -> str:
    found = limits(dtype)
    return found.max_text if found is not None else "?"


def _overflow(ev: Evidence, counted: bool = True) -> Optional[Said]:
    """An op whose finite inputs gave a result beyond its dtype's range (``counted=False``: the
    values were not read, so the inputs' peak is not quoted)."""
    if ev.kind != "inf" or not ev.outputs:
        return None
    dtype = ev.outputs[0].dtype
    peak = max((max(abs(s.min or 0), abs(s.max or 0)) for s in ev.inputs), default=0.0)
    fields = {"dtype": dtype, "limit": _max_text(dtype), "peak": format_number(peak)}
    key = "overflow"  # bfloat16 has float32's range: beyond it, values have diverged
    if dtype == "float16":
        key = "overflow_mixed_precision" if ev.mixed else "overflow_low_precision"
    return Said(key, "peak" if counted else "forward", fields)


def _static(ev: Evidence) -> Optional[Said]:
    """The hazard an op's type, phase and producer point to when its values were not read
    (a check compiled by XLA stores no statistics): the most common cause, no counts quoted."""
    op, backward, nan = ev.op, ev.phase == "backward", ev.kind == "nan"
    if op == "Sqrt":
        if backward:
            if ev.inputs and _square(ev.inputs[0]):   # shapes are known: a square matrix of distances
                return Said("distance_matrix")
            return Said("norm_zero" if ev.producer in ("Sum", "SquaredDifference") else "sqrt_zero")
        return Said("sqrt_negative") if nan else None
    if op == "Rsqrt":
        return Said("negative_power_zero")
    if op == "Log1p":
        return Said("log1p_domain")
    if op == "Log":
        if nan and not backward:
            return Said("log_negative")
        return Said({"Softmax": "log_softmax", "Sigmoid": "log_sigmoid"}.get(ev.producer or "", "log_zero"))
    if op in ("Exp", "Expm1"):
        return Said("exp_overflow") if not nan or backward else None
    if op in ("RealDiv", "Div", "Reciprocal", "Inv", "DivNoNan", "FloorDiv", "Xdivy"):
        if nan and not backward and ev.producer in ("Sum", "Cast", "Count", "Size", "Maximum"):
            return Said("mean_empty")
        return Said("div_zero")
    if op == "Mean":
        return Said("mean_empty") if nan else None
    if op in ("Softmax", "LogSoftmax"):
        name = "log_softmax" if op == "LogSoftmax" else "softmax"
        return Said("softmax_masked_row", "", {"op": name, "fn": f"nanguard.tf.{name}"}) if nan else None
    if op in ("Acos", "Asin"):
        return Said(f"{op.lower()}_domain")
    if op == "Pow":
        return Said("fractional_power_zero")
    if op == "Mul" and nan:
        return Said("zero_times_inf")
    if op in ("AddV2", "Add", "Sub") and nan:
        return Said("inf_minus_inf")
    if op == "Xlogy":
        return Said("xlogy_zero")
    return None


def diagnose(ev: Evidence, counted: bool = True) -> Said:
    """The hazard behind a finding, with its facts; ``unexplained`` when no rule applies.
    ``counted=False``: the values were not read, the op's type and producer decide."""
    said = None
    try:
        found = RULES.get(ev.op) if counted else _static
        said = found(ev) if found is not None else None
        if said is None and ev.phase == "forward":
            said = _overflow(ev, counted)
    except Exception:  # noqa: BLE001  (an explanation must never hide the finding itself)
        said = None
    if said is None:
        what = "NaN" if ev.kind == "nan" else "Inf"
        said = Said("unexplained", "backward" if ev.phase == "backward" else "forward",
                    {"fn": ev.op, "what": what, "node": f"{ev.op} gradient", "op": ev.op})
    return said


def words(said: Said) -> Tuple[str, str]:
    """(explanation, suggestion) in the catalogue's words, the fix worded for TensorFlow."""
    hazard = HAZARDS[said.key]
    facts = hazard.evidence_text(said.evidence, **said.fields) if said.evidence in hazard.evidence else ""
    return explanation(hazard, facts, **said.fields), suggestion(hazard, "tf", **said.fields)


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
    why, fix = words(said)
    if settings.get("epsilon") == 0:
        why = f"{why}; {HAZARDS['optimizer_step'].evidence_text('eps0')}"
    return why, fix


def input_words(name: str, nan: int, numel: int, data: bool = False) -> Tuple[str, str]:
    """The words of a NaN that was already in the data when an op consumed it (``data``: in the
    batch a tf.data iterator returned)."""
    return words(Said("nan_input", "data" if data else "forward", {"name": name, "nan": nan, "numel": numel}))


__all__ = ["Evidence", "Said", "diagnose", "explain", "input_words", "mixed_precision", "update_words",
           "words"]
