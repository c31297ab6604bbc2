"""Rules for arithmetic between tensors: sums with real infinities kept, products (0 · unbounded
= 0), divisions (unbounded where the divisor can be 0: that is the checks' finding), powers,
``xlogy``, ``logaddexp``, ``lerp``, ``addcmul``/``addcdiv``."""

from __future__ import annotations

from typing import Callable

import torch

from nanguard.torch.auditor.interval import F64, INF, Box, dtype_tiny, mul_bounds, rebig, unbig
from nanguard.torch.auditor.rules import Ctx, rule
from nanguard.torch.auditor.rules.elementwise import unimodal


@rule("reciprocal")
def reciprocal(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    return _divide(ctx, Box.of(1.0, 1.0, (), x.dtype), x)


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
        return unimodal(ctx, torch.square, 0.0, 0.0)
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


__all__ = ["add", "mul", "sub"]
