"""Pairwise Euclidean distances, exact at 0: ``distance_matrix``."""

from __future__ import annotations

from typing import Optional

import torch

from nanguard.core import op_checks
from nanguard.core.opspec import document
from nanguard.torch._checks import SPELLING, broadcast_shape, check_floating
from nanguard.torch._compat import cdist_backward
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, nonpositive_is_singular, pow2_scale, public_op,
)

_EXACT = "donot_use_mm_for_euclid_dist"


def _safe_range(dtype: torch.dtype):
    """Distances in [lo, hi] had no squared difference overflow or lose bits to underflow."""
    finfo = torch.finfo(dtype)
    return finfo.tiny**0.5 / finfo.eps, finfo.max**0.5 / 4


def _inputs_are_tame(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Eager-only check, on the (small) inputs, that every distance lies in the safe range.

    No squared difference overflows if every |entry| <= hi / (2 sqrt(d)). Two different
    floats both at least 2·lo/eps in size (or one of them 0) differ by at least lo, so with
    no nonzero entry below that bound every nonzero distance is >= lo.
    """
    if not can_branch_on_data(x):
        return False
    lo, hi = _safe_range(x.dtype)
    big = hi / (2 * max(x.shape[-1], 1) ** 0.5)
    small = 2 * lo / torch.finfo(x.dtype).eps
    for t in (x, y):
        if t.numel() == 0:
            continue
        magnitude = t.abs()
        if bool(magnitude.amax() > big) or bool(((magnitude < small) & (t != 0)).any()):
            return False
    return True


# Below this many features the exact kernel costs about what the Gram expansion does.
_GRAM_MIN_FEATURES = 8
# Pairs with D² < _NEAR · (|x_i - c|² + |y_j - c|²) are recomputed from their differences.
_NEAR = 0.25


def _use_gram(x: torch.Tensor, y: torch.Tensor) -> bool:
    """The matmul path: eager CPU, float32/float64, enough features, no square that overflows."""
    return x.shape[-1] >= _GRAM_MIN_FEATURES and _matmuls_are_safe(x, y)


def _matmuls_are_safe(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Eager CPU, float32/float64, rows on both sides, no |x|², |y|² or x·y that overflows."""
    if not (x.dtype in (torch.float32, torch.float64) and x.shape[-2] * y.shape[-2] > 0
            and can_branch_on_data(x)):
        return False
    _, hi = _safe_range(x.dtype)
    # centring at most doubles an entry; then no |x|², |y|² or x·y overflows
    big = hi / (4 * x.shape[-1] ** 0.5)
    return bool(x.abs().amax() <= big) and bool(y.abs().amax() <= big)


def _underflows(squares: torch.Tensor, parts: torch.Tensor) -> bool:
    """A sum of squares below the normal range although its parts are not all 0: its bits are lost."""
    lo, _ = _safe_range(squares.dtype)
    small = squares < lo * lo
    return bool(small.any()) and bool((small & (parts != 0).any(-1)).any())


def _centre(x: torch.Tensor, y: torch.Tensor) -> Optional[torch.Tensor]:
    """The mean of all rows of x and y (per batch, keepdim), or None if it is not finite."""
    centre = torch.cat([x, y], dim=-2).mean(dim=-2, keepdim=True)
    return centre if bool(torch.isfinite(centre).all()) else None


def _centred(x: torch.Tensor, y: torch.Tensor):
    """x and y minus the mean of all their rows (per batch): distances do not change, and the
    norms the Gram expansion subtracts become as small as they can be. None if not finite."""
    centre = _centre(x, y)
    return None if centre is None else (x - centre, y - centre)


def _same_rows(x: torch.Tensor, y: torch.Tensor) -> bool:
    """y is x (``distance_matrix(x)``): the diagonal is exactly 0 and needs no test."""
    if x is y:
        return True
    # data pointers exist only for real eager tensors (not under compile or torch.func)
    return (can_branch_on_data(x) and x.data_ptr() == y.data_ptr() and x.shape == y.shape
            and x.stride() == y.stride() and x.dtype == y.dtype)


def _diagonal(m: torch.Tensor) -> torch.Tensor:
    return m.diagonal(dim1=-2, dim2=-1)


def _near_pairs(d2: torch.Tensor, x2: torch.Tensor, y2: torch.Tensor):
    """Indices (batch..., i, j) of the pairs where the Gram expansion may have cancelled:
    D² <= _NEAR · (|x_i|² + |y_j|²) (``<=``: two points at the centre are near too)."""
    # a row can hold such a pair only if min_j D² <= _NEAR·(|x_i|² + max_j |y_j|²): one
    # reduction per row finds the few rows worth testing pair by pair
    reach = (x2 + y2.amax(-1, keepdim=True)).mul_(_NEAR)
    rows = (d2.amin(-1) <= reach).nonzero(as_tuple=True)
    bound = (x2[rows].unsqueeze(-1) + y2[rows[:-1]]).mul_(_NEAR)
    hit, cols = (d2[rows] <= bound).nonzero(as_tuple=True)
    return tuple(r[hit] for r in rows) + (cols,)


def _gram_squared(xc: torch.Tensor, yc: torch.Tensor):
    """|x|² + |y|² - 2 x·yᵀ by one matmul, and the squared norms."""
    x2 = (xc * xc).sum(-1)
    y2 = (yc * yc).sum(-1)
    if xc.dim() == 2:
        d2 = torch.addmm(y2.unsqueeze(-2), xc, yc.mT, alpha=-2)
    elif xc.dim() == 3:
        d2 = torch.baddbmm(y2.unsqueeze(-2), xc, yc.mT, alpha=-2)
    else:  # fused multiply-add kernels take at most one batch dimension
        d2 = torch.matmul(xc, yc.mT).mul_(-2).add_(y2.unsqueeze(-2))
    return d2.add_(x2.unsqueeze(-1)), x2, y2


def _gram_pairwise(x: torch.Tensor, y: torch.Tensor) -> Optional[torch.Tensor]:
    """Distances by the Gram expansion, with every pair where it may cancel redone exactly.

    On centred inputs, a pair with D² >= _NEAR·S (S = |x_i|² + |y_j|²) carries a rounding
    error of at most about 2(d + 2)·u·D² (u the unit roundoff), a few times the worst-case
    bound of summing the squared differences directly (centring rounds an entry by u·|x - c|,
    and |x - c| <= 2·D for such a pair); the other pairs (the diagonal, duplicates, close
    neighbours) are computed from the differences of the inputs, as the difference kernel
    does. None when the inputs hold a non-finite value or a square would underflow.
    """
    centred = _centred(x, y)
    if centred is None:
        return None
    xc, yc = centred
    d2, x2, y2 = _gram_squared(xc, yc)
    if _underflows(x2, xc) or _underflows(y2, yc):
        return None
    same = _same_rows(x, y)
    if same:
        _diagonal(d2).fill_(float("inf"))  # kept out of the search, set to 0 below
    index = _near_pairs(d2, x2, y2)
    if index[0].numel():
        rows, cols = index[:-1], index[:-2] + (index[-1],)
        # from the inputs, not the centred copies: centring rounds each entry, and a near
        # pair's difference is smaller than that rounding
        diff = x[rows] - y[cols]
        near = (diff * diff).sum(-1)
        if _underflows(near, diff):
            return None
        d2.index_put_(index, near)
    if same:
        _diagonal(d2).zero_()
    return d2.sqrt_()


def _pairwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Distances that never lose a near pair to the Gram expansion's cancellation.

    |x|² + |y|² - 2 x·y cancels catastrophically for nearby rows (it is what torch.cdist
    does for more than 25 rows): on eager CPU with enough features the expansion is used
    only for the pairs it computes accurately, and every near pair is computed from its
    difference; elsewhere (and whenever a square would leave the normal range) every pair is
    computed from its difference. Squares of differences can still overflow (float32 beyond
    ~1e19) or underflow (below ~1e-19): those entries are redone in float64, or for float64
    inputs on power-of-two-scaled inputs.
    """
    if _use_gram(x, y):
        dist = _gram_pairwise(x, y)
        if dist is not None:
            return dist
    dist = torch.cdist(x, y, p=2.0, compute_mode=_EXACT)
    if not can_branch_on_data(x):
        # compile, vmap, accelerators: no look at the values, and no float64 (slow on most
        # accelerators). Pairs whose squares overflowed are redone on inputs scaled by a
        # power of two (exact); a distance below ~1e-19 (float32) keeps its rounded square.
        scale = pow2_scale(torch.cat([x.reshape(-1), y.reshape(-1)]), None).reshape(())
        rescued = torch.cdist(x / scale, y / scale, p=2.0, compute_mode=_EXACT) * scale
        return torch.where(dist > _safe_range(dist.dtype)[1], rescued, dist)
    if _inputs_are_tame(x, y):
        return dist
    lo, hi = _safe_range(dist.dtype)
    # a difference of two tiny entries can square to 0: every such pair may hide at 0
    outside = (dist < lo) | (dist > hi)
    if dist.dtype == torch.float64:
        both = torch.cat([x.reshape(-1), y.reshape(-1)])
        scale = pow2_scale(both, None).reshape(())
        rescued = torch.cdist(x / scale, y / scale, p=2.0, compute_mode=_EXACT) * scale
    else:
        rescued = torch.cdist(x.double(), y.double(), p=2.0, compute_mode=_EXACT).to(dist.dtype)
    return torch.where(outside, rescued, dist)


def _gram_backward(grad: torch.Tensor, x: torch.Tensor, y: torch.Tensor, dist: torch.Tensor, needs):
    """sum_j g_ij (x_i - y_j) / d_ij by matmuls, with near pairs added from their differences.

    x_i·Σ_j w_ij - Σ_j w_ij y_j (w = g/d, 0 where d = 0) cancels for pairs much closer than
    their distance to the centre, as the forward's expansion does; the same near pairs are
    left out of the matmuls and added term by term.
    """
    centred = _centred(x, y)
    if centred is None:
        return None
    xc, yc = centred
    same = _same_rows(x, y)
    # inf where d = 0: every such pair is on the diagonal or near, and is set below
    weight = grad / dist
    squared = dist * dist
    if same:
        _diagonal(weight).zero_()
        _diagonal(squared).fill_(float("inf"))
    index = _near_pairs(squared, (xc * xc).sum(-1), (yc * yc).sum(-1))
    if index[0].numel():
        near_dist = dist[index]
        near_weight = torch.where(near_dist > 0, grad[index] / near_dist, torch.zeros_like(near_dist))
        weight.index_put_(index, torch.zeros_like(near_weight))
        rows, cols = index[:-1], index[:-2] + (index[-1],)
        flow = (x[rows] - y[cols]) * near_weight.unsqueeze(-1)
    grad_x = grad_y = None
    if needs[0]:
        grad_x = xc * weight.sum(-1, keepdim=True) - weight @ yc
        if index[0].numel():
            grad_x = grad_x.index_put(rows, flow, accumulate=True)
    if needs[1]:
        grad_y = yc * weight.sum(-2).unsqueeze(-1) - weight.mT @ xc
        if index[0].numel():
            grad_y = grad_y.index_put(cols, -flow, accumulate=True)
    return grad_x, grad_y


def _graph_backward(grad: torch.Tensor, x: torch.Tensor, y: torch.Tensor, dist: torch.Tensor, needs):
    """The differentiable backward (create_graph) in O(n·m) memory, or None.

    The same split as :func:`_gram_backward`, from out-of-place ops that autograd records:
    matmuls on centred inputs for the far pairs, differences for the near ones (found without
    a graph: which pairs are near is a constant). The dense form ``(x_i - y_j) · w_ij`` keeps
    an n·m·d tensor for the second backward (528 MiB at 1024 x 64 against cdist's 13 MiB).
    The centre is a constant too: the gradient is shift-invariant, so every derivative of it
    is exact. None off eager CPU (the indices of the near pairs depend on the data).
    """
    if not _matmuls_are_safe(x, y):
        return None
    with torch.no_grad():
        centre = _centre(x, y)
    if centre is None:
        return None
    xc, yc = x - centre, y - centre
    with torch.no_grad():
        squared = dist * dist
        if _same_rows(x, y):
            _diagonal(squared).fill_(float("inf"))  # weight 0 there: nothing to add
        index = _near_pairs(squared, (xc * xc).sum(-1), (yc * yc).sum(-1))
    positive = nonpositive_is_singular(dist)
    weight = torch.where(positive, grad / torch.where(positive, dist, torch.ones_like(dist)),
                         torch.zeros_like(grad))
    far, flow = weight, None
    if index[0].numel():
        far = weight.index_put(index, torch.zeros((), dtype=weight.dtype))
        rows, cols = index[:-1], index[:-2] + (index[-1],)
        flow = (x[rows] - y[cols]) * weight[index].unsqueeze(-1)
    grad_x = grad_y = None
    if needs[0]:
        grad_x = xc * far.sum(-1, keepdim=True) - far @ yc
        if flow is not None:
            grad_x = grad_x.index_put(rows, flow, accumulate=True)
    if needs[1]:
        grad_y = yc * far.sum(-2).unsqueeze(-1) - far.mT @ xc
        if flow is not None:
            grad_y = grad_y.index_put(cols, -flow, accumulate=True)
    return grad_x, grad_y


def _plus_transpose(g: torch.Tensor) -> torch.Tensor:
    """g + gᵀ, contiguous. Adding a transposed view walks memory across rows: fine while g
    fits in cache, 3x slower than a contiguous copy of gᵀ and an add beyond that, or when
    its rows are a multiple of 256 floats long (cache sets alias: 4 ms vs 1.2 ms at 1024²)."""
    if g.numel() <= 1 << 21 and g.shape[-1] % 256:
        return (g + g.mT).contiguous()
    return g.mT.contiguous().add_(g)


class _DistanceMatrix(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _pairwise(x, y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, y, dist = ctx.saved_tensors
        if torch.is_grad_enabled():
            grads = _graph_backward(grad, x, y, dist, ctx.needs_input_grad[:2])
            if grads is not None:
                return grads
            # under transforms and compile: explicit differences, O(n·m·d) memory
            diff = x.unsqueeze(-2) - y.unsqueeze(-3)
            positive = nonpositive_is_singular(dist)
            safe_dist = torch.where(positive, dist, torch.ones_like(dist))
            weight = torch.where(positive, grad / safe_dist, torch.zeros_like(grad)).unsqueeze(-1)
            flow = diff * weight
            grad_x = flow.sum(-2) if ctx.needs_input_grad[0] else None
            grad_y = -flow.sum(-3) if ctx.needs_input_grad[1] else None
            return grad_x, grad_y
        if _use_gram(x, y):
            grads = _gram_backward(grad, x, y, dist, ctx.needs_input_grad[:2])
            if grads is not None:
                return grads
        # torch's kernel computes sum_j g_ij (x_i - y_j) / d_ij exactly and skips d_ij = 0.
        # It multiplies g by the difference before dividing, which overflows for huge
        # inputs and underflows for tiny ones; the gradient is scale-free, so those run on
        # power-of-two-scaled inputs.
        wide = dist.dtype
        if not _inputs_are_tame(x, y):
            if dist.dtype == torch.float64 or not can_branch_on_data(x):
                scale = pow2_scale(torch.cat([x.reshape(-1), y.reshape(-1)]), None).reshape(())
                x, y, dist = x / scale, y / scale, dist / scale
            else:  # float64 holds every product of two float32 numbers
                x, y, dist, grad = x.double(), y.double(), dist.double(), grad.double()
        if ctx.needs_input_grad[0] and ctx.needs_input_grad[1] and _same_rows(x, y):
            # y is x: the gradient x receives through both arguments is one kernel call on
            # g + gᵀ (the distance matrix is symmetric), not two
            both = cdist_backward(_plus_transpose(grad), x, x, 2.0, dist)
            return both.to(wide), None
        grad = grad.contiguous()
        grad_x = grad_y = None
        if ctx.needs_input_grad[0]:
            grad_x = cdist_backward(grad, x, y, 2.0, dist)
        if ctx.needs_input_grad[1]:
            grad_y = cdist_backward(
                grad.mT.contiguous(), y, x, 2.0, dist.mT.contiguous()
            )
        return (None if grad_x is None else grad_x.to(wide)), (None if grad_y is None else grad_y.to(wide))


@public_op()
@document("distance_matrix", "torch")
def distance_matrix(x: torch.Tensor, y: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""The usual ``sqrt(|x|² + |y|² - 2 x yᵀ)`` has zeros on the diagonal, where the sqrt
    gradient is inf and training turns NaN after one step; the subtraction also cancels for
    nearby rows (tiny negative values, errors of 1e-3 and more). This op never lets that
    cancellation through: on eager CPU with at least 8 features it uses the expansion (one
    matmul, on inputs centred at their mean) only for the pairs it computes to within a few
    ulps, and computes every near pair (the diagonal, duplicates, close neighbours) from its
    difference; otherwise every pair comes from its difference. The gradient follows the same
    split. Measured: at most 4 ulps from the exact distance in float32. Under
    ``torch.compile``, ``torch.func`` and on accelerators (no look at the values, no float64)
    a float32 distance below ~1e-19 is its rounded square's root, not exact.

    Returns:
        ``(..., n, m)`` distances in the promoted dtype of ``x`` and ``y``.

    Example:
        >>> x = torch.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
        >>> nanguard.distance_matrix(x)
        tensor([[0., 5.],
                [5., 0.]], grad_fn=<_DistanceMatrixBackward>)
    """
    check_floating(x, "x", "distance_matrix")
    if y is None:
        y = x
    else:
        check_floating(y, "y", "distance_matrix")
    op_checks.rows_and_features(tuple(x.shape), tuple(y.shape), "distance_matrix", SPELLING)
    batch = broadcast_shape(x.shape[:-2], y.shape[:-2])
    dtype = torch.promote_types(x.dtype, y.dtype)
    # torch.cdist has no float16/bfloat16 kernel on CPU: compute in float32, return in dtype
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    xc = x.to(compute).expand(*batch, *x.shape[-2:])
    yc = y.to(compute).expand(*batch, *y.shape[-2:])
    return apply_op(_DistanceMatrix, xc, yc).to(dtype)
