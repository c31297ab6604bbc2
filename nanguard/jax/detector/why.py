"""Which catalogued hazard made a JAX finding, decided from the values the replay kept.

Rules are keyed by the function the user called (``sqrt``, ``norm``, ``mean``: read off the
line, or the primitive when the line is an operator) and the phase; they return a `Said`:
the key of a hazard in `nanguard.core.hazards`, the evidence template that states the
counts, and the fields that fill it. The words are the catalogue's, worded for JAX with
``suggestion(hazard, "jax")``, the same texts ``nanguard lint`` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from nanguard.core.dtypes import exp_limit, max_finite
from nanguard.core.hazards import HAZARDS, explanation, suggestion
from nanguard.core.summary import TensorSummary

Arg = Tuple[TensorSummary, Optional[np.ndarray]]


@dataclass
class Said:
    key: str
    evidence: str = ""
    fields: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Facts:
    """What a rule may read: the phase and kind, the user's function and the primitive, the
    operands of the op that failed (``inputs``) and of the forward op (``forward_inputs``),
    Python-number operands, and what produced the forward op's first operand."""

    phase: str
    kind: str
    fn: str
    primitive: str
    inputs: List[Arg]
    forward_inputs: List[Arg]
    scalars: List[float]
    outputs: List[TensorSummary]
    producers: List[str] = field(default_factory=list)   # functions upstream of the first operand
    exponent: Optional[float] = None

    def args(self) -> List[Arg]:
        return self.forward_inputs if self.phase == "backward" and self.forward_inputs else self.inputs

    def first(self) -> Optional[TensorSummary]:
        args = [s for s, _ in self.args() if s.dtype.startswith(("float", "bfloat", "complex"))]
        return args[0] if args else None

    def first_value(self) -> Optional[np.ndarray]:
        args = self.args()
        return args[0][1] if args else None

    def dtype(self) -> str:
        if self.outputs:
            return self.outputs[0].dtype
        s = self.first()
        return s.dtype if s is not None else "float32"


Rule = Callable[[Facts], Optional[Said]]
FORWARD: Dict[str, Rule] = {}
BACKWARD: Dict[str, Rule] = {}


