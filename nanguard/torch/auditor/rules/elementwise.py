"""Rules for elementwise maths: arithmetic, exponentials and logs, roots, activations.

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

from nanguard.torch.auditor.interval import F64, INF, Box, dtype_tiny, mul_bounds, rebig, unbig
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


def _unimodal(ctx: Ctx, f: Callable[[torch.Tensor], torch.Tensor], at: float, value: float) -> Box:
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


@rule("reciprocal")
def reciprocal(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    return _divide(ctx, Box.of(1.0, 1.0, (), x.dtype), x)


# ------------------------------------------------------------------ one minimum
@rule("abs", "absolute")
def absolute(ctx: Ctx) -> Box:
    return _unimodal(ctx, torch.abs, 0.0, 0.0)


@rule("square")
def square(ctx: Ctx) -> Box:
    return _unimodal(ctx, torch.square, 0.0, 0.0)


@rule("cosh")
def cosh(ctx: Ctx) -> Box:
    limit = exp_limit("cosh", ctx.out(0).dtype) or INF
    return _unimodal(ctx, lambda t: torch.cosh(t.clamp(-limit, limit)), 0.0, 1.0)


@rule("gelu")
def gelu(ctx: Ctx) -> Box:
    f = _aten(ctx)
    return _unimodal(ctx, f, -0.7517916, float(f(torch.tensor(-0.7517916, dtype=F64))) - 1e-7)


@rule("silu")
def silu(ctx: Ctx) -> Box:
    return _unimodal(ctx, torch.nn.functional.silu, -1.2784645, -0.2784645 - 1e-7)


@rule("mish")
def mish(ctx: Ctx) -> Box:
    return _unimodal(ctx, torch.nn.functional.mish, -1.1924, -0.30884 - 1e-5)


@rule("hardswish")
def hardswish(ctx: Ctx) -> Box:
    return _unimodal(ctx, torch.nn.functional.hardswish, -1.5, -0.375)


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


# ------------------------------------------------------------------ arithmetic
def _scaled(b: Box, alpha: float) -> tuple:
    if alpha >= 0:
        return unbig(b.lo) * alpha, unbig(b.hi) * alpha
    return unbig(b.hi) * alpha, unbig(b.lo) * alpha


@rule("add")
def add(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    alpha = float(ctx.arg(2, 1, name="alpha"))
    blo, bhi = _scaled(b, alpha)
    lo, hi = rebig(unbig(a.lo) + blo, -INF), rebig(unbig(a.hi) + bhi, INF)
    lo, hi = _keep_points(a, b, alpha, lo, hi)
    return ctx.out_box(lo, hi, nonzero=_sum_nonzero(a, b, alpha))


def _sum_nonzero(a: Box, b: Box, alpha: float) -> bool:
    """A sum of two same-sign boxes, one of them excluding 0 (``x² + eps``), is never 0."""
    if alpha <= 0:
        return False
    pos = bool(((a.lo >= 0) & (b.lo >= 0) & ((a.lo > 0) | (b.lo > 0))).all())
    neg = bool(((a.hi <= 0) & (b.hi <= 0) & ((a.hi < 0) | (b.hi < 0))).all())
    return pos or neg


def _keep_points(a: Box, b: Box, alpha: float, lo: torch.Tensor, hi: torch.Tensor) -> tuple:
    """A real ±inf plus anything finite stays that infinity (unbig would lose it)."""
    pa, pb = a.point_inf(), b.point_inf()
    if not (bool(pa.any()) or bool(pb.any())):
        return lo, hi
    va = torch.where(pa, a.lo, torch.tensor(0.0, dtype=F64))
    vb = torch.where(pb, b.lo * (1 if alpha >= 0 else -1), torch.tensor(0.0, dtype=F64))
    v = va + vb   # inf + (-inf) = NaN: a finding of the checks; unbounded here
    point = pa | pb
    lo = torch.where(point & ~torch.isnan(v), v, lo)
    hi = torch.where(point & ~torch.isnan(v), v, hi)
    return lo, hi


@rule("sub", "subtract")
def sub(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    alpha = float(ctx.arg(2, 1, name="alpha"))
    blo, bhi = _scaled(b, -alpha)
    lo, hi = rebig(unbig(a.lo) + blo, -INF), rebig(unbig(a.hi) + bhi, INF)
    lo, hi = _keep_points(a, b, -alpha, lo, hi)
    if ctx.analysis.max_subtracted(ctx.rec):
        hi = torch.minimum(hi, torch.tensor(0.0, dtype=F64))
        lo = torch.minimum(lo, hi)
    return ctx.out_box(lo, hi, nonzero=_sum_nonzero(a, Box(-b.hi, -b.lo, b.shape, b.dtype), alpha))


@rule("rsub")
def rsub(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    alpha = float(ctx.arg(2, 1, name="alpha"))
    alo, ahi = _scaled(a, -alpha)
    lo, hi = rebig(unbig(b.lo) + alo, -INF), rebig(unbig(b.hi) + ahi, INF)
    lo, hi = _keep_points(b, a, -alpha, lo, hi)
    return ctx.out_box(lo, hi)


@rule("mul", "multiply")
def mul(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    if ctx.analysis.same_value(ctx.rec.args[0], ctx.rec.args[1]):
        return _unimodal(ctx, torch.square, 0.0, 0.0)
    lo, hi = mul_bounds(a.lo, a.hi, b.lo, b.hi)
    return ctx.out_box(lo, hi, nonzero=a.nonzero and b.nonzero and not bool(a.contains_zero().any())
                       and not bool(b.contains_zero().any()))


def _divide(ctx: Ctx, a: Box, b: Box) -> Box:
    """a / b where ``b`` cannot be 0 (else unbounded: the zero divisor is the checks' finding)."""
    positive, negative = b.lo > 0, b.hi < 0
    one_sign = positive | negative
    inv_lo = torch.where(one_sign, 1.0 / torch.where(one_sign, b.hi, 1.0), torch.tensor(-INF, dtype=F64))
    inv_hi = torch.where(one_sign, 1.0 / torch.where(one_sign, b.lo, 1.0), torch.tensor(INF, dtype=F64))
    # a point ±inf divisor gives 0 (1/inf); an unbounded one-sign divisor reaches 0 too
    inv_lo = torch.where(one_sign & torch.isinf(b.hi) & positive, torch.tensor(0.0, dtype=F64), inv_lo)
    inv_hi = torch.where(one_sign & torch.isinf(b.lo) & negative, torch.tensor(0.0, dtype=F64), inv_hi)
    lo, hi = mul_bounds(a.lo, a.hi, inv_lo, inv_hi)
    lo = torch.where(one_sign, lo, torch.tensor(-INF, dtype=F64))
    hi = torch.where(one_sign, hi, torch.tensor(INF, dtype=F64))
    mode = ctx.kw("rounding_mode")
    if mode == "floor":
        lo, hi = torch.floor(lo), torch.floor(hi)
    elif mode == "trunc":
        lo, hi = torch.trunc(lo), torch.trunc(hi)
    return ctx.out_box(lo, hi)


@rule("div", "true_divide", "divide")
def div(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    return _divide(ctx, a, b)


@rule("floor_divide")
def floor_divide(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    out = _divide(ctx, a, b)
    return ctx.out_box(torch.floor(out.lo), torch.floor(out.hi))


@rule("remainder", "fmod")
def remainder(ctx: Ctx) -> Box:
    b = ctx.box(ctx.arg(1))
    assert b is not None
    m = float(torch.maximum(b.lo.abs(), b.hi.abs()).max())
    return ctx.out_box(-m, m)


@rule("pow", "float_power")
def power(ctx: Ctx) -> Box:
    base_arg, exp_arg = ctx.arg(0), ctx.arg(1)
    if isinstance(base_arg, (int, float)):     # c ** x
        x = ctx.in_box(1)
        c = float(base_arg)
        if c <= 0:
            return ctx.top()
        f = lambda t: torch.pow(torch.tensor(c, dtype=F64), t)  # noqa: E731
        return _unary_on(ctx, x, f, increasing=c >= 1)
    e = ctx.box(exp_arg)
    x = ctx.in_box(0)
    if e is None or e.exact is None and not (e.uniform and float(e.lo) == float(e.hi)):
        return ctx.top()
    if e.exact is not None and e.exact.numel() != 1:
        return ctx.top()
    p = float(e.lo) if e.exact is None else float(e.exact.reshape(-1)[0])
    return _pow_scalar(ctx, x, p)


def _unary_on(ctx: Ctx, x: Box, f: Callable[[torch.Tensor], torch.Tensor], increasing: bool) -> Box:
    a, b = f(x.lo), f(x.hi)
    return ctx.out_box(a, b) if increasing else ctx.out_box(b, a)


def _pow_scalar(ctx: Ctx, x: Box, p: float) -> Box:
    if p == 0:
        return ctx.out_box(1.0, 1.0)
    if p == int(p):
        k = int(p)
        f = lambda t: torch.pow(t, k)  # noqa: E731
        if k > 0 and k % 2 == 0:
            return _unimodal_box(ctx, x, f)
        if k > 0:
            return ctx.out_box(f(x.lo), f(x.hi))
        # negative integer powers: like a division, unbounded where x can be 0
        one_sign = (x.lo > 0) | (x.hi < 0)
        a, b = f(torch.where(one_sign, x.lo, 1.0)), f(torch.where(one_sign, x.hi, 1.0))
        lo = torch.where(one_sign, torch.minimum(a, b), torch.tensor(-INF, dtype=F64))
        hi = torch.where(one_sign, torch.maximum(a, b), torch.tensor(INF, dtype=F64))
        if k % 2 == 0:
            lo = torch.where(one_sign, lo, torch.tensor(0.0, dtype=F64))
            lo = torch.where(one_sign & (torch.isinf(x.lo) | torch.isinf(x.hi)), torch.tensor(0.0, dtype=F64), lo)
        return ctx.out_box(lo, hi)
    # fractional: defined for x >= 0 (x > 0 when p < 0)
    dt = ctx.out(0).dtype
    floor = 0.0 if p > 0 else (dtype_tiny(dt) if dt.is_floating_point else 0.0)
    lo, hi = x.lo.clamp(min=floor), x.hi.clamp(min=floor)
    a, b = torch.pow(lo, p), torch.pow(hi, p)
    return ctx.out_box(a, b) if p > 0 else ctx.out_box(b, a)


def _unimodal_box(ctx: Ctx, x: Box, f: Callable[[torch.Tensor], torch.Tensor]) -> Box:
    flo, fhi = f(x.lo), f(x.hi)
    inside = (x.lo <= 0) & (x.hi >= 0)
    lo = torch.where(inside, torch.tensor(0.0, dtype=F64), torch.minimum(flo, fhi))
    return ctx.out_box(lo, torch.maximum(flo, fhi))


@rule("xlogy", "special_xlogy")
def xlogy(ctx: Ctx) -> Box:
    x, y = ctx.box(ctx.arg(0)), ctx.box(ctx.arg(1))
    assert x is not None and y is not None
    ylo, yhi = y.lo.clamp(min=0.0), y.hi.clamp(min=0.0)
    lo, hi = mul_bounds(x.lo, x.hi, torch.log(ylo), torch.log(yhi))
    return ctx.out_box(lo, hi)


@rule("logaddexp", "logaddexp2")
def logaddexp(ctx: Ctx) -> Box:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    f = torch.logaddexp if ctx.rec.base == "logaddexp" else torch.logaddexp2
    return ctx.out_box(f(a.lo, b.lo), f(a.hi, b.hi))


@rule("lerp")
def lerp(ctx: Ctx) -> Box:
    a, b, w = ctx.in_box(0), ctx.box(ctx.arg(1)), ctx.box(ctx.arg(2))
    assert b is not None and w is not None
    dlo, dhi = rebig(unbig(b.lo) - unbig(a.hi), -INF), rebig(unbig(b.hi) - unbig(a.lo), INF)
    plo, phi = mul_bounds(w.lo, w.hi, dlo, dhi)
    return ctx.out_box(rebig(unbig(a.lo) + unbig(plo), -INF), rebig(unbig(a.hi) + unbig(phi), INF))


@rule("addcmul", "addcdiv")
def addc(ctx: Ctx) -> Box:
    a, t1, t2 = ctx.in_box(0), ctx.box(ctx.arg(1)), ctx.box(ctx.arg(2))
    assert t1 is not None and t2 is not None
    value = float(ctx.arg(3, 1, name="value"))
    if ctx.rec.base == "addcmul":
        plo, phi = mul_bounds(t1.lo, t1.hi, t2.lo, t2.hi)
    else:
        q = _divide(ctx, t1, t2)
        plo, phi = q.lo, q.hi
    plo, phi = (plo * value, phi * value) if value >= 0 else (phi * value, plo * value)
    return ctx.out_box(rebig(unbig(a.lo) + unbig(plo), -INF), rebig(unbig(a.hi) + unbig(phi), INF))


__all__ = ["exp_limit"]
