"""The hazard an op's name, phase and producer point to when its values were not read (a
check compiled by XLA stores no statistics): the most common cause, no counts quoted.

One table for both phases; `nanguard.core.why.diagnose` uses it for `Facts` with
``counted=False``.
"""

from __future__ import annotations

from typing import Optional

from nanguard.core.why.facts import Facts, Said
from nanguard.core.why.forward import ACOS, DIVISIONS, EXPS, LOGS, MEANS, POWERS, masked_names
from nanguard.core.why.registry import PRESUMED, rule


@rule(PRESUMED, "sqrt")
def _sqrt(f: Facts) -> Optional[Said]:
    if f.phase == "backward":
        return Said(f.probe.root()[0] or "sqrt_zero")
    return Said("sqrt_negative") if f.kind == "nan" else None


@rule(PRESUMED, "rsqrt")
def _rsqrt(f: Facts) -> Said:
    return Said("negative_power_zero")


@rule(PRESUMED, "log1p")
def _log1p(f: Facts) -> Said:
    return Said("log1p_domain")


@rule(PRESUMED, *LOGS)
def _log(f: Facts) -> Said:
    if f.kind == "nan" and f.phase != "backward":
        return Said("log_negative")
    return Said(f.probe.log_source())


@rule(PRESUMED, *EXPS)
def _exp(f: Facts) -> Optional[Said]:
    return Said("exp_overflow") if f.kind != "nan" or f.phase == "backward" else None


@rule(PRESUMED, *DIVISIONS)
def _div(f: Facts) -> Said:
    if f.kind == "nan" and f.phase != "backward" and f.probe.empty_groups():
        return Said("mean_empty")
    return Said("div_zero")


@rule(PRESUMED, *MEANS)
def _mean(f: Facts) -> Optional[Said]:
    return Said("mean_empty") if f.kind == "nan" else None


@rule(PRESUMED, "softmax", "log_softmax")
def _softmax(f: Facts) -> Optional[Said]:
    return Said("softmax_masked_row", "", masked_names(f.op, f.framework)) if f.kind == "nan" else None


@rule(PRESUMED, "acos", "arccos", "asin", "arcsin")
def _acos(f: Facts) -> Said:
    return Said(f"{'acos' if f.op in ACOS else 'asin'}_domain")


@rule(PRESUMED, *POWERS)
def _pow(f: Facts) -> Said:
    return Said("fractional_power_zero")


@rule(PRESUMED, "mul", "multiply")
def _mul(f: Facts) -> Optional[Said]:
    return Said("zero_times_inf") if f.kind == "nan" else None


@rule(PRESUMED, "add", "sub", "add_any", "subtract")
def _add(f: Facts) -> Optional[Said]:
    return Said("inf_minus_inf") if f.kind == "nan" else None


@rule(PRESUMED, "xlogy")
def _xlogy(f: Facts) -> Said:
    return Said("xlogy_zero")


__all__ = ["PRESUMED"]
