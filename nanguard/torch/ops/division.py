"""Division that cannot produce NaN: ``div`` (divide-no-nan) and ``masked_mean``."""

from __future__ import annotations

from typing import Sequence, Tuple, Union

import torch

from nanguard.core.opspec import document
from nanguard.torch._checks import broadcast_pair, check_dim, check_floating, check_mask, check_number, check_real
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, compute_dtype, fill_at, may_hold_nan, nan_where_nan, public_op,
    sum_to, zero_positions,
)


class _Div(SafeFunction):
    """Returns (quotient, where b == 0); the positions are kept for the backward pass."""

    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor, fill: float):
        quotient = torch.div(a, b)
        is_zero = zero_positions(b, quotient)
        return fill_at(quotient, _without_nan(is_zero, a, quotient), fill), is_zero

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        a, b, _ = inputs
        ctx.mark_non_differentiable(outputs[1])
        ctx.save_for_backward(a, b, *outputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _mask: torch.Tensor):
        a, b, out, is_zero = ctx.saved_tensors
        grad_a = grad_b = None
        if torch.is_grad_enabled():
            nonzero = b != 0
            safe_b = torch.where(nonzero, b, torch.ones_like(b))
            grad_a = torch.where(nonzero, grad / safe_b, torch.zeros_like(grad))
            grad_b = torch.where(nonzero, -(grad * out) / safe_b, torch.zeros_like(grad))
        else:
            # whatever the divisions make where b == 0 is overwritten by the convention's 0
            if ctx.needs_input_grad[0]:
                grad_a = fill_at(torch.div(grad, b), is_zero, 0.0)
            if ctx.needs_input_grad[1]:
                # d(a/b)/db = -(a/b)/b: multiply by the quotient first, so a tiny b cannot
                # overflow an intermediate that the product would have brought back
                grad_b = fill_at(torch.mul(grad, out).div_(b).neg_(), is_zero, 0.0)
        # NaN in, NaN out: at a NaN quotient (a NaN numerator or denominator) both derivatives
        # are NaN, also where 1/b does not read a and where b = 0 (the convention's 0 is for numbers)
        grad_a = None if grad_a is None else nan_where_nan(grad_a, out)
        grad_b = None if grad_b is None else nan_where_nan(grad_b, out)
        return (
            sum_to(grad_a, a.shape) if ctx.needs_input_grad[0] else None,
            sum_to(grad_b, b.shape) if ctx.needs_input_grad[1] else None,
            None,
        )


def _result_dtype(a: torch.Tensor, b: torch.Tensor) -> torch.dtype:
    """``torch.result_type`` for two floating tensors (which torch.compile cannot trace):
    a 0-d tensor does not widen a dimensioned one."""
    if (a.dim() == 0) == (b.dim() == 0):
        return torch.promote_types(a.dtype, b.dtype)
    return a.dtype if b.dim() == 0 else b.dtype


def _without_nan(is_zero: torch.Tensor, a: torch.Tensor, quotient: torch.Tensor) -> torch.Tensor:
    """The zero-denominator positions where `a` is not NaN: a NaN numerator stays NaN."""
    if is_zero.dtype == torch.bool:
        return is_zero & ~torch.isnan(a)
    if is_zero.numel() == 0:
        return is_zero
    if a.shape == quotient.shape:  # look only at the few positions being filled
        return is_zero[~torch.isnan(a.reshape(-1)[is_zero])]
    flat = torch.zeros(quotient.numel(), dtype=torch.bool, device=quotient.device)
    return flat.index_fill_(0, is_zero, True).view(quotient.shape) & ~torch.isnan(a)


