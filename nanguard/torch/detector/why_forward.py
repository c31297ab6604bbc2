"""Which catalogued hazard made a forward op's NaN/Inf, decided from what the runtime knows.

Each rule is keyed by the op's base name and returns a `Said`: the hazard's key in
`nanguard.core.hazards`, the evidence template that states the counts, and the fields that
fill it. The words themselves are the catalogue's. `root_hazard` and `log_hazard` are shared
with the backward rules: the same facts name the same hazard in both phases.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from nanguard.core.dtypes import max_finite
from nanguard.torch.detector.evidence import (
    Evidence,
    Said,
    counts,
    counts_of_empty_groups,
    diagonal_zeros,
    exp_limit,
    fmt,
    gram_expansion,
    log_probabilities,
    node_base,
    producer,
    rows_all_neginf,
    sum_of_squares,
)

Rule = Callable[[Evidence], "Said | None"]
FORWARD: dict[str, Rule] = {}


def rule(table: dict[str, Rule], *names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            table[n] = fn
        return fn
    return register


# ------------------------------------------------------------------ shared classification
def root_hazard(t: torch.Tensor | None) -> tuple[str, dict]:
    """The hazard of a root (sqrt, ``** 0.5``) of ``t`` that is 0 or negative somewhere:
    a Gram-expansion distance (its zeros on a square matrix's diagonal, or a difference that
    takes in a matrix product), a norm (a sum of squares), or the plain root."""
    on_diagonal = diagonal_zeros(t)
    if on_diagonal or gram_expansion(t):
        return "distance_matrix", {"diagonal": on_diagonal or 0}
    if sum_of_squares(t):
        return "norm_zero", {}
    return "", {}


def log_hazard(t: torch.Tensor | None) -> str:
    """The hazard of log of exact zeros, by the op that made them."""
    node = producer(t)
    name = node_base(node) if node is not None else ""
    if name == "Softmax":
        return "log_softmax"
    if name == "Sigmoid":
        return "log_sigmoid"
    if name == "Rsub" and any(made_by_node(k, "Sigmoid") for k in _kids(node)):
        return "log_one_minus_sigmoid"
    if name in ("Sum", "Mean") and any(made_by_node(k, "Exp") for k in _kids(node)):
        return "logsumexp_overflow"
    return "log_zero"


def _kids(node) -> list:
    return [n for n, _ in getattr(node, "next_functions", ()) if n is not None]


def made_by_node(node, *names: str) -> bool:
    return node is not None and node_base(node) in names


# ------------------------------------------------------------------------------ roots
@rule(FORWARD, "sqrt")
def _sqrt(ev: Evidence) -> Said | None:
    s = ev.first()
    if s is None or not s.negative:
        return None
    key, extra = root_hazard(ev.first_tensor())
    if key == "distance_matrix":
        return Said(key, "forward", {**counts(s), **extra})
    return Said("sqrt_negative", "forward", counts(s))


@rule(FORWARD, "rsqrt")
def _rsqrt(ev: Evidence) -> Said | None:
    s = ev.first()
    return Said("negative_power_zero", "forward", counts(s)) if s is not None else None


@rule(FORWARD, "pow", "float_power")
def _pow(ev: Evidence) -> Said | None:
    s = ev.first()
    if s is None:
        return None
    p = ev.exponent()
    if p is not None and p < 0:
        return Said("negative_power_zero", "forward", counts(s))
    if (p is not None and p > 0 and float(p).is_integer()) or (p is None and ev.kind == "inf" and not s.zeros):
        # x ** 2 is finite at 0 and for negative x: only an overflow is left (an int exponent
        # is not among the float scalars, so p is None for it)
        return None
    return Said("fractional_power_zero", "forward", counts(s))


# ------------------------------------------------------------------------------- logs
@rule(FORWARD, "log", "log2", "log10")
def _log(ev: Evidence) -> Said | None:
    s = ev.first()
    if s is None or not (s.zeros or s.negative):
        return None
    if s.negative and (ev.kind == "nan" or not s.zeros):
        return Said("log_negative", "forward", counts(s))
    return Said(log_hazard(ev.first_tensor()), "forward", counts(s))


@rule(FORWARD, "log1p")
def _log1p(ev: Evidence) -> Said | None:
    s = ev.first()
    return Said("log1p_domain", "range", counts(s)) if s is not None else None


@rule(FORWARD, "exp", "expm1", "exp2")
def _exp(ev: Evidence) -> Said | None:
    s = ev.first()
    if s is None:
        return None
    dtype = ev.output_dtype()
    limit = exp_limit(dtype)
    t = ev.first_tensor()
    over: object = "?"
    if t is not None:
        with torch.no_grad():
            over = int((t > limit).sum())
    return Said("exp_overflow", "forward", {**counts(s), "over": over, "limit": f"{limit:.2f}", "dtype": dtype})


# --------------------------------------------------------------------------- division
@rule(FORWARD, "div", "true_divide", "reciprocal", "floor_divide")
def _div(ev: Evidence) -> Said | None:
    args = ev.args()
    if not args:
        return None
    den, den_t = args[-1]
    if ev.base == "reciprocal":
        return Said("div_zero", "reciprocal", counts(den))
    if len(args) == 1:
        return Said("div_zero", "scalar") if any(a.value == 0 for a in ev.scalars) else None
    num, num_t = args[0]
    if den.zeros == 0 and ev.kind == "nan":
        return Said("div_zero", "infinite")
    if ev.kind == "nan" and counts_of_empty_groups(num_t, den_t):
        return Said("mean_empty", "forward", counts(den))
    if ev.kind == "nan":
        return Said("div_zero", "zero_over_zero", {**counts(den), "num_zeros": num.zeros})
    return Said("div_zero", "x_over_zero", counts(den))


@rule(FORWARD, "addcdiv")
def _addcdiv(ev: Evidence) -> Said | None:
    den = next((s for s, _ in ev.inputs if s.name.startswith("tensor2")), None)
    return Said("div_zero", "addcdiv", counts(den)) if den is not None else None


@rule(FORWARD, "mean", "nanmean")
def _mean(ev: Evidence) -> Said | None:
    s = ev.first()
    return Said("mean_empty", "empty") if s is not None and s.numel == 0 else None


@rule(FORWARD, "nll_loss_forward", "nll_loss2d_forward")
def _nll_loss(ev: Evidence) -> Said | None:
    # outputs: (loss, total_weight); a total weight of 0 makes the mean 0/0
    if ev.kind != "nan" or len(ev.outputs) < 2:
        return None
    total_weight = ev.outputs[1]
    if total_weight.max is None or total_weight.max != 0 or total_weight.nan:
        return None
    target = next((s for s, _ in ev.inputs if s.name == "target"), None)
    return Said("loss_all_ignored", "forward", {"numel": target.numel if target is not None else "?"})


# ------------------------------------------------------------------- products, sums
@rule(FORWARD, "mul")
def _mul(ev: Evidence) -> Said | None:
    if ev.kind != "nan" or not any(s.zeros for s, _ in ev.inputs):
        return None
    infinite = [(s, t) for s, t in ev.inputs if s.posinf or s.neginf]
    if not infinite:
        return None
    s, t = infinite[0]
    if log_probabilities(s, t):
        return Said("xlogy_zero", "forward", counts(s))
    inf = sum(x.posinf + x.neginf for x, _ in ev.inputs)
    zeros = sum(x.zeros for x, _ in ev.inputs)
    return Said("zero_times_inf", "forward", {"inf": inf, "zeros": zeros})


@rule(FORWARD, "add", "sub", "rsub")
def _add(ev: Evidence) -> Said | None:
    pos = sum(s.posinf for s, _ in ev.inputs) + sum(1 for a in ev.scalars if a.value == math.inf)
    neg = sum(s.neginf for s, _ in ev.inputs) + sum(1 for a in ev.scalars if a.value == -math.inf)
    if ev.kind != "nan" or not (pos or neg):
        return None
    return Said("inf_minus_inf", "forward", {"posinf": pos, "neginf": neg})


# ---------------------------------------------------------------- softmax and masks
def _masked_rows(kind: str) -> Rule:
    key = "logsumexp_masked_row" if kind == "logsumexp" else "softmax_masked_row"
    names = {"op": kind, "fn": "nanguard.log_softmax" if kind == "log_softmax" else "nanguard.softmax"}

    def explain_rows(ev: Evidence) -> Said | None:
        rows = rows_all_neginf(ev.first_tensor(), ev.dim)
        s = ev.first()
        if rows is not None and rows[0]:
            return Said(key, "forward", {**names, "rows": rows[0], "total": rows[1]})
        if s is not None and s.neginf and key == "softmax_masked_row":
            return Said(key, "neginf", {**names, **counts(s)})
        if s is not None and (s.posinf or s.neginf):
            return Said("inf_minus_inf", "forward", counts(s))
        return None
    return explain_rows


FORWARD["softmax"] = _masked_rows("softmax")
FORWARD["log_softmax"] = _masked_rows("log_softmax")
FORWARD["logsumexp"] = _masked_rows("logsumexp")


@rule(FORWARD, "scaled_dot_product_attention", "multi_head_attention_forward")
def _attention(ev: Evidence) -> Said:
    return Said("softmax_masked_row", "attention")


# ------------------------------------------------------------------ trigonometry, stats
@rule(FORWARD, "acos", "asin")
def _acos(ev: Evidence) -> Said | None:
    s = ev.first()
    if s is None:
        return None
    peak = max(abs(s.min or 0), abs(s.max or 0))
    return Said(f"{ev.base}_domain", "forward", {"peak": fmt(peak)})


@rule(FORWARD, "atanh")
def _atanh(ev: Evidence) -> Said | None:
    s = ev.first()
    return Said("atanh_domain", "forward", counts(s)) if s is not None else None


@rule(FORWARD, "std", "var", "std_mean", "var_mean")
def _std(ev: Evidence) -> Said:
    t, s = ev.first_tensor(), ev.first()
    n = s.numel if s is not None else 0
    if t is not None and ev.dim is not None and t.dim() > 0:
        n = t.shape[ev.dim]
    return Said("std_degenerate", "forward", {"n": n, "s": "" if n == 1 else "s"})


def overflow(ev: Evidence) -> Said | None:
    """An op (matmul, sum, a cast...) whose result exceeds the dtype's range."""
    dtype = ev.output_dtype()
    limit = max_finite(dtype)
    if ev.kind != "inf" or limit is None:
        return None
    key = "overflow"
    if dtype == "float16":
        key = "overflow_mixed_precision" if ev.autocast else "overflow_low_precision"
    peak = max((max(abs(s.min or 0), abs(s.max or 0)) for s, _ in ev.inputs if s.min is not None), default=None)
    fields = {"dtype": dtype, "limit": f"{limit:.6g}", "peak": fmt(peak)}
    return Said(key, "forward" if peak is None else "peak", fields)


