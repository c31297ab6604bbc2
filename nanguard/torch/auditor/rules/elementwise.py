"""Rules for elementwise functions of one tensor: exponentials and logs, roots, activations,
trigonometry, clamps (arithmetic between tensors: `arithmetic`).

Monotone functions map the bounds (an increasing ``f`` sends ``[lo, hi]`` to
``[f(lo), f(hi)]``); functions with a single minimum (``abs``, ``gelu``, ``silu``, even
powers) take it where it lies inside the box; domains are clipped first (``log`` of
``[-1, 4]`` is bounded as ``log`` of ``[tiny, 4]``: the NaN itself is a finding of the
checks). Bounds broadcast, so a uniform box stays 0-dim.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional

import torch

from nanguard.torch.auditor.interval import F64, INF, Box, dtype_tiny
from nanguard.torch.auditor.rules import Ctx, rule

_PI = math.pi


def _unary(ctx: Ctx, f: Callable[[torch.Tensor], torch.Tensor], increasing: bool = True,
           domain: tuple = (-INF, INF)) -> Box:
    x = ctx.in_box(0)
    lo = x.lo.clamp(domain[0], domain[1])
    hi = x.hi.clamp(domain[0], domain[1])
    flo, fhi = f(lo), f(hi)
    if not increasing:
        flo, fhi = fhi, flo
    return ctx.out_box(flo, fhi)


_EXP_PREIMAGE = {"exp": math.log, "expm1": math.log, "exp2": math.log2, "sinh": lambda m: math.log(2 * m),
                 "cosh": lambda m: math.log(2 * m)}


def exp_limit(base: str, dtype: torch.dtype) -> Optional[float]:
    """The largest input whose result the dtype still holds (log(max) for exp), or None."""
    f = _EXP_PREIMAGE.get(base)
    if f is None or not dtype.is_floating_point:
        return None
    return f(float(torch.finfo(dtype).max)) * (1 - 1e-7)


def unimodal(ctx: Ctx, f: Callable[[torch.Tensor], torch.Tensor], at: float, value: float) -> Box:
    """``f`` decreasing up to ``at`` (where it is ``value``), increasing after."""
    x = ctx.in_box(0)
    flo, fhi = f(x.lo), f(x.hi)
    inside = (x.lo <= at) & (x.hi >= at)
    lo = torch.where(inside, torch.tensor(value, dtype=F64), torch.minimum(flo, fhi))
    hi = torch.maximum(flo, fhi)
    return ctx.out_box(lo, hi)


def _scalars(ctx: Ctx) -> List[Any]:
    return list(ctx.rec.args[1:])


def _aten(ctx: Ctx) -> Callable[..., torch.Tensor]:
    """The op itself, called on float64 bounds with the recorded non-tensor arguments."""
    func = ctx.analysis.functional(ctx.rec)
    rest = _scalars(ctx)
    kwargs = dict(ctx.rec.kwargs)
    return lambda t: func(t, *rest, **kwargs)


# ------------------------------------------------------------------ monotone increasing
@rule("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sigmoid", "tanh", "atan", "asinh", "erf",
      "relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh", "hardsigmoid", "softplus", "sinh",
      "floor", "ceil", "round", "trunc", "sign", "sgn", "asin", "atanh", "erfinv", "logit", "softsign",
      "log_sigmoid", "digamma", "rrelu", "_log_sigmoid")
def increasing(ctx: Ctx) -> Box:
    base = ctx.rec.base
    dt = ctx.out(0).dtype
    tiny = dtype_tiny(dt) if dt.is_floating_point else 0.0
    domains = {"log": (0.0, INF), "log2": (0.0, INF), "log10": (0.0, INF), "log1p": (-1.0, INF),
               "sqrt": (0.0, INF), "asin": (-1.0, 1.0), "atanh": (-1.0, 1.0), "erfinv": (-1.0, 1.0),
               "logit": (0.0, 1.0), "digamma": (tiny, INF)}
    limit = exp_limit(base, dt)
    if limit is not None:
        domains[base] = (-INF, limit)
    if base == "logit" and (len(ctx.rec.args) > 1 and ctx.rec.args[1] is not None or ctx.kw("eps") is not None):
        eps = ctx.rec.args[1] if len(ctx.rec.args) > 1 else ctx.kw("eps")
        domains["logit"] = (float(eps), 1 - float(eps))
    if base == "leaky_relu":
        slope = ctx.rec.args[1] if len(ctx.rec.args) > 1 else ctx.kw("negative_slope", 0.01)
        if float(slope) < 0:
            return ctx.top()
    f = _aten(ctx) if base not in ("log_sigmoid",) else torch.nn.functional.logsigmoid
    return _unary(ctx, f, True, domains.get(base, (-INF, INF)))


@rule("log_sigmoid_forward")
def log_sigmoid_forward(ctx: Ctx) -> List[Optional[Box]]:
    out = _unary(ctx, torch.nn.functional.logsigmoid)
    return [out] + [ctx.top(k) if n is not None else None for k, n in enumerate(ctx.outputs) if k > 0]


# ------------------------------------------------------------------ monotone decreasing
@rule("neg", "negative", "acos", "rsqrt", "erfc", "exp_neg")
def decreasing(ctx: Ctx) -> Box:
    base = ctx.rec.base
    dt = ctx.out(0).dtype
    domains = {"acos": (-1.0, 1.0), "rsqrt": (dtype_tiny(dt) if dt.is_floating_point else 0.0, INF)}
    return _unary(ctx, _aten(ctx), False, domains.get(base, (-INF, INF)))


# ------------------------------------------------------------------ one minimum
@rule("abs", "absolute")
def absolute(ctx: Ctx) -> Box:
    return unimodal(ctx, torch.abs, 0.0, 0.0)


@rule("square")
def square(ctx: Ctx) -> Box:
    return unimodal(ctx, torch.square, 0.0, 0.0)


@rule("cosh")
def cosh(ctx: Ctx) -> Box:
    limit = exp_limit("cosh", ctx.out(0).dtype) or INF
    return unimodal(ctx, lambda t: torch.cosh(t.clamp(-limit, limit)), 0.0, 1.0)


@rule("gelu")
def gelu(ctx: Ctx) -> Box:
    f = _aten(ctx)
    return unimodal(ctx, f, -0.7517916, float(f(torch.tensor(-0.7517916, dtype=F64))) - 1e-7)


@rule("silu")
def silu(ctx: Ctx) -> Box:
    return unimodal(ctx, torch.nn.functional.silu, -1.2784645, -0.2784645 - 1e-7)


@rule("mish")
def mish(ctx: Ctx) -> Box:
    return unimodal(ctx, torch.nn.functional.mish, -1.1924, -0.30884 - 1e-5)


@rule("hardswish")
def hardswish(ctx: Ctx) -> Box:
    return unimodal(ctx, torch.nn.functional.hardswish, -1.5, -0.375)


@rule("threshold")
def threshold(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    th, value = float(ctx.arg(1)), float(ctx.arg(2))
    lo = torch.where(x.hi > th, torch.minimum(torch.maximum(x.lo, torch.tensor(th, dtype=F64)),
                                              torch.tensor(value, dtype=F64)), torch.tensor(value, dtype=F64))
    hi = torch.where(x.hi > th, torch.maximum(x.hi, torch.tensor(value, dtype=F64)), torch.tensor(value, dtype=F64))
    return ctx.out_box(lo, hi)


# ------------------------------------------------------------------ periodic
def _periodic(x: Box, f: Callable[[torch.Tensor], torch.Tensor], peak: float) -> tuple:
    """Bounds of sin-like ``f`` (maximum 1 at ``peak + 2πk``, minimum −1 at ``peak + π + 2πk``)."""
    lo, hi = x.lo, x.hi
    wide = ~torch.isfinite(hi - lo) | (hi - lo >= 2 * _PI)
    lo_s, hi_s = torch.nan_to_num(lo, neginf=0.0, posinf=0.0), torch.nan_to_num(hi, neginf=0.0, posinf=0.0)
    has_max = torch.ceil((lo_s - peak) / (2 * _PI)) <= torch.floor((hi_s - peak) / (2 * _PI))
    has_min = torch.ceil((lo_s - peak - _PI) / (2 * _PI)) <= torch.floor((hi_s - peak - _PI) / (2 * _PI))
    flo, fhi = f(lo_s), f(hi_s)
    out_hi = torch.where(wide | has_max, torch.tensor(1.0, dtype=F64), torch.maximum(flo, fhi))
    out_lo = torch.where(wide | has_min, torch.tensor(-1.0, dtype=F64), torch.minimum(flo, fhi))
    return out_lo, out_hi


@rule("sin")
def sin(ctx: Ctx) -> Box:
    lo, hi = _periodic(ctx.in_box(0), torch.sin, _PI / 2)
    return ctx.out_box(lo, hi)


@rule("cos")
def cos(ctx: Ctx) -> Box:
    lo, hi = _periodic(ctx.in_box(0), torch.cos, 0.0)
    return ctx.out_box(lo, hi)


@rule("frac")
def frac(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    lo = torch.where(x.lo >= 0, torch.tensor(0.0, dtype=F64), torch.tensor(-1.0, dtype=F64))
    hi = torch.where(x.hi <= 0, torch.tensor(0.0, dtype=F64), torch.tensor(1.0, dtype=F64))
    return ctx.out_box(lo, hi)


@rule("atan2", "arctan2")
def atan2(ctx: Ctx) -> Box:
    return ctx.out_box(-_PI, _PI)


@rule("lgamma")
def lgamma(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    positive = x.lo > 0
    f = torch.lgamma
    lo = torch.where(positive & (x.hi >= 1.4616321) & (x.lo <= 1.4616321), torch.tensor(-0.1214863, dtype=F64),
                     torch.minimum(f(x.lo.clamp(min=1e-300)), f(x.hi.clamp(min=1e-300))))
    lo = torch.where(positive, lo, torch.tensor(-INF, dtype=F64))
    hi = torch.where(positive, torch.maximum(f(x.lo.clamp(min=1e-300)), f(x.hi.clamp(min=1e-300))),
                     torch.tensor(INF, dtype=F64))
    return ctx.out_box(lo, hi)


# ------------------------------------------------------------------ clamps and extrema
def _opt_box(ctx: Ctx, x: Any) -> Optional[Box]:
    return None if x is None else ctx.box(x)


@rule("clamp", "clip", "clamp_min", "clamp_max")
def clamp(ctx: Ctx) -> Box:
    base = ctx.rec.base
    x = ctx.in_box(0)
    if base == "clamp_min":
        lo_b, hi_b = _opt_box(ctx, ctx.arg(1, name="min")), None
    elif base == "clamp_max":
        lo_b, hi_b = None, _opt_box(ctx, ctx.arg(1, name="max"))
    else:
        lo_b, hi_b = _opt_box(ctx, ctx.arg(1, name="min")), _opt_box(ctx, ctx.arg(2, name="max"))
    lo, hi = x.lo, x.hi
    nonzero = False
    if lo_b is not None:
        lo, hi = torch.maximum(lo, lo_b.lo), torch.maximum(hi, lo_b.lo)
        nonzero = bool((lo_b.lo > 0).all())
    if hi_b is not None:
        lo, hi = torch.minimum(lo, hi_b.hi), torch.minimum(hi, hi_b.hi)
        nonzero = nonzero and bool((hi_b.lo > 0).all())
    return ctx.out_box(lo, hi, nonzero=nonzero)


@rule("maximum", "minimum", "fmax", "fmin", "max_other", "min_other")
def extremum(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    f = torch.maximum if ctx.rec.base in ("maximum", "fmax") else torch.minimum
    return ctx.out_box(f(a.lo, b.lo), f(a.hi, b.hi))


@rule("nan_to_num")
def nan_to_num(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    dt = ctx.out(0).dtype
    big = float(torch.finfo(dt).max) if dt.is_floating_point else INF
    posinf = ctx.arg(2, name="posinf")
    neginf = ctx.arg(3, name="neginf")
    pos = big if posinf is None else float(posinf)
    neg = -big if neginf is None else float(neginf)
    lo = torch.where(x.lo == -INF, torch.tensor(neg, dtype=F64), torch.where(x.lo == INF, pos, x.lo))
    hi = torch.where(x.hi == INF, torch.tensor(pos, dtype=F64), torch.where(x.hi == -INF, neg, x.hi))
    return ctx.out_box(lo, hi)


__all__ = ["exp_limit", "unimodal"]
