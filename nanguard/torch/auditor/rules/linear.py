"""Rules for bilinear ops: matrix products and convolutions, in centre/radius form.

For a bilinear ``f`` (``mm``, ``bmm``, ``convolution`` ...) and boxes ``A = c_A ± r_A``,
``B = c_B ± r_B``: ``f(A, B) ⊆ f(c_A, c_B) ± (f(|c_A|, r_B) + f(r_A, |c_B|) + f(r_A, r_B))``,
computed with the op itself in float64. An unbounded operand makes the product unbounded
(unless the other is exactly 0), which is the common case in ``structural`` mode and costs
nothing.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import torch

from nanguard.torch.auditor.interval import INF, Box, centre_radius, rebig, unbig
from nanguard.torch.auditor.rules import Ctx, rule

aten = torch.ops.aten
Bilinear = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _all_zero(b: Box) -> bool:
    return bool(((b.lo == 0) & (b.hi == 0)).all())


def bilinear(ctx: Ctx, f: Bilinear, a: Box, b: Box, k: int = 0) -> Box:
    node = ctx.out(k)
    if _all_zero(a) or _all_zero(b):
        return Box.of(0.0, 0.0, node.shape, node.dtype)
    if a.is_top() or b.is_top():
        return Box.top(node.shape, node.dtype)
    alo, ahi = a.full()
    blo, bhi = b.full()
    ac, ar = centre_radius(alo, ahi)
    bc, br = centre_radius(blo, bhi)
    c = f(ac.contiguous(), bc.contiguous())
    r = torch.zeros_like(c)
    a_exact = bool((ar == 0).all())
    b_exact = bool((br == 0).all())
    if not b_exact:
        r = r + f(ac.abs().contiguous(), br.contiguous())
    if not a_exact:
        r = r + f(ar.contiguous(), bc.abs().contiguous())
        if not b_exact:
            r = r + f(ar.contiguous(), br.contiguous())
    r = torch.nan_to_num(r, nan=INF)
    lo, hi = rebig(c - r, -INF), rebig(c + r, INF)
    return Box.of(lo, hi, node.shape, node.dtype)


def _plus(ctx: Ctx, bias: Optional[Box], prod: Box, beta: float = 1.0, alpha: float = 1.0, k: int = 0) -> Box:
    node = ctx.out(k)
    plo, phi = unbig(prod.lo) * alpha, unbig(prod.hi) * alpha
    if alpha < 0:
        plo, phi = phi, plo
    if bias is None or beta == 0:
        return Box.of(rebig(plo, -INF), rebig(phi, INF), node.shape, node.dtype)
    blo, bhi = unbig(bias.lo) * beta, unbig(bias.hi) * beta
    if beta < 0:
        blo, bhi = bhi, blo
    lo, hi = rebig(plo + blo, -INF), rebig(phi + bhi, INF)
    point = bias.point_inf()
    if bool(point.any()):   # a -inf mask added to scores stays -inf (products are finite)
        value = bias.lo * (1 if beta > 0 else -1)
        lo, hi = torch.where(point, value, lo), torch.where(point, value, hi)
    return Box.of(lo, hi, node.shape, node.dtype)


def _f64(func: Any) -> Bilinear:
    return lambda x, y: func(x, y)


@rule("mm", "bmm", "mv", "dot", "vdot", "matmul", "outer", "ger", "inner")
def product(ctx: Ctx) -> Box:
    func = getattr(torch, ctx.rec.base if ctx.rec.base != "ger" else "outer")
    a, b = ctx.in_box(0), ctx.in_box(1)
    return bilinear(ctx, _f64(func), a, b)


@rule("addmm", "baddbmm", "addmv", "addbmm", "addr")
def add_product(ctx: Ctx) -> Box:
    base = ctx.rec.base
    func = {"addmm": torch.mm, "baddbmm": torch.bmm, "addmv": torch.mv, "addr": torch.outer,
            "addbmm": lambda x, y: torch.bmm(x, y).sum(0)}[base]
    bias, a, b = ctx.in_box(0), ctx.in_box(1), ctx.in_box(2)
    beta = float(ctx.kw("beta", ctx.arg(3, 1)))
    alpha = float(ctx.kw("alpha", ctx.arg(4, 1)))
    prod = bilinear(ctx, func, a, b)
    return _plus(ctx, bias, prod, beta, alpha)


@rule("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
      "conv_transpose3d", "mkldnn_convolution", "_convolution_mode")
def convolution(ctx: Ctx) -> Box:
    base = ctx.rec.base
    x, w = ctx.in_box(0), ctx.in_box(1)
    bias_arg = ctx.arg(2, name="bias")
    bias = ctx.box(bias_arg) if bias_arg is not None else None
    rest = list(ctx.rec.args[3:])
    kwargs = {k: v for k, v in ctx.rec.kwargs.items() if k != "bias"}
    func = getattr(aten, base)
    prod = bilinear(ctx, lambda a, b: func(a, b, None, *rest, **kwargs), x, w)
    if bias is None:
        return prod
    shape = (1, -1) + (1,) * (len(ctx.out(0).shape) - 2)
    blo = bias.lo.reshape(shape) if bias.lo.dim() else bias.lo
    bhi = bias.hi.reshape(shape) if bias.hi.dim() else bias.hi
    return _plus(ctx, Box(blo, bhi, ctx.out(0).shape, bias.dtype), prod)


@rule("linear")
def linear(ctx: Ctx) -> Box:
    x, w = ctx.in_box(0), ctx.in_box(1)
    bias_arg = ctx.arg(2, name="bias")
    prod = bilinear(ctx, lambda a, b: torch.nn.functional.linear(a, b), x, w)
    return _plus(ctx, ctx.box(bias_arg) if bias_arg is not None else None, prod)


@rule("einsum")
def einsum(ctx: Ctx) -> Box:
    eq, operands = ctx.arg(0), ctx.arg(1)
    if not isinstance(operands, (list, tuple)) or len(operands) != 2:
        return ctx.top()
    a, b = ctx.box(operands[0]), ctx.box(operands[1])
    if a is None or b is None:
        return ctx.top()
    return bilinear(ctx, lambda x, y: torch.einsum(eq, x, y), a, b)


@rule("_cdist_forward", "cdist", "_euclidean_dist", "_pdist_forward", "pdist")
def distances(ctx: Ctx) -> Box:
    boxes = [b for b in (ctx.box(ctx.arg(0)), ctx.box(ctx.arg(1))) if b is not None and b.dtype.is_floating_point]
    los = [float(b.finite_lo().min()) for b in boxes if b.numel]
    his = [float(b.finite_hi().max()) for b in boxes if b.numel]
    if not los:
        return ctx.out_box(0.0, 0.0)
    spread = max(his) - min(los)
    d = boxes[0].shape[-1] if boxes[0].shape else 1
    return ctx.out_box(0.0, spread * d if spread != INF else INF)


__all__: List[str] = ["bilinear"]