def diverged(ev: Evidence) -> Said | None:
    """Inputs so large that their squares overflow: training has diverged (a learning rate too
    large), whatever op it is that finally turns them into NaN/Inf (a layer norm's variance)."""
    best = None
    for s, _ in ev.inputs:
        limit = max_finite(s.dtype)
        # float16's range ends at 65504: ordinary activations overflow it (its own hazard)
        if limit is None or s.dtype == "float16" or s.min is None:
            continue
        peak = max(abs(s.min), abs(s.max or 0))
        if peak >= math.sqrt(limit) and (best is None or peak > best[1]):
            best = (s, peak, limit)
    if best is None:
        return None
    s, peak, limit = best
    fields = {"name": s.name, "peak": fmt(peak), "limit": fmt(math.sqrt(limit)), "dtype": s.dtype}
    weights = [max(abs(w.min), abs(w.max or 0)) for w, _ in ev.inputs
               if w is not s and w.min is not None and "weight" in w.name]
    if weights and max(weights) >= 1e4:
        return Said("diverged_scale", "weights", {**fields, "max": fmt(max(weights))})
    return Said("diverged_scale", "forward", fields)


def nan_input(ev: Evidence) -> Said:
    bad = [s for s, _ in ev.inputs if s.nan]
    return Said("nan_input", "forward", counts(bad[0])) if bad else Said("nan_input")


__all__ = ["FORWARD", "Rule", "diverged", "log_hazard", "nan_input", "overflow", "root_hazard", "rule"]