def rule(table: Dict[str, Rule], *names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            table[n] = fn
        return fn
    return register


def _fmt(v: Optional[float]) -> str:
    return "?" if v is None else f"{v:.4g}"


def counts(s: Optional[TensorSummary]) -> Dict[str, Any]:
    if s is None:
        return {k: "?" for k in ("zeros", "numel", "negative", "min", "max", "posinf", "neginf", "nan")}
    return {"zeros": s.zeros, "numel": s.numel, "negative": s.negative, "min": _fmt(s.min), "max": _fmt(s.max),
            "posinf": s.posinf, "neginf": s.neginf, "nan": s.nan, "name": s.name}


# ----------------------------------------------------------------------- value facts
def diagonal_zeros(a: Optional[np.ndarray]) -> Optional[int]:
    """Entries ≤ 0 on the diagonal of a square matrix whose diagonal is ≈ 0 and whose
    off-diagonal is positive somewhere: a squared distance matrix."""
    if a is None or a.ndim < 2 or a.shape[-1] != a.shape[-2] or a.shape[-1] < 2 or a.dtype.kind != "f":
        return None
    if not np.isfinite(a).all():
        return None
    scale = float(np.abs(a).max())
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    if scale <= 0 or float(np.abs(diag).max()) > 1e-3 * scale:
        return None
    off = ~np.eye(a.shape[-1], dtype=bool)
    if not (a[..., off] > 0).any():
        return None
    return int((diag <= 0).sum())


def rows_all_neginf(a: Optional[np.ndarray]) -> Optional[Tuple[int, int]]:
    if a is None or a.ndim == 0 or a.dtype.kind != "f":
        return None
    full = (a == -np.inf).all(axis=-1)
    return int(full.sum()), int(full.size)


def zero_vectors(a: Optional[np.ndarray]) -> Optional[Tuple[int, int]]:
    if a is None or a.size == 0:
        return None
    zero = (a == 0).all(axis=-1) if a.ndim > 1 else np.asarray([(a == 0).all()])
    return int(zero.sum()), int(zero.size)


def empty_groups(num: Optional[np.ndarray], den: Optional[np.ndarray]) -> bool:
    """``num / den`` is a mean of empty groups: ``den`` holds counts (whole numbers ≥ 0), 0
    where ``num`` is 0 too."""
    if num is None or den is None or den.dtype.kind != "f" or den.size == 0:
        return False
    if not np.isfinite(den).all() or (den < 0).any() or not (den == np.round(den)).all():
        return False
    empty = den == 0
    if not empty.any():
        return False
    try:
        return bool((empty & (num == 0)).any())
    except ValueError:
        return False


# ------------------------------------------------------------------------- forward
def _root(f: Facts) -> Tuple[str, Dict[str, Any]]:
    on_diagonal = diagonal_zeros(f.first_value())
    if on_diagonal or "dot_general" in f.producers:
        return "distance_matrix", {"diagonal": on_diagonal or 0}
    if f.producers[:1] in (["reduce_sum"], ["integer_pow"], ["square"]) or f.fn in ("norm",):
        return "norm_zero", {}
    return "", {}


@rule(FORWARD, "sqrt")
def _sqrt(f: Facts) -> Optional[Said]:
    s = f.first()
    if s is None or not s.negative:
        return None
    key, extra = _root(f)
    if key == "distance_matrix":
        return Said(key, "forward", {**counts(s), **extra})
    return Said("sqrt_negative", "forward", counts(s))


@rule(FORWARD, "rsqrt")
def _rsqrt(f: Facts) -> Optional[Said]:
    return Said("negative_power_zero", "forward", counts(f.first()))


@rule(FORWARD, "pow", "integer_pow", "power", "float_power", "cbrt")
def _pow(f: Facts) -> Optional[Said]:
    p = f.exponent
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", counts(f.first()))
    return Said("fractional_power_zero", "forward", counts(f.first()))


def log_hazard(f: Facts) -> str:
    up = f.producers
    if any("softmax" in p for p in up[:2]):
        return "log_softmax"
    if up[:1] == ["logistic"] or "sigmoid" in up[:1]:
        return "log_sigmoid"
    if up[:1] == ["sub"] and "logistic" in up[1:3]:
        return "log_one_minus_sigmoid"
    if up[:1] == ["reduce_sum"] and "exp" in up[1:3]:
        return "logsumexp_overflow"
    return "log_zero"


@rule(FORWARD, "log", "log2", "log10")
def _log(f: Facts) -> Optional[Said]:
    s = f.first()
    if s is None or not (s.zeros or s.negative):
        return None
    if s.negative and (f.kind == "nan" or not s.zeros):
        return Said("log_negative", "forward", counts(s))
    return Said(log_hazard(f), "forward", counts(s))


@rule(FORWARD, "log1p")
def _log1p(f: Facts) -> Optional[Said]:
    return Said("log1p_domain", "range", counts(f.first()))


@rule(FORWARD, "exp", "exp2", "expm1")
def _exp(f: Facts) -> Optional[Said]:
    dtype = f.dtype()
    limit = exp_limit(dtype)
    a = f.first_value()
    over = int((a > limit).sum()) if a is not None else "?"
    return Said("exp_overflow", "forward", {**counts(f.first()), "over": over, "limit": f"{limit:.2f}",
                                            "dtype": dtype})


@rule(FORWARD, "div", "mean", "nanmean", "average")
def _div(f: Facts) -> Optional[Said]:
    args = f.inputs
    if len(args) < 2:
        return Said("div_zero", "scalar") if 0.0 in f.scalars else None
    (num, num_v), (den, den_v) = args[0], args[-1]
    if f.fn in ("mean", "nanmean", "average") and den.zeros:
        return Said("mean_empty", "forward", counts(den))
    if den.zeros == 0 and f.kind == "nan":
        return Said("div_zero", "infinite")
    if f.kind == "nan" and empty_groups(num_v, den_v):
        return Said("mean_empty", "forward", counts(den))
    if f.kind == "nan":
        return Said("div_zero", "zero_over_zero", {**counts(den), "num_zeros": num.zeros})
    return Said("div_zero", "x_over_zero", counts(den))


@rule(FORWARD, "mul")
def _mul(f: Facts) -> Optional[Said]:
    if f.kind != "nan" or not any(s.zeros for s, _ in f.inputs):
        return None
    infinite = [s for s, _ in f.inputs if s.posinf or s.neginf]
    if not infinite:
        return None
    s = infinite[0]
    if s.neginf and not s.posinf and not s.nan and (s.max is None or s.max <= 0):
        return Said("xlogy_zero", "forward", counts(s))
    return Said("zero_times_inf", "forward", {"inf": sum(x.posinf + x.neginf for x, _ in f.inputs),
                                              "zeros": sum(x.zeros for x, _ in f.inputs)})


@rule(FORWARD, "add", "sub", "add_any")
def _add(f: Facts) -> Optional[Said]:
    pos = sum(s.posinf for s, _ in f.inputs) + sum(1 for v in f.scalars if v == math.inf)
    neg = sum(s.neginf for s, _ in f.inputs) + sum(1 for v in f.scalars if v == -math.inf)
    if f.kind != "nan" or not (pos or neg):
        return None
    return Said("inf_minus_inf", "forward", {"posinf": pos, "neginf": neg})


def _masked(kind: str, backward: bool) -> Rule:
    key = "logsumexp_masked_row" if kind == "logsumexp" else "softmax_masked_row"
    names = {"op": kind, "fn": "nanguard.jax.log_softmax" if kind == "log_softmax" else "nanguard.jax.softmax"}

    def rows(f: Facts) -> Optional[Said]:
        found = rows_all_neginf(f.first_value())
        if found is not None and found[0]:
            return Said(key, "backward" if backward else "forward", {**names, "rows": found[0], "total": found[1]})
        s = f.first()
        if backward:
            return Said(key, "", names)
        if s is not None and s.neginf and key == "softmax_masked_row":
            return Said(key, "neginf", {**names, **counts(s)})
        return None
    return rows


for _kind in ("softmax", "log_softmax", "logsumexp"):
    FORWARD[_kind] = _masked(_kind, False)
    BACKWARD[_kind] = _masked(_kind, True)


@rule(FORWARD, "acos", "asin", "arccos", "arcsin")
def _acos(f: Facts) -> Optional[Said]:
    s = f.first()
    name = "acos" if "c" in f.fn.replace("arc", "")[:2] else "asin"
    peak = max(abs(s.min or 0), abs(s.max or 0)) if s is not None else None
    return Said(f"{name}_domain", "forward", {"peak": _fmt(peak)})


@rule(FORWARD, "atanh", "arctanh")
def _atanh(f: Facts) -> Optional[Said]:
    return Said("atanh_domain", "forward", counts(f.first()))


@rule(FORWARD, "std", "var", "nanstd", "nanvar")
def _std(f: Facts) -> Optional[Said]:
    a = f.first_value()
    n = int(a.shape[-1]) if a is not None and a.ndim else 1
    return Said("std_degenerate", "forward", {"n": n, "s": "" if n == 1 else "s"})


def overflow(f: Facts) -> Optional[Said]:
    dtype = f.dtype()
    limit = max_finite(dtype)
    if f.kind != "inf" or limit is None:
        return None
    key = "overflow_low_precision" if dtype == "float16" else "overflow"
    peak = max((max(abs(s.min or 0), abs(s.max or 0)) for s, _ in f.inputs if s.min is not None), default=None)
    fields = {"dtype": dtype, "limit": f"{limit:.6g}", "peak": _fmt(peak)}
    return Said(key, "forward" if peak is None else "peak", fields)


# ------------------------------------------------------------------------ backward
@rule(BACKWARD, "sqrt")
def _sqrt_back(f: Facts) -> Said:
    s = f.first()
    key, extra = _root(f)
    if key == "distance_matrix" and extra.get("diagonal"):
        return Said(key, "diagonal", {**counts(s), **extra})
    return Said(key or "sqrt_zero", "backward", counts(s))


@rule(BACKWARD, "norm", "safe_norm")
def _norm_back(f: Facts) -> Said:
    found = zero_vectors(f.first_value())
    if found is not None and found[0]:
        return Said("norm_zero", "vectors", {"zeros": found[0], "numel": found[1]})
    return Said("norm_zero")


@rule(BACKWARD, "pow", "integer_pow", "power", "float_power", "cbrt")
def _pow_back(f: Facts) -> Said:
    p = f.exponent
    s = f.first()
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", counts(s))
    return Said("fractional_power_zero", "backward", {**counts(s), "p": "?" if p is None else f"{p:g}"})


@rule(BACKWARD, "log", "log2", "log10")
def _log_back(f: Facts) -> Said:
    key = log_hazard(f)
    return Said(key, "backward" if key == "log_zero" else "forward", counts(f.first()))


@rule(BACKWARD, "exp", "expm1", "exp2")
def _exp_back(f: Facts) -> Said:
    s = f.first()
    limit = exp_limit(s.dtype if s is not None else "float32")
    return Said("exp_overflow", "backward", {"max": _fmt(s.max if s is not None else None), "limit": f"{limit:.2f}"})


@rule(BACKWARD, "log1p")
def _log1p_back(f: Facts) -> Said:
    return Said("log1p_domain", "range", counts(f.first()))


@rule(BACKWARD, "div", "mean", "nanmean", "average")
def _div_back(f: Facts) -> Said:
    args = f.args()
    den = args[-1][0] if args else None
    if f.fn in ("mean", "nanmean", "average") or (len(args) > 1 and empty_groups(args[0][1], args[-1][1])):
        return Said("mean_empty", "backward", counts(den))
    return Said("div_zero", "backward", counts(den))


@rule(BACKWARD, "xlogy", "xlog1py", "entr", "kl_div", "rel_entr")
def _xlogy_back(f: Facts) -> Said:
    x = f.forward_inputs[0][0] if f.forward_inputs else None
    return Said("xlogy_zero", "backward", counts(x))


@rule(BACKWARD, "std", "var", "nanstd", "nanvar")
def _std_back(f: Facts) -> Said:
    return Said("std_degenerate")


@rule(BACKWARD, "acos", "asin", "arccos", "arcsin")
def _acos_back(f: Facts) -> Said:
    s = f.first()
    name = "acos" if f.fn in ("acos", "arccos") else "asin"
    return Said(f"{name}_domain", "backward", {"peak": _fmt(max(abs(s.min or 0), abs(s.max or 0)) if s else None)})


@rule(BACKWARD, "atan2", "arctan2")
def _atan2_back(f: Facts) -> Said:
    return Said("atan2_origin")


def diagnose(f: Facts) -> Said:
    """The hazard behind a finding; ``unexplained`` when no rule applies."""
    if f.phase == "input":
        bad = [s for s, _ in f.inputs if s.nan]
        return Said("nan_input", "forward", counts(bad[0])) if bad else Said("nan_input")
    table = BACKWARD if f.phase == "backward" else FORWARD
    said = None
    try:
        for name in dict.fromkeys((f.fn, f.primitive)):
            found = table.get(name)
            said = found(f) if found is not None else None
            if said is not None:
                break
        if said is None and f.phase == "forward":
            said = overflow(f)
    except Exception:  # noqa: BLE001  (an explanation must never hide the finding itself)
        said = None
    if said is None:
        what = "NaN" if f.kind == "nan" else "Inf"
        fields = {"fn": f.fn, "what": what, "node": f.primitive, "op": f.primitive}
        said = Said("unexplained", "backward" if f.phase == "backward" else "forward", fields)
    return said


def words(said: Said) -> Tuple[str, str]:
    """(explanation, suggestion) in the catalogue's words, the fix worded for JAX."""
    hazard = HAZARDS[said.key]
    facts = hazard.evidence_text(said.evidence, **said.fields) if said.evidence else ""
    return explanation(hazard, facts, **said.fields), suggestion(hazard, "jax", **said.fields)


__all__ = ["BACKWARD", "FORWARD", "Facts", "Said", "diagnose", "words"]
