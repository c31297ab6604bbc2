"""Pairwise Euclidean distances, exact at 0: ``distance_matrix``."""

from __future__ import annotations

from typing import Optional

import torch

from nanguard.torch._checks import broadcast_shape, check_floating
from nanguard.torch.ops._core import SafeFunction, apply_op, can_branch_on_data, nonpositive_is_singular, pow2_scale

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


def _pairwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Distances from differences (x_i - y_j), never from the Gram expansion.

    |x|² + |y|² - 2 x·y cancels catastrophically for nearby rows (it is what torch.cdist
    does for more than 25 rows); differences are exact for identical rows and accurate for
    close ones. Squares of differences can still overflow (float32 beyond ~1e19) or
    underflow (below ~1e-19): those entries are redone in float64, or for float64 inputs
    on power-of-two-scaled inputs.
    """
    dist = torch.cdist(x, y, p=2.0, compute_mode=_EXACT)
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
            # explicit differences so that second derivatives exist; O(n·m·d) memory
            diff = x.unsqueeze(-2) - y.unsqueeze(-3)
            positive = nonpositive_is_singular(dist)
            safe_dist = torch.where(positive, dist, torch.ones_like(dist))
            weight = torch.where(positive, grad / safe_dist, torch.zeros_like(grad)).unsqueeze(-1)
            flow = diff * weight
            grad_x = flow.sum(-2) if ctx.needs_input_grad[0] else None
            grad_y = -flow.sum(-3) if ctx.needs_input_grad[1] else None
            return grad_x, grad_y
        # torch's kernel computes sum_j g_ij (x_i - y_j) / d_ij exactly and skips d_ij = 0.
        # It multiplies g by the difference before dividing, which overflows for huge
        # inputs and underflows for tiny ones; the gradient is scale-free, so those run on
        # power-of-two-scaled inputs.
        wide = dist.dtype
        if not _inputs_are_tame(x, y):
            if dist.dtype == torch.float64:
                scale = pow2_scale(torch.cat([x.reshape(-1), y.reshape(-1)]), None).reshape(())
                x, y, dist = x / scale, y / scale, dist / scale
            else:  # float64 holds every product of two float32 numbers
                x, y, dist, grad = x.double(), y.double(), dist.double(), grad.double()
        grad = grad.contiguous()
        grad_x = grad_y = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.aten._cdist_backward(grad, x, y, 2.0, dist)
        if ctx.needs_input_grad[1]:
            grad_y = torch.ops.aten._cdist_backward(
                grad.mT.contiguous(), y, x, 2.0, dist.mT.contiguous()
            )
        return (None if grad_x is None else grad_x.to(wide)), (None if grad_y is None else grad_y.to(wide))


def distance_matrix(x: torch.Tensor, y: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Euclidean distances between the rows of ``x`` and ``y`` (or of ``x`` with itself).

    .. math:: D_{ij} = \|x_i - y_j\|, \qquad \frac{\partial D_{ij}}{\partial x_i} =
              \frac{x_i - y_j}{D_{ij}} \quad (D_{ij} > 0)

    The usual ``sqrt(|x|² + |y|² - 2 x yᵀ)`` has zeros on the diagonal, where the sqrt
    gradient is inf and training turns NaN after one step; the subtraction also cancels for
    nearby rows (tiny negative values, errors of 1e-3 and more). This op works from the
    differences themselves.

    Singular points:
        * identical rows (the diagonal of ``distance_matrix(x)``): exactly 0, gradient 0
          (minimum-norm subgradient, as ``torch.cdist``), second derivative finite.

    Args:
        x: ``(..., n, d)`` floating tensor.
        y: ``(..., m, d)`` floating tensor, or None for ``y = x``; batch dimensions
           broadcast.

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
    for name, t in (("x", x), ("y", y)):
        if t.dim() < 2:
            raise ValueError(
                f"nanguard.distance_matrix: `{name}` must have shape (..., rows, features), "
                f"got shape {tuple(t.shape)}"
            )
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(
            f"nanguard.distance_matrix: x and y need the same number of features (last "
            f"dimension), got {x.shape[-1]} and {y.shape[-1]}"
        )
    try:
        batch = broadcast_shape(x.shape[:-2], y.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"nanguard.distance_matrix: batch dimensions {tuple(x.shape[:-2])} and "
            f"{tuple(y.shape[:-2])} do not broadcast"
        ) from None
    dtype = torch.promote_types(x.dtype, y.dtype)
    # torch.cdist has no float16/bfloat16 kernel on CPU: compute in float32, return in dtype
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    xc = x.to(compute).expand(*batch, *x.shape[-2:])
    yc = y.to(compute).expand(*batch, *y.shape[-2:])
    return apply_op(_DistanceMatrix, xc, yc).to(dtype)
