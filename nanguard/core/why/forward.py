"""Which catalogued hazard made a forward op's NaN/Inf, decided from the finding's facts.

Each rule is keyed by the op's canonical name and returns a `Said` (or None: not this
rule's hazard, `overflow` and `diverged` may still speak). The words themselves are the
catalogue's.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

from nanguard.core.dtypes import exp_limit, limits, max_finite
from nanguard.core.hazard import nanguard_op
from nanguard.core.why.facts import Facts, Said, counts, fmt, peak
from nanguard.core.why.registry import FORWARD, Rule, rule

ACOS = ("acos", "arccos")
ASIN = ("asin", "arcsin")
DIVISIONS = ("div", "true_divide", "divide", "floor_divide", "reciprocal")
EXPS = ("exp", "exp2", "expm1")
LOGS = ("log", "log2", "log10")
MEANS = ("mean", "nanmean", "average")
POWERS = ("pow", "integer_pow", "power", "float_power", "cbrt")
STATS = ("std", "var", "std_mean", "var_mean", "nanstd", "nanvar")


# ------------------------------------------------------------------------------ roots
@rule(FORWARD, "sqrt")
def _sqrt(f: Facts) -> Optional[Said]:
    s = f.first()
    if s is None or not s.negative:
        return None
    key, extra = f.probe.root()
    if key == "distance_matrix":
        return Said(key, "forward", {**counts(s), **extra})
    return Said("sqrt_negative", "forward", counts(s))


@rule(FORWARD, "rsqrt")
def _rsqrt(f: Facts) -> Optional[Said]:
    s = f.first()
    return Said("negative_power_zero", "forward", counts(s)) if s is not None else None


@rule(FORWARD, *POWERS)
def _pow(f: Facts) -> Optional[Said]:
    s = f.first()
    if s is None:
        return None
    p = f.exponent
    fields = {**counts(s), "p": "?" if p is None else f"{p:g}"}
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", fields)
    if (p is not None and p > 0 and float(p).is_integer()) or (p is None and f.kind == "inf" and not s.zeros):
        # x ** 2 is finite at 0 and for negative x: only an overflow is left
        return None
    return Said("fractional_power_zero", "forward", fields)


# ------------------------------------------------------------------------------- logs
@rule(FORWARD, *LOGS)
def _log(f: Facts) -> Optional[Said]:
    s = f.first()
    if s is None or not (s.zeros or s.negative):
        return None
    if s.negative and (f.kind == "nan" or not s.zeros):
        return Said("log_negative", "forward", counts(s))
    return Said(f.probe.log_source(), "forward", counts(s))


@rule(FORWARD, "log1p")
def _log1p(f: Facts) -> Optional[Said]:
    s = f.first()
    return Said("log1p_domain", "range", counts(s)) if s is not None else None


@rule(FORWARD, *EXPS)
def _exp(f: Facts) -> Optional[Said]:
    s = f.first()
    if s is None:
        return None
    dtype = f.dtype()
    limit = exp_limit(dtype)
    over = f.probe.above(limit)
    return Said("exp_overflow", "forward", {**counts(s), "over": "some" if over is None else over,
                                            "limit": f"{limit:.2f}", "dtype": dtype})


# --------------------------------------------------------------------------- division
@rule(FORWARD, *DIVISIONS)
def _div(f: Facts) -> Optional[Said]:
    args = f.args()
    if f.op == "reciprocal" and args:
        return Said("div_zero", "reciprocal", counts(args[-1]))
    if len(args) < 2:
        return Said("div_zero", "scalar") if 0.0 in f.scalars else None
    num, den = args[0], args[-1]
    if den.zeros == 0 and f.kind == "nan":
        return Said("div_zero", "infinite")
    if f.kind == "nan" and f.probe.empty_groups():
        return Said("mean_empty", "forward", counts(den))
    if f.kind == "nan":
        return Said("div_zero", "zero_over_zero", {**counts(den), "num_zeros": num.zeros})
    return Said("div_zero", "x_over_zero", counts(den))


@rule(FORWARD, *MEANS)
def _mean(f: Facts) -> Optional[Said]:
    if len(f.inputs) >= 2 and f.inputs[-1].dtype.startswith(("float", "bfloat")):
        # a mean written as sum / count (JAX's jnp.mean); TensorFlow's Mean takes integer axes
        return Said("mean_empty", "forward", counts(f.inputs[-1])) if f.inputs[-1].zeros else _div(f)
    s = f.first()
    if s is not None and s.numel == 0:
        return Said("mean_empty", "empty", counts(s))
    # values not read: a NaN mean is most often one over nothing
    return Said("mean_empty") if f.kind == "nan" and (s is None or not s.counted) else None


@rule(FORWARD, "addcdiv")
def _addcdiv(f: Facts) -> Optional[Said]:
    den = next((s for s in f.inputs if s.name.startswith("tensor2")), None)
    return Said("div_zero", "addcdiv", counts(den)) if den is not None else None


@rule(FORWARD, "nll_loss_forward", "nll_loss2d_forward")
def _nll_loss(f: Facts) -> Optional[Said]:
    # outputs: (loss, total_weight); a total weight of 0 makes the mean 0/0
    if f.kind != "nan" or len(f.outputs) < 2:
        return None
    total_weight = f.outputs[1]
    if total_weight.max is None or total_weight.max != 0 or total_weight.nan:
        return None
    target = next((s for s in f.inputs if s.name == "target"), None)
    return Said("loss_all_ignored", "forward", {"numel": target.numel if target is not None else "?"})


# ------------------------------------------------------------------- products, sums
@rule(FORWARD, "mul", "multiply")
def zero_times_inf(f: Facts) -> Optional[Said]:
    """0 · ±inf among the (forward) factors; in a backward finding, the gradient met it."""
    args = f.args()
    if f.kind != "nan" or not any(s.zeros for s in args):
        return None
    infinite = [i for i, s in enumerate(args) if s.posinf or s.neginf]
    if not infinite:
        return None
    s = args[infinite[0]]
    # a factor that is −inf where it is not finite and ≤ 0 elsewhere: the log of probabilities
    if f.probe.log_factor(infinite[0]) or (s.neginf and not s.posinf and not s.nan and (s.max is None or s.max <= 0)):
        return Said("xlogy_zero", "forward", counts(s))
    inf = sum(x.posinf + x.neginf for x in args)
    zeros = sum(x.zeros for x in args)
    return Said("zero_times_inf", "forward", {"inf": inf, "zeros": zeros})


@rule(FORWARD, "add", "sub", "rsub", "add_any", "subtract")
def inf_minus_inf(f: Facts) -> Optional[Said]:
    """+inf and −inf met in a sum (or a difference) of the (forward) operands."""
    args = f.args()
    pos = sum(s.posinf for s in args) + sum(1 for v in f.scalars if v == math.inf)
    neg = sum(s.neginf for s in args) + sum(1 for v in f.scalars if v == -math.inf)
    if f.kind != "nan" or not (pos or neg):
        return None
    return Said("inf_minus_inf", "forward", {"posinf": pos, "neginf": neg})


# ---------------------------------------------------------------- softmax and masks
def masked_names(kind: str, framework: str) -> Dict[str, str]:
    """The fields naming a softmax-like op and its safe replacement in ``framework``."""
    return {"op": kind, "fn": nanguard_op("log_softmax" if kind == "log_softmax" else "softmax")[framework]}


def masked_key(kind: str) -> str:
    return "logsumexp_masked_row" if kind == "logsumexp" else "softmax_masked_row"


def _masked_rows(kind: str) -> Rule:
    key = masked_key(kind)

    def explain_rows(f: Facts) -> Optional[Said]:
        names = masked_names(kind, f.framework)
        rows = f.probe.masked_rows()
        if rows is not None and rows[0]:
            return Said(key, "forward", {**names, "rows": rows[0], "total": rows[1]})
        s = f.first()
        if s is not None and s.neginf and key == "softmax_masked_row":
            return Said(key, "neginf", {**names, **counts(s)})
        if s is not None and (s.posinf or s.neginf):
            return Said("inf_minus_inf", "forward", counts(s))
        return None
    return explain_rows


for _kind in ("softmax", "log_softmax", "logsumexp"):
    FORWARD[_kind] = _masked_rows(_kind)


@rule(FORWARD, "scaled_dot_product_attention", "multi_head_attention_forward")
def _attention(f: Facts) -> Said:
    return Said("softmax_masked_row", "attention")


# ------------------------------------------------------------------ trigonometry, stats
@rule(FORWARD, *ACOS, *ASIN)
def _acos(f: Facts) -> Optional[Said]:
    s = f.first()
    top = peak(s)
    if s is None or (top is not None and top < 1):
        return None
    return Said(f"{'acos' if f.op in ACOS else 'asin'}_domain", "forward", {"peak": fmt(top)})


@rule(FORWARD, "atanh", "arctanh")
def _atanh(f: Facts) -> Optional[Said]:
    s = f.first()
    return Said("atanh_domain", "forward", counts(s)) if s is not None else None


@rule(FORWARD, *STATS)
def _std(f: Facts) -> Said:
    n = f.probe.reduced_count()
    if n is None:
        s = f.first()
        n = s.numel if s is not None else 0
    return Said("std_degenerate", "forward", {"n": n, "s": "" if n == 1 else "s"})


# --------------------------------------------------------------- any op, by its values
def overflow(f: Facts) -> Optional[Said]:
    """An op (matmul, sum, a cast...) whose result exceeds the dtype's range."""
    dtype = f.dtype()
    found = limits(dtype)
    if f.kind != "inf" or found is None:
        return None
    key = "overflow"  # bfloat16 has float32's range: beyond it, values have diverged
    if dtype == "float16":
        key = "overflow_mixed_precision" if f.mixed else "overflow_low_precision"
    top = max((p for p in map(peak, f.inputs) if p is not None), default=None)
    fields = {"dtype": dtype, "limit": found.max_text, "peak": fmt(top)}
    return Said(key, "forward" if top is None else "peak", fields)


