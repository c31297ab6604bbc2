"""Which catalogued hazard made a backward op's NaN/Inf: the forward op's canonical name picks
the rule, and the forward op's inputs (and what made them) decide the hazard.

The same facts as in a forward finding name the same hazard (`Probe.root`,
`Probe.log_source`).
"""

from __future__ import annotations

from nanguard.core.dtypes import exp_limit
from nanguard.core.why.facts import Facts, Said, counts, fmt, peak
from nanguard.core.why.forward import (ACOS, ASIN, DIVISIONS, EXPS, LOGS, MEANS, POWERS, STATS, inf_minus_inf, masked_key,
                                       masked_names, zero_times_inf)
from nanguard.core.why.registry import BACKWARD, Rule, rule


@rule(BACKWARD, "sqrt")
def _sqrt(f: Facts) -> Said:
    key, extra = f.probe.root()
    if key == "distance_matrix" and extra.get("diagonal"):
        return Said(key, "diagonal", {**counts(f.first()), **extra})
    return Said(key or "sqrt_zero", "backward", counts(f.first()))


@rule(BACKWARD, "rsqrt")
def _rsqrt(f: Facts) -> Said:
    return Said("negative_power_zero", "forward", counts(f.first()))


@rule(BACKWARD, *POWERS)
def _pow(f: Facts) -> Said:
    s = f.first()
    p = f.exponent
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", counts(s))
    if p == 0.5:
        key, extra = f.probe.root()
        if key:
            return Said(key, "diagonal" if extra.get("diagonal") else "backward", {**counts(s), **extra})
    return Said("fractional_power_zero", "backward", {**counts(s), "p": "?" if p is None else f"{p:g}"})


@rule(BACKWARD, *LOGS)
def _log(f: Facts) -> Said:
    key = f.probe.log_source()
    return Said(key, "backward" if key == "log_zero" else "forward", counts(f.first()))


@rule(BACKWARD, *EXPS)
def _exp(f: Facts) -> Said:
    s = f.first()
    limit = exp_limit(s.dtype if s is not None else "float32")
    return Said("exp_overflow", "backward", {**counts(s), "limit": f"{limit:.2f}"})


@rule(BACKWARD, "log1p")
def _log1p(f: Facts) -> Said:
    return Said("log1p_domain", "range", counts(f.first()))


@rule(BACKWARD, *DIVISIONS, *MEANS)
def _div(f: Facts) -> Said:
    args = f.args()
    # the denominator: the last floating operand (TensorFlow's Mean takes integer axes after it)
    den = next((s for s in reversed(args) if s.dtype.startswith(("float", "bfloat"))), None)
    if f.op in MEANS or (len(args) > 1 and f.probe.empty_groups()):
        return Said("mean_empty", "backward", counts(den))
    return Said("div_zero", "backward", counts(den))


@rule(BACKWARD, "xlogy", "special_xlogy", "xlog1py", "entr", "kl_div", "rel_entr")
def _xlogy(f: Facts) -> Said:
    return Said("xlogy_zero", "backward", counts(f.forward_inputs[0] if f.forward_inputs else None))


def _masked_rows(kind: str) -> Rule:
    key = masked_key(kind)

    def explain_rows(f: Facts) -> Said:
        names = masked_names(kind, f.framework)
        rows = f.probe.masked_rows()
        if rows is not None and rows[0]:
            return Said(key, "backward", {**names, "rows": rows[0], "total": rows[1]})
        return Said(key, "", names)
    return explain_rows


for _kind in ("softmax", "log_softmax", "logsumexp"):
    BACKWARD[_kind] = _masked_rows(_kind)


@rule(BACKWARD, "norm", "safe_norm", "linalg_vector_norm", "frobenius_norm")
def _norm(f: Facts) -> Said:
    found = f.probe.zero_vectors()
    if found is not None and found[0]:
        return Said("norm_zero", "vectors", {"zeros": found[0], "numel": found[1]})
    return Said("norm_zero")


@rule(BACKWARD, *STATS)
def _std(f: Facts) -> Said:
    return Said("std_degenerate")


@rule(BACKWARD, *ACOS, *ASIN)
def _acos(f: Facts) -> Said:
    key = f"{'acos' if f.op in ACOS else 'asin'}_domain"
    s = f.first()
    return Said(key) if s is None else Said(key, "backward", {"peak": fmt(peak(s) or 0.0)})


@rule(BACKWARD, "atan2", "arctan2")
def _atan2(f: Facts) -> Said:
    return Said("atan2_origin")


# the gradient of a product or a sum met what the forward values hold (0 · inf, inf − inf)
BACKWARD.update({name: zero_times_inf for name in ("mul", "multiply")})
BACKWARD.update({name: inf_minus_inf for name in ("add", "sub", "rsub", "add_any", "subtract")})


__all__ = ["BACKWARD"]
