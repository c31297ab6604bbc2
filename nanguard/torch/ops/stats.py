"""Spread: ``var`` and ``std`` that stay finite for constant input and tiny slices."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch

from nanguard.core.opspec import document
from nanguard.torch._checks import check_dim, check_floating
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, compute_dtype, nan_marks, numel_over, pow2_scale, public_op,
    unsqueeze_dims,
)

Dim = Union[int, Sequence[int], None]


def _check_correction(correction: object, op: str) -> float:
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"nanguard.{op}: `correction` must be a number, got {type(correction).__name__}")
    if not 0 <= correction < float("inf"):
        raise ValueError(f"nanguard.{op}: `correction` must be a finite number >= 0, got {correction}")
    return correction


class _ZeroSpread(SafeFunction):
    """The spread of a slice with no degrees of freedom left: 0, and it does not move."""

    @staticmethod
    def forward(x: torch.Tensor, dims: Optional[Tuple[int, ...]], keepdim: bool) -> torch.Tensor:
        # 0, except that a NaN in the slice stays NaN (NaN from the data is never hidden)
        return nan_marks(x).sum(dim=dims, keepdim=keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        return nan_marks(x.detach()), None, None


def _prepare(x: torch.Tensor, dim: Dim, correction: object, op: str):
    check_floating(x, "x", op)
    dims = check_dim(x, dim, op)
    if x.dim() == 0:
        dims = None
    return dims, _check_correction(correction, op)


def _shift_where_nearly_constant(x: torch.Tensor, dims, spread: torch.Tensor) -> Optional[torch.Tensor]:
    """What to subtract from ``x`` (keepdim; its mean for nearly constant slices, 0 for the
    others), or None when no slice's spread is small against its mean.

    torch rounds the mean to x's dtype before centring, and for a nearly constant slice that
    rounding is as large as the spread itself (float32 ``std([1, 1, 1, 1 + eps])`` comes out
    15% high with gradient ``[0, 0, 0, 0.58]``). Spread is shift-invariant and ``x - mean``
    is exact there (Sterbenz), so the spread of the shifted slice is the accurate one.
    Off the eager CPU path the shift is always taken (no data-dependent branch).
    """
    mean = x.mean(dim=dims, keepdim=True, dtype=compute_dtype(x.dtype))
    # a mean that overflows (huge half-precision slices) shifts nothing: those slices are
    # far from constant, and the rescue for huge values takes them
    mean = torch.where(torch.isfinite(mean), mean, 0.0)
    # |mean| / 4: below that the mean's rounding error is more than a few ulps of the spread
    nearly_constant = spread.reshape(mean.shape) < mean.abs() * 0.25
    if can_branch_on_data(x) and not bool(nearly_constant.any()):
        return None
    # only those slices move: x - mean is exact and small there, and cannot overflow
    return torch.where(nearly_constant, mean, 0.0).to(x.dtype)


@public_op()
@document("var", "torch")
def var(x: torch.Tensor, dim: Dim = None, correction: float = 1, keepdim: bool = False) -> torch.Tensor:
    r"""``torch.var`` returns NaN (with a warning) when a slice has ``N <= correction``
    elements, e.g. one element with the default ``correction=1``, or an empty slice.

    Elsewhere identical to ``torch.var`` (value, gradient, second derivative).

    Example:
        >>> nanguard.var(torch.tensor([3.0]))
        tensor(0.)
    """
    dims, correction = _prepare(x, dim, correction, "var")
    if numel_over(x, dims) - correction <= 0:
        return apply_op(_ZeroSpread, x, dims, bool(keepdim))
    out = torch.var(x, dim=dims, correction=correction, keepdim=keepdim)
    shift = _shift_where_nearly_constant(x.detach(), dims, out.detach().sqrt())
    if shift is None:
        return out
    # the shift is a constant: var(x - c) = var(x), so value and every derivative are those
    # of torch.var, taken where they are accurate
    return torch.var(x - shift, dim=dims, correction=correction, keepdim=keepdim)


def _std_value(x: torch.Tensor, dims, correction: float, keepdim: bool) -> torch.Tensor:
    out = torch.std(x, dim=dims, correction=correction, keepdim=keepdim)
    shift = _shift_where_nearly_constant(x, dims, out)
    if shift is not None:
        x = x - shift
        out = torch.std(x, dim=dims, correction=correction, keepdim=keepdim)
    # torch accumulates float32 in float64, but float64 and bfloat16 slices whose squares
    # overflow (|x| > 1e154 or 1e19) come back inf although the std is finite, and slices
    # whose squares underflow (float64 |x| < 1e-154) come back 0 or short: redo those on
    # inputs scaled by a power of two, which is exact.
    lo = torch.finfo(out.dtype).tiny ** 0.5 / torch.finfo(out.dtype).eps
    suspect = torch.isinf(out) | (out < lo)
    if can_branch_on_data(out) and not bool(suspect.any()):
        return out
    scale = pow2_scale(x, dims)
    scaled = torch.std(x / scale, dim=dims, correction=correction, keepdim=True) * scale
    if not keepdim:
        scaled = scaled.reshape(out.shape)
    return torch.where(suspect, scaled, out)


def _centred(x: torch.Tensor, dims) -> torch.Tensor:
    """x minus its mean, centred a second time to remove the rounding error of the first mean."""
    centred = x - x.mean(dim=dims, keepdim=True)
    return centred - centred.mean(dim=dims, keepdim=True)


class _Std(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dims, correction: float, keepdim: bool) -> torch.Tensor:
        return _std_value(x, dims, correction, keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.dims, ctx.correction, ctx.keepdim = inputs
        ctx.dof = numel_over(x, ctx.dims) - ctx.correction
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, std = ctx.saved_tensors
        dims = tuple(range(x.dim())) if ctx.dims is None else ctx.dims
        std = unsqueeze_dims(std, dims, ctx.keepdim, x.dim())
        grad = unsqueeze_dims(grad, dims, ctx.keepdim, x.dim())
        # d std / d x_i = (x_i - mean) / ((N - c) std); 0 where std = 0 (constant slice).
        # (x - mean) / std is at most sqrt(N) in size and scale-free: divide before
        # multiplying by grad, and take it from scaled inputs when std is tiny or huge
        # (a subnormal std may even have rounded to 0 for a slice that is not constant).
        # `std != 0`, not `std > 0`: a NaN std gives a NaN gradient, not the constant-slice 0
        if torch.is_grad_enabled():
            # on inputs scaled by a power of two (a constant: every derivative stays exact),
            # so that neither the centring of huge entries nor std² in the derivative of
            # 1 / std overflows or underflows
            scale = pow2_scale(x.detach(), dims)
            positive = std != 0
            safe_std = torch.where(positive, std / scale, torch.ones_like(std))
            ratio = _centred(x / scale, dims) / safe_std
            return torch.where(positive, ratio * (grad / ctx.dof), torch.zeros_like(ratio)), None, None, None
        finfo = torch.finfo(std.dtype)
        lo, hi = finfo.tiny**0.5 / finfo.eps, finfo.max**0.5 / 4
        if not (can_branch_on_data(std) and bool(((std >= lo) & (std <= hi)).all())):
            x = x / pow2_scale(x, dims)
            std = torch.std(x, dim=dims, correction=ctx.correction, keepdim=True)
        positive = std != 0
        safe_std = torch.where(positive, std, torch.ones_like(std))
        centred = _centred(x, dims)
        return centred.div_(safe_std).mul_(torch.where(positive, grad / ctx.dof, 0.0)), None, None, None


@public_op()
@document("std", "torch")
def std(x: torch.Tensor, dim: Dim = None, correction: float = 1, keepdim: bool = False) -> torch.Tensor:
    r"""``torch.std`` of a constant slice has gradient 0 but its *second* derivative is NaN, and
    for ``N <= correction`` its value is NaN. Huge inputs whose squares overflow (float64
    beyond 1e154, bfloat16 beyond 1e19) still give the finite standard deviation.

    Example:
        >>> x = torch.ones(4, requires_grad=True)
        >>> nanguard.std(x).backward(); x.grad
        tensor([0., 0., 0., 0.])
    """
    dims, correction = _prepare(x, dim, correction, "std")
    if numel_over(x, dims) - correction <= 0:
        return apply_op(_ZeroSpread, x, dims, bool(keepdim))
    return apply_op(_Std, x, dims, correction, bool(keepdim))