def diverged(f: Facts) -> Optional[Said]:
    """Inputs so large that their squares overflow: training has diverged (a learning rate too
    large), whatever op it is that finally turns them into NaN/Inf (a layer norm's variance)."""
    best = None
    for s in f.inputs:
        limit = max_finite(s.dtype)
        top = peak(s)
        # float16's range ends at 65504: ordinary activations overflow it (its own hazard)
        if limit is None or s.dtype == "float16" or top is None:
            continue
        if top >= math.sqrt(limit) and (best is None or top > best[1]):
            best = (s, top, limit)
    if best is None:
        return None
    s, top, limit = best
    fields = {"name": s.name, "peak": fmt(top), "limit": fmt(math.sqrt(limit)), "dtype": s.dtype}
    weights = [p for w in f.inputs if w is not s and "weight" in w.name for p in (peak(w),) if p is not None]
    if weights and max(weights) >= 1e4:
        return Said("diverged_scale", "weights", {**fields, "max": fmt(max(weights))})
    return Said("diverged_scale", "forward", fields)


def nan_input(f: Facts) -> Said:
    """A NaN that was already in an input when the op consumed it."""
    bad = [s for s in f.inputs if s.nan]
    return Said("nan_input", "forward", counts(bad[0])) if bad else Said("nan_input")


__all__ = ["ACOS", "ASIN", "DIVISIONS", "EXPS", "LOGS", "MEANS", "POWERS", "STATS", "diverged", "inf_minus_inf", "masked_key",
           "masked_names", "nan_input", "overflow",
           "zero_times_inf"]