@public_op()
@document("div", "torch")
def div(a: torch.Tensor, b: Union[torch.Tensor, float], fill: float = 0.0) -> torch.Tensor:
    r"""The ``torch.where(b == 0, 0, a / b)`` idiom has the right value but a NaN or inf
    gradient at ``b = 0`` (the discarded branch still divides by zero); this op gives the
    gradient of the branch actually taken. Broadcasts like ``torch.div``.

    Dtypes follow torch's promotion (as ``torch.result_type``: a 0-d tensor or a Python number
    does not widen a dimensioned tensor), and a Python number ``b`` is applied in float32
    for float16/bfloat16 ``a``, as torch does, so ``div(x_fp16, 1e5)`` is not ``x / inf``.

    Example:
        >>> nanguard.div(torch.tensor([1.0, 1.0]), torch.tensor([2.0, 0.0]))
        tensor([0.5000, 0.0000])
    """
    check_floating(a, "a", "div")
    if isinstance(b, torch.Tensor):
        check_floating(b, "b", "div")
        dtype = work = _result_dtype(a, b)
    else:
        # a Python number is kept at op-math precision (float32 for the half types), as in torch
        dtype, work = a.dtype, compute_dtype(a.dtype)
        b = torch.tensor(check_real(b, "b", "div"), dtype=work, device=a.device)
    broadcast_pair(a, b, "div")
    fill = check_number(fill, "fill", "div")
    a, b = a.to(work), b.to(work)
    # torch.compile cannot trace a Function that receives one tensor twice
    return apply_op(_Div, a, b.view_as(b) if b is a else b, fill)[0].to(dtype)


class _MaskedMean(SafeFunction):
    """Returns (mean, number of kept entries); the count is kept for the backward pass."""

    @staticmethod
    def forward(x: torch.Tensor, mask: torch.Tensor, dims: Tuple[int, ...], fill: float):
        count = mask.expand_as(x).sum(dims, keepdim=True).to(x.dtype)
        # x * mask is 4x faster than where(mask, x, 0) on CPU but lets a NaN or inf held in a
        # masked entry through (NaN * 0); where() is the fallback when a sum is not finite.
        total = torch.mul(x, mask).sum(dims, keepdim=True)
        if not (can_branch_on_data(total) and bool(torch.isfinite(total).all())):
            total = torch.where(mask, x, 0.0).sum(dims, keepdim=True)
        mean = total / torch.clamp_min(count, 1)
        if not (can_branch_on_data(total) and bool(torch.isfinite(total).all())):
            # a sum of huge entries can overflow where their mean, never larger than the
            # largest entry, does not: sum pre-divided entries for those slices
            spread = torch.where(mask, x / torch.clamp_min(count, 1), 0.0).sum(dims, keepdim=True)
            mean = torch.where(torch.isinf(total), spread, mean)
        return torch.where(count > 0, mean, fill), count

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        x, mask, ctx.dims, _ = inputs
        ctx.shape = x.shape
        ctx.mark_non_differentiable(outputs[1])
        ctx.save_for_backward(x, mask, *outputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _count: torch.Tensor):
        x, mask, mean, count = ctx.saved_tensors
        # each kept entry gets grad / count; masked entries and empty slices get 0
        share = torch.where(count > 0, grad / torch.clamp_min(count, 1), 0.0)
        if torch.is_grad_enabled():
            out = torch.where(mask, share, 0.0).expand(ctx.shape)
        else:
            out = torch.mul(share, mask).expand(ctx.shape)
        if can_branch_on_data(mean) and not may_hold_nan(mean):
            return out, None, None, None  # no kept NaN: one look at the means, not at x
        # NaN in, NaN out: a kept NaN's derivative is NaN, although 1 / count does not read it
        kept = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))
        return torch.where(torch.isnan(kept), kept, out), None, None, None


@public_op()
@document("masked_mean", "torch")
def masked_mean(
    x: torch.Tensor,
    mask: torch.Tensor,
    dim: Union[int, Sequence[int], None],
    keepdim: bool = False,
    fill: float = 0.0,
) -> torch.Tensor:
    r"""Mean pooling over padded sequences written as ``x.sum(1) / lengths`` is NaN for an
    empty sequence (0/0), and ``(x * mask).sum()`` is NaN when a padded entry holds NaN.

    Example:
        >>> x = torch.tensor([[1.0, 3.0, float("nan")], [5.0, 7.0, 9.0]])
        >>> keep = torch.tensor([[True, True, False], [False, False, False]])
        >>> nanguard.masked_mean(x, keep, dim=1)
        tensor([2., 0.])
    """
    check_floating(x, "x", "masked_mean")
    check_mask(mask, x, "masked_mean")
    dims = check_dim(x, dim, "masked_mean")
    fill = check_number(fill, "fill", "masked_mean")
    dims = tuple(range(x.dim())) if dims is None else dims
    mean = apply_op(_MaskedMean, x.to(compute_dtype(x.dtype)), mask, dims, fill)[0]
    if not keepdim:
        mean = mean.squeeze(dims) if dims else mean
    return mean.to(x.dtype)
