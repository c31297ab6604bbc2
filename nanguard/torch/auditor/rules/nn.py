"""Rules for the neural-network ops: softmax, normalisation layers, attention, dropout and
recurrent layers (losses: `losses`; statistics and norms: `stats`).

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


__all__ = ["all_masked", "softmax_bounds"]
