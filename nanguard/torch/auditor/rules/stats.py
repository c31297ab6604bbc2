"""Rules for statistics and norms: var/std (and their degenerate count), vector norms,
weight norm, products, embedding bags."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import torch

from nanguard.torch.auditor.interval import F64, INF, Box, rebig, unbig
from nanguard.torch.auditor.rules import Ctx, rule


def _opt(ctx: Ctx, i: int, name: str) -> Optional[Box]:
    a = ctx.arg(i, name=name)
    return None if a is None else ctx.box(a)


def reduced_count(shape: Sequence[int], dim: object) -> int:
    if dim is None or dim == [] or dim == ():
        return math.prod(shape)
    dims = [dim] if isinstance(dim, int) else list(dim)  # type: ignore[arg-type]
    n = 1
    for d in dims:
        n *= shape[d % len(shape)] if shape else 1
    return n


def correction_of(ctx: Ctx) -> float:
    """The correction of var/std: ``correction=``, or ``unbiased`` (True: 1)."""
    name = ctx.rec.name
    c = ctx.kw("correction")
    if c is not None:
        return float(c)
    if ".correction" in name:
        return 1.0
    if ".dim" in name or name.endswith(".default"):
        unbiased = ctx.arg(2 if ".dim" in name else 1, True, name="unbiased")
        return 1.0 if unbiased in (True, None) else 0.0
    return 1.0


@rule("var", "std", "var_mean", "std_mean")
def variance(ctx: Ctx) -> List[Optional[Box]]:
    x = ctx.in_box(0)
    base = ctx.rec.base
    n = reduced_count(x.shape, ctx.arg(1, None, name="dim"))
    c = correction_of(ctx)
    lo, hi = x.bounds()
    spread = hi - lo
    denom = n - c
    top = spread * spread / 4 * n / denom if denom > 0 and math.isfinite(spread) else INF
    if base.startswith("std"):
        top = math.sqrt(top) if top != INF else INF
    out: List[Optional[Box]] = [ctx.out_box(0.0, top, 0)]
    if len(ctx.outputs) > 1 and ctx.outputs[1] is not None:
        out.append(ctx.out_box(lo, hi, 1))
    return out


@rule("linalg_vector_norm", "norm", "frobenius_norm")
def vector_norm(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    ord_ = ctx.arg(1, 2, name="ord") if ctx.rec.base == "linalg_vector_norm" else ctx.arg(1, 2, name="p")
    try:
        p = 2.0 if ord_ is None else float(ord_)
    except (TypeError, ValueError):
        return ctx.out_box(0.0, INF)
    if p < 1:
        return ctx.out_box(0.0, INF)
    alo = torch.where((x.lo <= 0) & (x.hi >= 0), torch.tensor(0.0, dtype=F64),
                      torch.minimum(x.lo.abs(), x.hi.abs()))
    ahi = torch.maximum(x.lo.abs(), x.hi.abs())
    dim = ctx.arg(2, None, name="dim")
    keepdim = bool(ctx.arg(3, False, name="keepdim"))
    shape = x.shape
    blo, bhi = alo.expand(shape), ahi.expand(shape)
    if dim is None:
        dims = list(range(len(shape)))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        dims = list(range(len(shape)))
    f = (lambda t: torch.linalg.vector_norm(unbig(t), p, dim=dims, keepdim=keepdim)) if shape else (lambda t: t.abs())
    return ctx.out_box(rebig(f(blo), INF), rebig(f(bhi), INF))


@rule("_embedding_bag", "embedding_bag", "_embedding_bag_forward_only")
def embedding_bag(ctx: Ctx) -> List[Optional[Box]]:
    """Bags of rows: their sum (``mode`` 0, at most the largest bag's size of rows; an empty bag
    is 0), mean (1) or max (2), within the hull of the weight."""
    w = ctx.in_box(0)
    mode = int(ctx.arg(4, 0, name="mode"))
    psw = ctx.arg(6, None, name="per_sample_weights")
    lo, hi = w.bounds()
    if mode == 0:
        if psw is not None:
            return [ctx.top(0)] + [ctx.top(k) if n is not None else None for k, n in enumerate(ctx.outputs) if k]
        idx, off = ctx.box(ctx.arg(1)), ctx.box(ctx.arg(2))
        if idx is None or off is None or off.exact is None:
            big = INF
        else:
            edges = torch.cat([off.exact.reshape(-1).long(), torch.tensor([idx.numel])])
            big = float((edges[1:] - edges[:-1]).max()) if edges.numel() > 1 else float(idx.numel)
        lo, hi = min(0.0, big * lo) if lo < 0 else 0.0, max(0.0, big * hi) if hi > 0 else 0.0
    else:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return [ctx.out_box(lo, hi, 0)] + [None if n is None else (ctx.top(k) if n.is_float else
                                                               ctx.out_box(0.0, INF, k))
                                        for k, n in enumerate(ctx.outputs) if k]


@rule("_weight_norm_interface", "_weight_norm")
def weight_norm(ctx: Ctx) -> List[Optional[Box]]:
    g = ctx.box(ctx.arg(1))
    assert g is not None
    lo, hi = g.bounds()
    m = max(abs(lo), abs(hi))
    return [ctx.out_box(-m, m, 0)] + [ctx.out_box(0.0, INF, k) if n is not None else None
                                       for k, n in enumerate(ctx.outputs) if k > 0]


@rule("prod", "cumprod")
def product(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    if bool((x.lo >= 0).all()):
        from nanguard.torch.auditor.rules.shape import value_moving
        return value_moving(ctx)[0]  # type: ignore[return-value]
    return ctx.top()


__all__ = ["correction_of", "reduced_count"]
