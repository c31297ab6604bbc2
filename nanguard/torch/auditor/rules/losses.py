"""Rules for the losses: nll (cross-entropy's second half), pointwise regression losses and
binary cross-entropy, each reduced as asked (none, mean, sum)."""

from __future__ import annotations

import math
from typing import List, Optional

import torch

from nanguard.torch.auditor.interval import F64, INF, Box, mul_bounds, rebig, unbig
from nanguard.torch.auditor.rules import Ctx, rule


def _opt(ctx: Ctx, i: int, name: str) -> Optional[Box]:
    a = ctx.arg(i, name=name)
    return None if a is None else ctx.box(a)


def _reduce(ctx: Ctx, lo: torch.Tensor, hi: torch.Tensor, reduction: int, k: int = 0,
            count: Optional[int] = None) -> Box:
    """Elementwise loss bounds reduced: none (as they are), mean (their hull), sum (``count``
    terms: the number of elements the loss sums, which a 0-dim bound does not tell)."""
    if reduction == 0:
        return ctx.out_box(lo, hi, k)
    flo, fhi = float(lo.min()) if lo.numel() else 0.0, float(hi.max()) if hi.numel() else 0.0
    if reduction == 2:
        n = max(count if count is not None else lo.numel(), 1)
        return ctx.out_box(flo * n if flo < 0 else flo, fhi * n if fhi > 0 else fhi, k)
    return ctx.out_box(flo, fhi, k)


@rule("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss_nd", "nll_loss2d")
def nll_loss(ctx: Ctx) -> List[Optional[Box]]:
    x = ctx.in_box(0)
    target = ctx.box(ctx.arg(1))
    weight = _opt(ctx, 2, "weight")
    reduction = int(ctx.arg(3, 1, name="reduction"))
    ignore = int(ctx.arg(4, -100, name="ignore_index"))
    xlo, xhi = x.full()
    if target is not None and target.exact is not None and len(x.shape) >= 2:
        t = target.exact.long()
        kept = t != ignore
        idx = torch.where(kept, t, torch.zeros_like(t)).unsqueeze(1)
        glo = -xhi.gather(1, idx).squeeze(1)
        ghi = -xlo.gather(1, idx).squeeze(1)
        if weight is not None:
            w = weight.lo.expand(x.shape[1]) if weight.lo.dim() == 0 else weight.lo
            wt = w[idx.squeeze(1)]
            glo, ghi = mul_bounds(glo, ghi, wt, wt)
        zero = torch.tensor(0.0, dtype=F64)
        glo, ghi = torch.where(kept, glo, zero), torch.where(kept, ghi, zero)
        if reduction == 1 and bool(kept.any()):
            glo, ghi = glo[kept], ghi[kept]
            if weight is not None:     # a weighted mean: between the smallest and largest term / weight
                glo, ghi = -xhi.amax(), -xlo.amin()
    else:
        glo, ghi = -xhi.amax().reshape(1), -xlo.amin().reshape(1)
        if weight is not None:
            glo, ghi = mul_bounds(glo, ghi, weight.lo.amin(), weight.hi.amax())
        if reduction == 0:
            glo, ghi = glo.expand(ctx.out(0).shape), ghi.expand(ctx.out(0).shape)
    out = [_reduce(ctx, glo, ghi, reduction)]
    for k in range(1, len(ctx.outputs)):
        node = ctx.outputs[k]
        out.append(None if node is None else ctx.out_box(0.0, INF, k))
    return out


def _diff(ctx: Ctx) -> tuple:
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    lo = rebig(unbig(a.lo) - unbig(b.hi), -INF)
    hi = rebig(unbig(a.hi) - unbig(b.lo), INF)
    lo, hi = torch.broadcast_tensors(lo, hi)
    absmax = torch.maximum(lo.abs(), hi.abs())
    absmin = torch.where((lo <= 0) & (hi >= 0), torch.tensor(0.0, dtype=F64), torch.minimum(lo.abs(), hi.abs()))
    return absmin, absmax


@rule("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss")
def pointwise_loss(ctx: Ctx) -> Box:
    base = ctx.rec.base
    absmin, absmax = _diff(ctx)
    reduction = int(ctx.arg(2, 1, name="reduction"))
    if base == "mse_loss":
        lo, hi = absmin ** 2, absmax ** 2
    elif base == "l1_loss":
        lo, hi = absmin, absmax
    elif base == "smooth_l1_loss":
        beta = float(ctx.arg(3, 1.0, name="beta"))
        lo = torch.zeros_like(absmin)
        hi = torch.maximum(absmax, absmax ** 2 / (2 * beta)) if beta > 0 else absmax
    elif base == "huber_loss":
        delta = float(ctx.arg(3, 1.0, name="delta"))
        lo, hi = torch.zeros_like(absmin), torch.maximum(0.5 * absmax ** 2, delta * absmax)
    else:
        return ctx.out_box(0.0, INF)
    count = math.prod(torch.broadcast_shapes(ctx.in_box(0).shape, ctx.box(ctx.arg(1)).shape))  # type: ignore
    return _reduce(ctx, lo, hi, reduction, count=count)


@rule("binary_cross_entropy")
def bce(ctx: Ctx) -> Box:
    y = ctx.box(ctx.arg(1))
    weight = _opt(ctx, 2, "weight")
    reduction = int(ctx.arg(3, 1, name="reduction"))
    assert y is not None
    ylo, yhi = y.bounds()
    m = 100.0 * (max(abs(ylo), abs(yhi)) + max(abs(1 - ylo), abs(1 - yhi)))
    if weight is not None:
        wlo, whi = weight.bounds()
        m *= max(abs(wlo), abs(whi))
    lo = 0.0 if 0 <= ylo and yhi <= 1 and (weight is None or weight.bounds()[0] >= 0) else -m
    shape = ctx.out(0).shape
    t_lo, t_hi = torch.tensor(lo, dtype=F64).expand(shape or ()), torch.tensor(m, dtype=F64).expand(shape or ())
    return ctx.out_box(t_lo, t_hi) if reduction != 2 else ctx.out_box(lo, m * max(y.numel, 1))


@rule("binary_cross_entropy_with_logits")
def bce_logits(ctx: Ctx) -> Box:
    x, y = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert y is not None
    weight, pos_weight = _opt(ctx, 2, "weight"), _opt(ctx, 3, "pos_weight")
    reduction = int(ctx.arg(4, 1, name="reduction"))
    xlo, xhi = x.bounds()
    ylo, yhi = y.bounds()
    amax = max(abs(xlo), abs(xhi)) + math.log(2.0)
    scale = max(abs(ylo), abs(yhi), abs(1 - ylo), abs(1 - yhi), 1.0)
    if pos_weight is not None:
        plo, phi = pos_weight.bounds()
        scale *= 1 + max(abs(plo), abs(phi))
    if weight is not None:
        wlo, whi = weight.bounds()
        scale *= max(abs(wlo), abs(whi))
    m = amax * scale * 2
    nonneg = 0 <= ylo and yhi <= 1 and (weight is None or weight.bounds()[0] >= 0) and \
        (pos_weight is None or pos_weight.bounds()[0] >= 0)
    lo = 0.0 if nonneg else -m
    if reduction == 2:
        return ctx.out_box(lo * x.numel, m * max(x.numel, 1))
    return ctx.out_box(lo, m)


__all__ = ["nll_loss", "pointwise_loss"]
