"""Which catalogued hazard made a backward op's NaN/Inf: the forward op's base name picks the
rule, and the forward op's inputs (and their autograd history) decide the hazard.

A backward finding knows the node (``SqrtBackward0``), the forward op that made it, and the
forward inputs; the same facts as in a forward finding name the same hazard
(`why_forward.root_hazard`, `why_forward.log_hazard`).
"""

from __future__ import annotations

from nanguard.torch.detector.evidence import (
    Evidence,
    Said,
    counts,
    counts_of_empty_groups,
    exp_limit,
    fmt,
    rows_all_neginf,
    zero_vectors,
)
from nanguard.torch.detector.why_forward import Rule, log_hazard, root_hazard, rule

BACKWARD: dict[str, Rule] = {}


@rule(BACKWARD, "sqrt")
def _sqrt(ev: Evidence) -> Said:
    s = ev.first()
    key, extra = root_hazard(ev.first_tensor())
    if key == "distance_matrix" and extra.get("diagonal"):
        return Said(key, "diagonal", {**counts(s), **extra})
    return Said(key or "sqrt_zero", "backward", counts(s))


@rule(BACKWARD, "pow")
def _pow(ev: Evidence) -> Said:
    s = ev.first()
    p = ev.exponent()
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", counts(s))
    if p == 0.5:
        key, extra = root_hazard(ev.first_tensor())
        if key:
            name = "diagonal" if extra.get("diagonal") else "backward"
            return Said(key, name, {**counts(s), **extra})
    return Said("fractional_power_zero", "backward", {**counts(s), "p": "?" if p is None else f"{p:g}"})


@rule(BACKWARD, "log", "log2", "log10")
def _log(ev: Evidence) -> Said:
    key = log_hazard(ev.first_tensor())
    return Said(key, "backward" if key == "log_zero" else "forward", counts(ev.first()))


@rule(BACKWARD, "exp", "expm1")
def _exp(ev: Evidence) -> Said:
    s = ev.first()
    limit = exp_limit(s.dtype if s is not None else "float32")
    return Said("exp_overflow", "backward", {"max": fmt(s.max if s is not None else None), "limit": f"{limit:.2f}"})


@rule(BACKWARD, "log1p")
def _log1p(ev: Evidence) -> Said:
    return Said("log1p_domain", "range", counts(ev.first()))


@rule(BACKWARD, "div", "true_divide", "reciprocal")
def _div(ev: Evidence) -> Said:
    args = ev.args()
    den = args[-1][0] if args else None
    if len(args) > 1 and counts_of_empty_groups(args[0][1], args[-1][1]):
        return Said("mean_empty", "backward", counts(den))
    return Said("div_zero", "backward", counts(den))


@rule(BACKWARD, "xlogy", "special_xlogy")
def _xlogy(ev: Evidence) -> Said:
    x = ev.forward_inputs[0][0] if ev.forward_inputs else None
    return Said("xlogy_zero", "backward", counts(x))


def _masked_rows(kind: str) -> Rule:
    key = "logsumexp_masked_row" if kind == "logsumexp" else "softmax_masked_row"
    names = {"op": kind, "fn": "nanguard.log_softmax" if kind == "log_softmax" else "nanguard.softmax"}

    def explain_rows(ev: Evidence) -> Said:
        rows = rows_all_neginf(ev.first_tensor(), ev.dim)
        if rows is not None and rows[0]:
            return Said(key, "backward", {**names, "rows": rows[0], "total": rows[1]})
        return Said(key, "", names)
    return explain_rows


BACKWARD["logsumexp"] = _masked_rows("logsumexp")
BACKWARD["softmax"] = _masked_rows("softmax")
BACKWARD["log_softmax"] = _masked_rows("log_softmax")


@rule(BACKWARD, "norm", "linalg_vector_norm", "frobenius_norm")
def _norm(ev: Evidence) -> Said:
    found = zero_vectors(ev.first_tensor(), ev.dim)
    if found is not None and found[0]:
        return Said("norm_zero", "vectors", {"zeros": found[0], "numel": found[1]})
    return Said("norm_zero")


@rule(BACKWARD, "std", "var", "std_mean", "var_mean")
def _std(ev: Evidence) -> Said:
    return Said("std_degenerate")


@rule(BACKWARD, "acos", "asin")
def _acos(ev: Evidence) -> Said:
    s = ev.first()
    if s is None:
        return Said(f"{ev.base}_domain")
    return Said(f"{ev.base}_domain", "backward", {"peak": fmt(max(abs(s.min or 0), abs(s.max or 0)))})


@rule(BACKWARD, "atan2")
def _atan2(ev: Evidence) -> Said:
    return Said("atan2_origin")


@rule(BACKWARD, "abs", "relu", "where", "masked_fill", "mul", "add", "sub")
def _passthrough(ev: Evidence) -> None:
    return None


__all__ = ["BACKWARD"]
