"""Where each op stops being finite: the singular sets, written once, as data.

An op is *singular* at an input where its value or its gradient is NaN or ±inf although
every input is finite: ``log`` at ``x ≤ 0``, ``exp`` above ``log(max)``, a division by 0,
``sqrt``'s gradient at 0. Each `Singularity` names the op (canonical base names, as
`nanguard.torch.detector.frames.op_base` and the lint op table spell them), the argument the
condition is about, the `Condition` (a word of the small vocabulary below, which every
analysis implements once on its own abstract values), whether the value or only the
gradient is hit, and the key of the hazard in `nanguard.core.hazards` that explains it and
names the fix. ``nanguard audit`` asks "can this argument reach this set?"; the same table
is meant for the linter's static questions and the detectors' explanations.

Library facts that are *not* singular are written down too (`NOT_SINGULAR`): torch's
``linalg_vector_norm``, ``std``/``var`` and ``cdist`` have a zero gradient at zero (their
backward masks it), ``F.normalize`` clamps its denominator, ``binary_cross_entropy`` clamps
its logs at −100. Nothing here imports a framework.

    >>> [s.condition for s in singularities("log")]
    ['nonpositive']
    >>> [(s.phase, s.condition) for s in singularities("sqrt")]
    [('value', 'negative'), ('gradient', 'zero')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Literal, Mapping, Optional, Tuple

Phase = Literal["value", "gradient"]

#: The conditions, each a set of inputs of the op's argument ``argument``:
CONDITIONS: Mapping[str, str] = {
    "nonpositive": "x ≤ 0",
    "negative": "x < 0",
    "zero": "x = 0",
    "zero_divisor": "the divisor can be 0",
    "exp_overflow": "x above the largest finite result's preimage (log(max) for exp)",
    "outside_unit": "|x| > 1",
    "unit": "|x| = 1",
    "not_inside_unit": "|x| ≥ 1",
    "below_one": "x < 1",
    "one": "x = 1",
    "at_or_below_minus_one": "x ≤ −1",
    "pole": "x a non-positive integer",
    "outside_open_unit_interval": "x ≤ 0 or x ≥ 1",
    "both_zero": "both arguments 0",
    "empty_slice": "a slice with every entry −inf (or nothing kept)",
    "inf_minus_inf": "+inf and −inf meet in a sum",
    "zero_times_inf": "0 meets ±inf in a product",
    "degenerate_count": "fewer elements than the correction (N − correction ≤ 0)",
    "no_target": "every target ignored (total weight 0)",
    "overflow": "the result exceeds the dtype's largest finite value",
}
Condition = str


@dataclass(frozen=True)
class Singularity:
    """One way ``ops`` turn finite inputs into NaN/±inf.

    ``argument`` is the position of the input the condition is about; ``result`` says what
    comes out (``"-inf"``, ``"nan"``, ``"inf"``, ``"nan or inf"``); ``hazard`` is the key of
    the catalogue entry whose why/fix words it; ``summary`` is one line for reports.
    """

    ops: Tuple[str, ...]
    argument: int
    condition: Condition
    phase: Phase
    result: str
    hazard: str
    summary: str
    masked_in: Tuple[str, ...] = ()   # frameworks whose op masks it (gradient 0 there, not NaN)

    def __post_init__(self) -> None:
        if self.condition not in CONDITIONS:
            raise ValueError(f"unknown condition {self.condition!r}; known: {sorted(CONDITIONS)}")


def _s(ops: Tuple[str, ...], argument: int, condition: Condition, phase: Phase, result: str, hazard: str,
       summary: str, masked_in: Tuple[str, ...] = ()) -> Singularity:
    return Singularity(ops, argument, condition, phase, result, hazard, summary, masked_in)


TABLE: Tuple[Singularity, ...] = (
    # ------------------------------------------------------------------ logs and exponentials
    _s(("log", "log2", "log10"), 0, "nonpositive", "value", "-inf at 0, nan below", "log_zero",
       "log(x) is −inf at x = 0 and NaN for x < 0; its gradient 1/x is inf at 0"),
    _s(("log1p",), 0, "at_or_below_minus_one", "value", "-inf at -1, nan below", "log1p_domain",
       "log1p(x) is −inf at x = −1 and NaN below"),
    _s(("exp", "expm1", "exp2", "sinh", "cosh"), 0, "exp_overflow", "value", "inf", "exp_overflow",
       "exp(x) overflows to inf above log(max) (88.7 in float32, 11.1 in float16)"),
    _s(("pow_base",), 1, "exp_overflow", "value", "inf", "exp_overflow",
       "c ** x overflows to inf for large x"),
    _s(("xlogy",), 1, "nonpositive", "value", "-inf at 0, nan below", "xlogy_zero",
       "xlogy(x, y) is −inf where y = 0 and x ≠ 0, and NaN for y < 0"),
    _s(("xlogy",), 1, "zero", "gradient", "nan", "xlogy_zero",
       "xlogy(x, y)'s gradient x/y in y is 0/0 = NaN at x = y = 0 (torch.xlogy(p, p) at p = 0)"),
    _s(("logit",), 0, "outside_open_unit_interval", "value", "inf at 0 and 1, nan outside", "log_zero",
       "logit(p) = log(p / (1 − p)) is ±inf at p = 0 and 1 and NaN outside [0, 1]"),
    # ---------------------------------------------------------------------- roots and powers
    _s(("sqrt",), 0, "negative", "value", "nan", "sqrt_negative",
       "sqrt(x) is NaN for x < 0"),
    _s(("sqrt",), 0, "zero", "gradient", "inf, nan once multiplied by 0", "sqrt_zero",
       "sqrt's gradient 1/(2·sqrt(x)) is inf at x = 0"),
    _s(("rsqrt",), 0, "nonpositive", "value", "inf at 0, nan below", "negative_power_zero",
       "rsqrt(x) = x^−½ is inf at x = 0 and NaN below"),
    _s(("pow_fractional",), 0, "negative", "value", "nan", "fractional_power_zero",
       "x ** p with a fractional p is NaN for x < 0"),
    _s(("pow_fractional",), 0, "zero", "gradient", "inf, nan once multiplied by 0", "fractional_power_zero",
       "the gradient p·x^(p−1) of x ** p is inf at x = 0 for 0 < p < 1"),
    _s(("pow_negative",), 0, "zero", "value", "inf", "negative_power_zero",
       "x ** p with p < 0 is inf at x = 0"),
    # -------------------------------------------------------------------------- divisions
    _s(("div", "true_divide", "reciprocal", "remainder", "fmod", "floor_divide", "addcdiv"), 1, "zero_divisor",
       "value", "inf, or nan for 0/0", "div_zero",
       "a / b is ±inf where b = 0 (NaN where a = 0 too)"),
    _s(("mean_selection",), 0, "zero_divisor", "value", "nan", "mean_empty",
       "the mean of an empty selection is 0/0 = NaN"),
    # ---------------------------------------------------------------------- trigonometry
    _s(("acos", "asin"), 0, "outside_unit", "value", "nan", "acos_domain",
       "acos/asin are NaN for |x| > 1 (a cosine computed in floating point reaches 1 + 1 ulp)"),
    _s(("acos", "asin"), 0, "unit", "gradient", "inf", "acos_domain",
       "the gradient of acos/asin, ∓1/sqrt(1 − x²), is inf at |x| = 1"),
    _s(("atanh", "erfinv"), 0, "not_inside_unit", "value", "inf at ±1, nan outside", "atanh_domain",
       "atanh/erfinv are ±inf at ±1 and NaN outside [−1, 1]"),
    _s(("acosh",), 0, "below_one", "value", "nan", "atanh_domain",
       "acosh(x) is NaN for x < 1"),
    _s(("acosh",), 0, "one", "gradient", "inf", "atanh_domain",
       "acosh's gradient 1/sqrt(x² − 1) is inf at x = 1"),
    _s(("atan2",), 0, "both_zero", "gradient", "nan", "atan2_origin",
       "atan2(y, x) has a NaN gradient at the origin y = x = 0", masked_in=("torch",)),
    _s(("lgamma", "digamma", "polygamma"), 0, "pole", "value", "inf", "unexplained",
       "lgamma/digamma have poles at the non-positive integers"),
    # ------------------------------------------------------------------- softmax and masks
    _s(("softmax", "log_softmax"), 0, "empty_slice", "value", "nan", "softmax_masked_row",
       "softmax of a slice whose entries are all −inf is 0/0 = NaN"),
    _s(("logsumexp",), 0, "empty_slice", "gradient", "nan", "logsumexp_masked_row",
       "logsumexp of an all −inf slice is −inf and its gradient exp(x − lse) is NaN"),
    _s(("add", "sub", "rsub"), 0, "inf_minus_inf", "value", "nan", "inf_minus_inf",
       "+inf and −inf in one sum give NaN (x − max(x) on a fully masked row)"),
    _s(("mul",), 0, "zero_times_inf", "value", "nan", "zero_times_inf",
       "0 · inf = NaN (a mask multiplied into −inf scores)"),
    # ------------------------------------------------------------------ reductions and losses
    _s(("var", "std"), 0, "degenerate_count", "value", "nan", "std_degenerate",
       "var/std with N − correction ≤ 0 (one element, unbiased) is NaN"),
    _s(("nll_loss",), 1, "no_target", "value", "nan", "loss_all_ignored",
       "a mean loss over targets that are all ignore_index is 0/0 = NaN"),
    _s(("weight_norm",), 0, "zero", "gradient", "nan", "norm_zero",
       "weight_norm's gradient v/‖v‖ is NaN where a weight row is all 0"),
    _s(("overflow",), 0, "overflow", "value", "inf", "overflow_low_precision",
       "the result exceeds the dtype's largest finite value (65504 in float16)"),
)

#: Library ops whose gradient a hand-written version makes NaN, but the library masks.
NOT_SINGULAR: Mapping[str, str] = {
    "linalg_vector_norm": "gradient 0 at the zero vector (torch masks it)",
    "norm": "gradient 0 at the zero vector (torch masks it)",
    "std": "gradient 0 on a constant slice (torch masks it)",
    "var": "gradient 0 on a constant slice",
    "cdist": "gradient 0 at identical rows (torch masks it)",
    "atan2": "gradient 0 at the origin in torch (NaN in some other frameworks)",
    "normalize": "F.normalize clamps ‖x‖ at eps: gradient finite (up to 1/eps)",
    "binary_cross_entropy": "torch clamps its logs at −100",
    "cross_entropy": "computed from log_softmax: finite for finite logits",
    "log_softmax": "finite for finite inputs",
    "softmax": "finite for finite inputs",
    "logsumexp": "finite for finite inputs",
}

_BY_OP: Dict[str, List[Singularity]] = {}
for _entry in TABLE:
    for _op in _entry.ops:
        _BY_OP.setdefault(_op, []).append(_entry)


def singularities(op: str, framework: Optional[str] = None) -> List[Singularity]:
    """The singular sets of the canonical op ``op`` (empty for an op that is finite everywhere);
    with ``framework``, without those that framework's op masks (torch's atan2 at the origin)."""
    return [s for s in _BY_OP.get(op, ()) if framework is None or framework not in s.masked_in]


def table_ops() -> FrozenSet[str]:
    """Every op name the table knows."""
    return frozenset(_BY_OP)


__all__ = ["CONDITIONS", "NOT_SINGULAR", "TABLE", "Condition", "Phase", "Singularity", "singularities",
           "table_ops"]
