"""Rules for ops that move, select, reduce or convert values.

*Value-moving* ops (views, ``cat``, ``index``, ``gather``, ``embedding``, pooling by max ...)
are monotone in their data arguments: the op applied to the lower bounds gives the lower
bounds of its output. Their index arguments must be exact; with an unknown index the
output is bounded by the hull of the whole input. Sums and means are monotone too.
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch.utils import _pytree as pytree

from nanguard.torch.auditor.interval import F64, INF, Box
from nanguard.torch.auditor.rules import Ctx, rule
from nanguard.torch.auditor.graph import Ref

# Ops whose outputs are made of their data inputs' values (and of constants in their args).
VALUE_MOVING = (
    "view", "_unsafe_view", "reshape", "_reshape_alias", "permute", "transpose", "t", "unsqueeze", "squeeze",
    "expand", "slice", "select", "narrow", "clone", "contiguous", "alias", "detach", "lift_fresh",
    "lift_fresh_copy", "cat", "stack", "split", "split_with_sizes", "unbind", "chunk", "unsafe_split",
    "unsafe_split_with_sizes", "unsafe_chunk", "hstack", "vstack", "dstack", "column_stack", "flip", "roll", "repeat",
    "index", "index_select", "gather", "take", "embedding", "diagonal", "diag", "diag_embed", "tril", "triu",
    "constant_pad_nd", "unfold", "movedim", "flatten", "masked_select", "pixel_shuffle", "pixel_unshuffle",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "reflection_pad1d", "reflection_pad2d",
    "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "rot90",
    "repeat_interleave", "view_as_real", "_to_dense", "squeeze_copy", "unsqueeze_copy", "view_copy",
    "permute_copy", "transpose_copy", "expand_copy", "slice_copy", "select_copy", "t_copy", "split_copy",
    "split_with_sizes_copy", "unbind_copy", "alias_copy", "detach_copy", "as_strided_copy", "_reshape_copy",
    "narrow_copy", "take_along_dim", "index_put", "scatter", "slice_scatter", "select_scatter",
    "diagonal_scatter", "masked_scatter", "index_copy", "index_fill", "im2col", "channel_shuffle",
    "native_channel_shuffle", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "amax", "amin", "max", "min", "sort", "topk", "median", "nanmedian", "kthvalue", "cummax", "cummin",
    "msort", "mode", "quantile", "nanquantile",
    # monotone with non-negative weights: sums and averages of their inputs
    "sum", "mean", "nansum", "nanmean", "cumsum", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d", "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d",
    "_upsample_bilinear2d_aa", "scatter_add", "index_add", "scatter_reduce", "index_reduce", "col2im",
    "trace", "logsumexp", "logcumsumexp", "segment_reduce",
    "_unsafe_index", "_unsafe_index_put", "any", "all", "count_nonzero",
)
# The values of these equal input values: uniform in, uniform out, same bounds.
_SAME_VALUES = frozenset(VALUE_MOVING[:VALUE_MOVING.index("sum")]) - {
    "constant_pad_nd", "tril", "triu", "diag_embed", "index_put", "scatter", "slice_scatter", "select_scatter",
    "diagonal_scatter", "masked_scatter", "index_copy", "index_fill", "diag"}
_FLOAT_ONLY_KW = ("dtype",)


def _is_data(b: Box) -> bool:
    return b.dtype.is_floating_point or b.dtype.is_complex


# Arguments that hold data (bounds are used); every other tensor argument is an index or a
# mask, which must be exact.
_DATA_POSITIONS = {
    "scatter": (0, 3), "scatter_add": (0, 3), "scatter_reduce": (0, 3), "index_add": (0, 3), "index_copy": (0, 3),
    "index_reduce": (0, 3), "index_put": (0, 2), "_unsafe_index_put": (0, 2), "masked_scatter": (0, 2),
    "slice_scatter": (0, 1), "select_scatter": (0, 1), "diagonal_scatter": (0, 1), "index_fill": (0, 3),
    "embedding_bag": (0, 4), "_embedding_bag": (0, 4),
}


def _bound_args(ctx: Ctx, which: str) -> Optional[Tuple[Tuple[Any, ...], dict]]:
    """The op's arguments with each data box replaced by its ``which`` bound (materialised) and
    each index/mask box by its exact value; None when an index is not exact."""
    ok = True
    positions = _DATA_POSITIONS.get(ctx.rec.base, (0,))

    def bound(b: Box) -> torch.Tensor:
        lo, hi = b.full()
        return lo if which == "lo" else hi

    def sub(x: Any, data: bool) -> Any:
        nonlocal ok
        if not isinstance(x, Ref):
            return x
        b = ctx.box(x)
        assert b is not None
        if data or b.dtype.is_floating_point:
            return bound(b)
        if b.exact is not None:
            return b.exact
        ok = False
        return None

    args = tuple(pytree.tree_map(lambda x, d=(i in positions): sub(x, d), a) for i, a in enumerate(ctx.rec.args))
    kwargs = {k: pytree.tree_map(lambda x: sub(x, False), v) for k, v in ctx.rec.kwargs.items()}
    if not ok:
        return None
    if kwargs.get("dtype") is not None and isinstance(kwargs["dtype"], torch.dtype):
        kwargs["dtype"] = F64
    return args, kwargs


def _call(ctx: Ctx, args: Tuple[Any, ...], kwargs: dict) -> List[Any]:
    func = ctx.analysis.functional(ctx.rec)
    try:
        out = func(*args, **kwargs)
    except RuntimeError:
        # a view of an expanded bound: call it on contiguous copies
        args, kwargs = pytree.tree_map(lambda x: x.contiguous() if isinstance(x, torch.Tensor) else x, (args, kwargs))
        out = func(*args, **kwargs)
    return pytree.tree_leaves(out)


def _data_boxes(ctx: Ctx) -> List[Box]:
    out = []
    for leaf in pytree.tree_leaves((ctx.rec.args, ctx.rec.kwargs)):
        if isinstance(leaf, Ref):
            b = ctx.box(leaf)
            if b is not None and _is_data(b):
                out.append(b)
    return out


def hull(ctx: Ctx, extra: Sequence[float] = ()) -> List[Optional[Box]]:
    """Every output bounded by the hull of every data input (index outputs: unknown ints)."""
    boxes = _data_boxes(ctx)
    los = [float(b.finite_lo().min()) if b.numel else INF for b in boxes] + list(extra)
    his = [float(b.finite_hi().max()) if b.numel else -INF for b in boxes] + list(extra)
    lo, hi = (min(los), max(his)) if los else (-INF, INF)
    if lo > hi:
        lo, hi = -INF, INF
    res: List[Optional[Box]] = []
    for k, node in enumerate(ctx.outputs):
        if node is None:
            res.append(None)
        elif node.dtype.is_floating_point:
            res.append(ctx.out_box(lo, hi, k))
        else:
            res.append(_index_box(ctx, k))
    return res


def _index_box(ctx: Ctx, k: int) -> Box:
    node = ctx.out(k)
    if node.dtype == torch.bool:
        return Box.top(node.shape, node.dtype)
    largest = max((math.prod(n.shape) for n in ctx.rec.input_nodes()), default=1)
    return ctx.out_box(0.0, float(max(largest - 1, 0)), k)


_REDUCTIONS = frozenset({"sum", "mean", "nansum", "nanmean", "logsumexp", "amax", "amin", "max", "min"})


@rule(*VALUE_MOVING)
def value_moving(ctx: Ctx) -> List[Optional[Box]]:
    base = ctx.rec.base
    data = [b for b in _data_boxes(ctx) if b.numel or base not in ("cat", "stack")]   # cat([empty cache, k])
    same = len({(float(b.lo), float(b.hi)) for b in data if b.uniform}) <= 1   # cat of different boxes: per part
    if data and all(b.uniform for b in data) and (same or math.prod(ctx.out(0).shape) > 1 << 24) and \
            len(ctx.rec.input_nodes()) == len(_data_boxes(ctx)) + _exact_count(ctx):
        if base in _SAME_VALUES or base in _REDUCTIONS:
            lo = min(float(b.lo) for b in data)
            hi = max(float(b.hi) for b in data)
            if base in ("sum", "nansum", "logsumexp"):
                out_numel = max(math.prod(ctx.out(0).shape), 1)
                n = data[0].numel // out_numel
                if base == "logsumexp":
                    lo, hi = (lo + math.log(n), hi + math.log(n)) if n else (-INF, -INF)
                else:
                    lo, hi = _times(n, lo), _times(n, hi)
            res: List[Optional[Box]] = []
            for k, n_ in enumerate(ctx.outputs):
                if n_ is None:
                    res.append(None)
                elif k > 0 and not n_.dtype.is_floating_point and base in _WITH_INDICES:
                    res.append(_index_box(ctx, k))
                elif n_.dtype.is_floating_point:
                    res.append(ctx.out_box(lo, hi, k))
                else:
                    res.append(ctx.top(k))
            return res
    lo_args = _bound_args(ctx, "lo")
    hi_args = _bound_args(ctx, "hi")
    if lo_args is None or hi_args is None:
        return hull(ctx)
    try:
        lo_out = _call(ctx, *lo_args)
        hi_out = _call(ctx, *hi_args)
    except (RuntimeError, TypeError, ValueError, IndexError):
        return hull(ctx)
    res: List[Optional[Box]] = []
    for k, node in enumerate(ctx.outputs):
        if node is None:
            res.append(None)
            continue
        if k >= len(lo_out) or not isinstance(lo_out[k], torch.Tensor):
            res.append(ctx.top(k))
            continue
        if k > 0 and not node.dtype.is_floating_point and base in _WITH_INDICES:
            res.append(_index_box(ctx, k))     # the indices of max, sort, topk ...
            continue
        lo_k, hi_k = lo_out[k].to(F64), hi_out[k].to(F64)
        res.append(ctx.out_box(torch.minimum(lo_k, hi_k), torch.maximum(lo_k, hi_k), k))
    return res


_WITH_INDICES = frozenset({"max", "min", "sort", "topk", "median", "nanmedian", "kthvalue", "cummax", "cummin",
                           "mode", "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_max_pool1d",
                           "adaptive_max_pool2d", "adaptive_max_pool3d", "_embedding_bag", "embedding_bag",
                           "native_dropout"})


def _times(n: int, v: float) -> float:
    return 0.0 if n == 0 else n * v


def _exact_count(ctx: Ctx) -> int:
    """Inputs that are exact indices or masks (not data)."""
    return sum(1 for b in _all_boxes(ctx) if not _is_data(b) and b.exact is not None)


def _all_boxes(ctx: Ctx) -> List[Box]:
    out = []
    for leaf in pytree.tree_leaves((ctx.rec.args, ctx.rec.kwargs)):
        if isinstance(leaf, Ref):
            b = ctx.box(leaf)
            if b is not None:
                out.append(b)
    return out


@rule("as_strided", "as_strided_scatter", "_unsafe_view_of")
def strided(ctx: Ctx) -> List[Optional[Box]]:
    return hull(ctx)


# ----------------------------------------------------------------- factories and fills
@rule("zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "zero", "fill", "scalar_tensor",
      "zeros", "ones", "full", "arange", "linspace", "logspace", "eye")
def constant_like(ctx: Ctx) -> List[Optional[Box]]:
    base = ctx.rec.base
    if base in ("zeros_like", "new_zeros", "zero", "zeros"):
        value = 0.0
    elif base in ("ones_like", "new_ones", "ones"):
        value = 1.0
    elif base in ("full_like", "new_full", "fill", "full"):
        v = ctx.arg(1)
        b = ctx.box(v)
        if b is None:
            return [ctx.top(0)]
        lo, hi = b.bounds() if b.numel else (0.0, 0.0)
        return [ctx.out_box(lo, hi)]
    else:
        return [ctx.top(0)]
    return [ctx.out_box(value, value)]


@rule("empty_like", "new_empty", "empty", "empty_strided", "new_empty_strided", "empty_permuted", "resize")
def uninitialised(ctx: Ctx) -> List[Optional[Box]]:
    return [ctx.top(k) if n is not None else None for k, n in enumerate(ctx.outputs)]


# ------------------------------------------------------------------------------ casts
@rule("_to_copy", "to", "_to_dtype", "type_as", "copy", "_copy_from_and_resize", "_copy_from")
def cast(ctx: Ctx) -> Box:
    base = ctx.rec.base
    src = ctx.in_box(1) if base == "copy" else ctx.in_box(0)
    node = ctx.out(0)
    lo, hi = src.lo, src.hi
    if node.dtype == torch.bool:
        certain = ~src.contains_zero()
        zero = (src.lo == 0) & (src.hi == 0)
        lo = torch.where(certain, 1.0, 0.0).to(F64)
        hi = torch.where(zero, 0.0, 1.0).to(F64)
    elif not node.dtype.is_floating_point and src.dtype.is_floating_point:
        lo, hi = torch.trunc(lo), torch.trunc(hi)
    if base == "copy":
        lo, hi = lo.expand(node.shape) if lo.dim() else lo, hi.expand(node.shape) if hi.dim() else hi
    return Box.of(lo, hi, node.shape, node.dtype, nonzero=src.nonzero and node.dtype.is_floating_point)


# ----------------------------------------------------------------- selection by a condition
def _where_boxes(cond: Box, a: Box, b: Box) -> Tuple[torch.Tensor, torch.Tensor]:
    sure = cond.lo >= 1
    never = cond.hi <= 0
    lo = torch.where(sure, a.lo, torch.where(never, b.lo, torch.minimum(a.lo, b.lo)))
    hi = torch.where(sure, a.hi, torch.where(never, b.hi, torch.maximum(a.hi, b.hi)))
    return lo, hi


@rule("where")
def where(ctx: Ctx) -> Box:
    cond = ctx.in_box(0)
    a = ctx.analysis.refined(ctx.rec, 1, ctx.in_box(1), cond_index=0, branch=True)
    b = ctx.analysis.refined(ctx.rec, 2, ctx.in_box(2), cond_index=0, branch=False)
    lo, hi = _where_boxes(cond, a, b)
    return ctx.out_box(lo, hi, nonzero=a.excludes_zero() and b.excludes_zero())


@rule("masked_fill")
def masked_fill(ctx: Ctx) -> Box:
    x = ctx.analysis.refined(ctx.rec, 0, ctx.in_box(0), cond_index=1, branch=False)
    mask = ctx.in_box(1)
    value = ctx.box(ctx.arg(2))
    assert value is not None
    lo, hi = _where_boxes(mask, value, x)
    return ctx.out_box(lo, hi, nonzero=x.excludes_zero() and value.excludes_zero())


# ------------------------------------------------------------------------ comparisons
def _cmp(op: str, a: Box, b: Box) -> Tuple[torch.Tensor, torch.Tensor]:
    """(certainly true, possibly true) as 0/1 float tensors."""
    if op == "gt":
        sure, maybe = a.lo > b.hi, a.hi > b.lo
    elif op == "ge":
        sure, maybe = a.lo >= b.hi, a.hi >= b.lo
    elif op == "lt":
        sure, maybe = a.hi < b.lo, a.lo < b.hi
    elif op == "le":
        sure, maybe = a.hi <= b.lo, a.lo <= b.hi
    elif op == "eq":
        point = (a.lo == a.hi) & (b.lo == b.hi)
        sure, maybe = point & (a.lo == b.lo), (a.lo <= b.hi) & (b.lo <= a.hi)
    else:  # ne
        point = (a.lo == a.hi) & (b.lo == b.hi)
        eq_sure = point & (a.lo == b.lo)
        eq_maybe = (a.lo <= b.hi) & (b.lo <= a.hi)
        sure, maybe = ~eq_maybe, ~eq_sure
    return sure.to(F64), maybe.to(F64)


@rule("gt", "ge", "lt", "le", "eq", "ne", "greater", "less", "greater_equal", "less_equal", "not_equal")
def compare(ctx: Ctx) -> Box:
    names = {"greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne"}
    op = names.get(ctx.rec.base, ctx.rec.base)
    a, b = ctx.in_box(0), ctx.box(ctx.arg(1))
    assert b is not None
    sure, maybe = _cmp(op, a, b)
    return ctx.out_box(sure, maybe)


@rule("logical_and", "bitwise_and", "__and__", "logical_or", "bitwise_or", "__or__", "logical_not",
      "bitwise_not", "logical_xor", "bitwise_xor", "__xor__")
def logical(ctx: Ctx) -> Box:
    base = ctx.rec.base
    a = ctx.in_box(0)
    node = ctx.out(0)
    if node.dtype != torch.bool:
        return ctx.top()
    alo, ahi = (a.lo != 0).to(F64), (a.hi != 0).to(F64)
    alo = torch.where(a.contains_zero(), 0.0, 1.0).to(F64)
    ahi = torch.where((a.lo == 0) & (a.hi == 0), 0.0, 1.0).to(F64)
    if base in ("logical_not", "bitwise_not"):
        return ctx.out_box(1 - ahi, 1 - alo)
    b = ctx.box(ctx.arg(1))
    assert b is not None
    blo = torch.where(b.contains_zero(), 0.0, 1.0).to(F64)
    bhi = torch.where((b.lo == 0) & (b.hi == 0), 0.0, 1.0).to(F64)
    if base in ("logical_and", "bitwise_and", "__and__"):
        return ctx.out_box(alo * blo, ahi * bhi)
    if base in ("logical_or", "bitwise_or", "__or__"):
        return ctx.out_box(torch.maximum(alo, blo), torch.maximum(ahi, bhi))
    return ctx.top()


@rule("isnan")
def isnan(ctx: Ctx) -> Box:
    # a value the audit tracks is never NaN: a NaN-making op is a finding, and its output is
    # bounded as if its input had been clipped to its domain
    return ctx.out_box(0.0, 0.0)


@rule("isinf", "isposinf", "isneginf", "isfinite")
def isinf(ctx: Ctx) -> Box:
    x = ctx.in_box(0)
    base = ctx.rec.base
    point = x.point_inf()
    if base == "isposinf":
        point = point & (x.lo > 0)
    elif base == "isneginf":
        point = point & (x.lo < 0)
    v = point.to(F64)
    if base == "isfinite":
        v = 1 - v
    return ctx.out_box(v, v)


@rule("argmax", "argmin", "argsort", "nonzero", "searchsorted", "bucketize", "histc", "bincount", "unique",
      "_unique2", "unique_consecutive", "unique_dim")
def indices(ctx: Ctx) -> List[Optional[Box]]:
    return [None if n is None else (_index_box(ctx, k) if not n.dtype.is_floating_point else ctx.top(k))
            for k, n in enumerate(ctx.outputs)]


__all__ = ["VALUE_MOVING", "hull", "value_moving"]
