"""Rules for the neural-network ops: softmax, normalisation layers, attention, losses, dropout,
statistics and recurrent layers.

Softmax and log_softmax get exact elementwise bounds (entry ``i`` is smallest when it sits at
its lower bound and every other entry at its upper bound); normalisation layers bound the
normalised value by ``sqrt(N − 1)`` (``|x_i − mean| ≤ σ·sqrt(N − 1)`` for ``N`` values), then
apply their affine weights; attention outputs are convex combinations of the values.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

import torch

from nanguard.torch.auditor.interval import F64, INF, Box, mul_bounds, rebig, unbig
from nanguard.torch.auditor.rules import Ctx, rule

_CLAMP = 1e4        # beyond this, exp differences underflow in float64: effectively unbounded
_MASKED = -1e5      # a real -inf entry: below every clamped bound, so exp(.) is exactly 0


def _dim(ctx: Ctx, i: int, ndim: int, name: str = "dim") -> int:
    d = ctx.arg(i, name=name)
    d = int(d[0] if isinstance(d, (list, tuple)) else (d if d is not None else -1))
    return d % ndim if ndim else 0


def all_masked(x: Box, dim: int) -> torch.Tensor:
    """Slices along ``dim`` whose every entry is a real -inf (softmax of them is NaN)."""
    lo, hi = x.full()
    if not x.numel:
        return torch.zeros((), dtype=torch.bool)
    return ((lo == hi) & (hi == -INF)).all(dim=dim, keepdim=True)


def softmax_bounds(x: Box, dim: int, log: bool) -> tuple:
    """Elementwise bounds of softmax (or log_softmax) of any tensor inside ``x``, along ``dim``."""
    n = x.shape[dim] if x.shape else 1
    if x.uniform:
        lo, hi = float(x.lo), float(x.hi)
        spread = hi - lo if math.isfinite(hi - lo) else INF
        if log:
            return (torch.tensor(-INF if spread == INF else -math.log1p((n - 1) * math.exp(min(spread, 700))),
                                 dtype=F64),
                    torch.tensor(-math.log1p((n - 1) * math.exp(-spread)) if spread != INF else 0.0, dtype=F64))
        plo = 0.0 if spread == INF else 1.0 / (1.0 + (n - 1) * math.exp(min(spread, 700)))
        phi = 1.0 if spread == INF else 1.0 / (1.0 + (n - 1) * math.exp(-spread))
        return torch.tensor(plo, dtype=F64), torch.tensor(phi, dtype=F64)
    lo, hi = x.full()
    point = (lo == hi) & (lo == -INF)
    clo = torch.where(point, torch.tensor(_MASKED, dtype=F64), lo.clamp(-_CLAMP, _CLAMP))
    chi = torch.where(point, torch.tensor(_MASKED, dtype=F64), hi.clamp(-_CLAMP, _CLAMP))
    m = chi.amax(dim=dim, keepdim=True)
    e_hi = torch.exp(chi - m)
    e_lo = torch.exp(clo - m)
    s_hi = e_hi.sum(dim=dim, keepdim=True)
    s_lo = e_lo.sum(dim=dim, keepdim=True)
    rest_hi = (s_hi - e_hi).clamp(min=0) + s_hi * 1e-12          # others at their upper bounds
    rest_lo = ((s_lo - e_lo) - s_lo * 1e-12).clamp(min=0)       # others at their lower bounds
    if log:
        out_lo = (clo - m) - torch.log(e_lo + rest_hi)
        out_hi = (chi - m) - torch.log(e_hi + rest_lo)
        unbounded = torch.isinf(lo) | (hi == INF).any(dim=dim, keepdim=True)
        out_lo = torch.where(unbounded, torch.tensor(-INF, dtype=F64), out_lo)
        out_lo = torch.where(point, torch.tensor(-INF, dtype=F64), out_lo)
        out_hi = torch.where(point, torch.tensor(-INF, dtype=F64), out_hi.clamp(max=0.0))
        return out_lo, out_hi
    out_lo = e_lo / (e_lo + rest_hi)
    out_hi = (e_hi / (e_hi + rest_lo)).clamp(max=1.0)
    out_lo = torch.where(point, torch.tensor(0.0, dtype=F64), out_lo)
    out_hi = torch.where(point, torch.tensor(0.0, dtype=F64), out_hi)
    return out_lo, out_hi


@rule("_softmax", "softmax", "_safe_softmax", "special_softmax")
def softmax(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    dim = _dim(ctx, 1, len(x.shape))
    lo, hi = softmax_bounds(x, dim, log=False)
    dead = all_masked(x, dim)
    if bool(dead.any()):   # NaN for torch's softmax (a finding), 0 for _safe_softmax
        zero = torch.tensor(0.0, dtype=F64)
        safe = ctx.rec.base == "_safe_softmax"
        lo = torch.where(dead, zero, lo)
        hi = torch.where(dead, zero if safe else torch.tensor(1.0, dtype=F64), hi)
    return ctx.out_box(lo, hi)


@rule("_log_softmax", "log_softmax", "special_log_softmax")
def log_softmax(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    dim = _dim(ctx, 1, len(x.shape))
    lo, hi = softmax_bounds(x, dim, log=True)
    dead = all_masked(x, dim)
    if bool(dead.any()):
        lo = torch.where(dead, torch.tensor(-INF, dtype=F64), lo)
        hi = torch.where(dead, torch.tensor(0.0, dtype=F64), hi)
    return ctx.out_box(lo, hi)


# ------------------------------------------------------------------ normalisation layers
def _affine(ctx: Ctx, z: float, weight: Optional[Box], bias: Optional[Box], channel_shape: Sequence[int],
            k: int = 0) -> Box:
    """``z``-bounded normalised values times ``weight`` plus ``bias`` (broadcast as ``channel_shape``)."""
    zlo, zhi = torch.tensor(-z, dtype=F64), torch.tensor(z, dtype=F64)
    lo, hi = zlo, zhi
    if weight is not None:
        wl, wh = weight.lo.reshape(channel_shape) if weight.lo.dim() else weight.lo, \
            weight.hi.reshape(channel_shape) if weight.hi.dim() else weight.hi
        lo, hi = mul_bounds(zlo, zhi, wl, wh)
    if bias is not None:
        bl, bh = bias.lo.reshape(channel_shape) if bias.lo.dim() else bias.lo, \
            bias.hi.reshape(channel_shape) if bias.hi.dim() else bias.hi
        lo, hi = rebig(unbig(lo) + unbig(bl), -INF), rebig(unbig(hi) + unbig(bh), INF)
    return ctx.out_box(lo, hi, k)


def _opt(ctx: Ctx, i: int, name: str) -> Optional[Box]:
    a = ctx.arg(i, name=name)
    return None if a is None else ctx.box(a)


def _stats_boxes(ctx: Ctx, x: Box, eps: float, start: int = 1) -> List[Optional[Box]]:
    """mean (hull of x) and rstd ((0, 1/sqrt(eps)]) outputs."""
    lo, hi = x.bounds()
    out: List[Optional[Box]] = []
    for k in range(start, len(ctx.outputs)):
        node = ctx.outputs[k]
        if node is None:
            out.append(None)
        elif k == start:
            out.append(ctx.out_box(lo, hi, k))
        else:
            out.append(ctx.out_box(0.0, 1.0 / math.sqrt(eps) if eps > 0 else INF, k))
    return out


@rule("native_layer_norm", "layer_norm")
def layer_norm(ctx: Ctx) -> List[Optional[Box]]:
    x = ctx.in_box(0)
    shape = list(ctx.arg(1, name="normalized_shape"))
    n = math.prod(shape)
    weight, bias = _opt(ctx, 2, "weight"), _opt(ctx, 3, "bias")
    eps = float(ctx.arg(4, 1e-5, name="eps"))
    out = _affine(ctx, math.sqrt(max(n - 1, 0)), weight, bias, shape)
    return [out] + _stats_boxes(ctx, x, eps)


@rule("_fused_rms_norm", "rms_norm")
def rms_norm(ctx: Ctx) -> List[Optional[Box]]:
    shape = list(ctx.arg(1, name="normalized_shape"))
    weight = _opt(ctx, 2, "weight")
    eps = ctx.arg(3, None, name="eps")
    out = _affine(ctx, math.sqrt(math.prod(shape)), weight, None, shape)
    rest = [ctx.out_box(0.0, 1.0 / math.sqrt(float(eps)) if eps else INF, k) if n is not None else None
            for k, n in enumerate(ctx.outputs) if k > 0]
    return [out] + rest


@rule("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
      "_native_batch_norm_legit_functional", "batch_norm", "_batch_norm_with_update",
      "_batch_norm_no_update")
def batch_norm(ctx: Ctx) -> List[Optional[Box]]:
    base = ctx.rec.base
    x = ctx.in_box(0)
    weight, bias = _opt(ctx, 1, "weight"), _opt(ctx, 2, "bias")
    ndim = len(x.shape)
    channel_shape = [1, -1] + [1] * (ndim - 2)
    args = ctx.rec.args
    if base == "_native_batch_norm_legit_no_training" or base == "_batch_norm_no_update":
        training, rm_i, rv_i, eps = False, 3, 4, float(args[6] if len(args) > 6 else 1e-5)
    elif base == "_batch_norm_with_update":
        training, rm_i, rv_i, eps = True, 3, 4, float(args[6] if len(args) > 6 else 1e-5)
    elif len(args) == 6:   # _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
        training, rm_i, rv_i, eps = bool(args[3]), None, None, float(args[5])
    else:
        training, rm_i, rv_i = bool(args[5]), 3, 4
        eps = float(args[7] if len(args) > 7 else 1e-5)
    if training or rm_i is None:
        m = x.numel // max(x.shape[1] if ndim > 1 else 1, 1)
        out = _affine(ctx, math.sqrt(max(m - 1, 0)), weight, bias, channel_shape)
    else:
        rm, rv = ctx.box(args[rm_i]), ctx.box(args[rv_i])
        if rm is None or rv is None:
            return [ctx.top(k) if n is not None else None for k, n in enumerate(ctx.outputs)]
        rml, rmh = rm.lo.reshape(channel_shape), rm.hi.reshape(channel_shape)
        dlo, dhi = rebig(unbig(x.lo) - unbig(rmh), -INF), rebig(unbig(x.hi) - unbig(rml), INF)
        inv_hi = 1.0 / torch.sqrt(rv.lo.clamp(min=0).reshape(channel_shape) + eps)
        inv_lo = 1.0 / torch.sqrt(rv.hi.clamp(min=0).reshape(channel_shape) + eps)
        lo, hi = mul_bounds(dlo, dhi, inv_lo, inv_hi)
        if weight is not None:
            lo, hi = mul_bounds(lo, hi, weight.lo.reshape(channel_shape), weight.hi.reshape(channel_shape))
        if bias is not None:
            lo = rebig(unbig(lo) + unbig(bias.lo.reshape(channel_shape)), -INF)
            hi = rebig(unbig(hi) + unbig(bias.hi.reshape(channel_shape)), INF)
        out = ctx.out_box(lo, hi)
    rest = [ctx.top(k) if n is not None else None for k, n in enumerate(ctx.outputs) if k > 0]
    return [out] + rest


@rule("native_group_norm", "group_norm")
def group_norm(ctx: Ctx) -> List[Optional[Box]]:
    x = ctx.in_box(0)
    weight, bias = _opt(ctx, 1, "weight"), _opt(ctx, 2, "bias")
    args = ctx.rec.args
    c, hxw, group, eps = int(args[4]), int(args[5]), int(args[6]), float(args[7])
    m = (c // max(group, 1)) * hxw
    channel_shape = [1, -1] + [1] * (len(x.shape) - 2)
    out = _affine(ctx, math.sqrt(max(m - 1, 0)), weight, bias, channel_shape)
    return [out] + _stats_boxes(ctx, x, eps)


# ------------------------------------------------------------------ attention
@rule("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
      "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention", "scaled_dot_product_attention",
      "_scaled_dot_product_attention_math", "_scaled_dot_product_fused_attention_overrideable")
def attention(ctx: Ctx) -> List[Optional[Box]]:
    v = ctx.in_box(2)
    base = ctx.rec.base
    if base == "_scaled_dot_product_efficient_attention":
        p = float(ctx.arg(5, 0.0, name="dropout_p"))
    elif base in ("scaled_dot_product_attention", "_scaled_dot_product_attention_math"):
        p = float(ctx.arg(4, 0.0, name="dropout_p"))
    else:
        p = float(ctx.arg(3, 0.0, name="dropout_p"))
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    lo, hi = v.bounds()
    # a convex combination of the values (0 for a fully masked row on CPU), scaled by dropout
    lo, hi = min(lo, 0.0) * scale, max(hi, 0.0) * scale
    out = [ctx.out_box(lo, hi, 0)]
    for k in range(1, len(ctx.outputs)):
        node = ctx.outputs[k]
        out.append(None if node is None else ctx.top(k))
    return out


# ------------------------------------------------------------------ losses
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


# ------------------------------------------------------------------ dropout
@rule("native_dropout", "dropout", "feature_dropout")
def dropout(ctx: Ctx) -> List[Optional[Box]]:
    x = ctx.in_box(0)
    p = float(ctx.arg(1, 0.5, name="p"))
    train = ctx.arg(2, True, name="train")
    if train is False or p == 0:
        out = ctx.out_box(x.lo, x.hi)
    elif p >= 1:
        out = ctx.out_box(0.0, 0.0)
    else:
        s = 1.0 / (1.0 - p)
        zero = torch.tensor(0.0, dtype=F64)
        out = ctx.out_box(torch.minimum(zero, x.lo * s), torch.maximum(zero, x.hi * s))
    return [out] + [ctx.top(k) if n is not None else None for k, n in enumerate(ctx.outputs) if k > 0]


# ------------------------------------------------------------------ statistics and norms
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


# ------------------------------------------------------------------ recurrent layers
@rule("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
      "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell")
def recurrent(ctx: Ctx) -> List[Optional[Box]]:
    base = ctx.rec.base
    out: List[Optional[Box]] = []
    for k, node in enumerate(ctx.outputs):
        if node is None:
            out.append(None)
        elif base.startswith("rnn_relu"):
            out.append(ctx.out_box(0.0, INF, k))
        elif base.startswith("lstm") and k == 2 or base.startswith("_thnn"):
            out.append(ctx.top(k))
        elif base.startswith("gru"):
            h0 = ctx.box(ctx.arg(1))
            lo, hi = h0.bounds() if h0 is not None and not isinstance(ctx.arg(1), (list, tuple)) else (-1.0, 1.0)
            out.append(ctx.out_box(min(lo, -1.0), max(hi, 1.0), k))
        else:
            out.append(ctx.out_box(-1.0, 1.0, k))
    return out


@rule("mkldnn_rnn_layer")
def mkldnn_rnn(ctx: Ctx) -> List[Optional[Box]]:
    """oneDNN's fused RNN layer (CPU nn.LSTM / nn.GRU / nn.RNN): (output, hy, cy, workspace).
    ``mode`` is 0 RNN-ReLU, 1 RNN-tanh, 2 LSTM, 3 GRU."""
    mode = int(ctx.arg(9, -1, name="mode"))
    out: List[Optional[Box]] = []
    for k, node in enumerate(ctx.outputs):
        if node is None:
            out.append(None)
        elif k < 2 and mode in (1, 2):
            out.append(ctx.out_box(-1.0, 1.0, k))
        elif k < 2 and mode == 3:
            h0 = ctx.box(ctx.arg(5))
            lo, hi = h0.bounds() if h0 is not None else (-1.0, 1.0)
            out.append(ctx.out_box(min(lo, -1.0), max(hi, 1.0), k))
        elif k < 2 and mode == 0:
            out.append(ctx.out_box(0.0, INF, k))
        else:
            out.append(ctx.top(k))
    return out


__all__ = ["all_masked", "correction_of", "reduced_count", "softmax_bounds"]
