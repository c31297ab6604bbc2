"""Division that cannot produce NaN: ``div`` (divide-no-nan) and ``masked_mean``."""

from __future__ import annotations

from typing import Sequence, Union

import torch

from nanguard._checks import as_floating, broadcast_pair, check_dim, check_floating, check_mask, check_number
from nanguard.ops._core import SafeFunction, can_branch_on_data, compute_dtype, sum_to, zero_indicator


class _Div(SafeFunction):
    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor, fill: float) -> torch.Tensor:
        is_zero = zero_indicator(b)
        # b + 1 at the zeros and b + 0 = b (exactly) elsewhere: a denominator that is never 0
        quotient = torch.div(a, torch.add(b, is_zero))
        quotient = quotient.mul_(torch.sub(1, is_zero))
        return quotient.add_(is_zero, alpha=fill) if fill != 0.0 else quotient

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b, fill = inputs
        ctx.save_for_backward(a, b, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b, out = ctx.saved_tensors
        if torch.is_grad_enabled():
            nonzero = b != 0
            safe_b = torch.where(nonzero, b, torch.ones_like(b))
            grad_a = torch.where(nonzero, grad / safe_b, torch.zeros_like(grad))
            grad_b = torch.where(nonzero, -(grad * out) / safe_b, torch.zeros_like(grad))
        else:
            is_zero = zero_indicator(b)
            denominator = torch.add(b, is_zero)
            is_nonzero = is_zero.neg_().add_(1)
            grad_a = torch.div(grad, denominator).mul_(is_nonzero)
            # d(a/b)/db = -(a/b)/b: divide last, so a tiny b cannot make inf * 0
            grad_b = None
            if ctx.needs_input_grad[1]:
                grad_b = torch.mul(grad, out).div_(denominator).mul_(is_nonzero.neg_())
        return (
            sum_to(grad_a, a.shape) if ctx.needs_input_grad[0] else None,
            sum_to(grad_b, b.shape) if ctx.needs_input_grad[1] else None,
            None,
        )


def div(a: torch.Tensor, b: Union[torch.Tensor, float], fill: float = 0.0) -> torch.Tensor:
    r"""Divide-no-nan: ``a / b`` where ``b != 0`` and ``fill`` where ``b == 0``.

    .. math:: \operatorname{div}(a, b) = \begin{cases} a / b & b \ne 0 \\ \text{fill} & b = 0
              \end{cases}, \qquad \frac{\partial}{\partial a} = \frac{1}{b},\quad
              \frac{\partial}{\partial b} = -\frac{a}{b^2} \quad (b \ne 0)

    The ``torch.where(b == 0, 0, a / b)`` idiom has the right value but a NaN or inf
    gradient at ``b = 0`` (the discarded branch still divides by zero); this op gives the
    gradient of the branch actually taken. Broadcasts like ``torch.div``.

    Singular points:
        * ``b = 0`` (either sign of zero): value ``fill``, gradient 0 for ``a`` and ``b``
          (the result does not depend on them there).
        * tiny nonzero ``b``: the exact quotient, which may overflow to inf, as in torch.

    Args:
        a: numerator (floating tensor).
        b: denominator, tensor or number.
        fill: finite number returned where ``b == 0``.

    Example:
        >>> nanguard.div(torch.tensor([1.0, 1.0]), torch.tensor([2.0, 0.0]))
        tensor([0.5000, 0.0000])
    """
    check_floating(a, "a", "div")
    b = as_floating(b, a, "b", "div")
    broadcast_pair(a, b, "div")
    fill = check_number(fill, "fill", "div")
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = a.to(dtype), b.to(dtype)
    # torch.compile cannot trace a Function that receives one tensor twice
    return _Div.apply(a, b.view_as(b) if b is a else b, fill)


def masked_mean(
    x: torch.Tensor,
    mask: torch.Tensor,
    dim: Union[int, Sequence[int], None],
    keepdim: bool = False,
    fill: float = 0.0,
) -> torch.Tensor:
    r"""Mean of the kept entries of ``x`` over ``dim``; an empty slice gives ``fill``.

    .. math:: \operatorname{masked\_mean}(x) = \frac{\sum_i m_i x_i}{\sum_i m_i}, \qquad
              \frac{\partial}{\partial x_i} = \frac{m_i}{\sum_j m_j}

    Mean pooling over padded sequences written as ``x.sum(1) / lengths`` is NaN for an
    empty sequence (0/0), and ``(x * mask).sum()`` is NaN when a padded entry holds NaN.

    Singular points:
        * a slice with no kept entry (empty sequence): value ``fill``, gradient 0.
        * masked entries (``mask`` False): no gradient (exactly 0) and no influence on the
          value, whatever they hold, NaN and inf included.

    Args:
        x: floating tensor.
        mask: bool tensor broadcastable to ``x``; True keeps an entry.
        dim: dimension(s) to average over, or None for all.
        keepdim: keep reduced dimensions with size 1.
        fill: finite number returned for empty slices.

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
    kept = torch.where(mask, x.to(compute_dtype(x.dtype)), 0.0)
    count = mask.expand_as(x).sum(dims, keepdim=True).to(kept.dtype)
    total = kept.sum(dims, keepdim=True)
    mean = div(total, count, fill=fill)
    if not can_branch_on_data(total) or not bool(torch.isfinite(total).all()):
        # the sum overflowed although the mean, never larger than the largest entry, may be
        # finite: sum pre-divided entries for those slices
        rescued = (kept * div(torch.ones_like(count), count)).sum(dims, keepdim=True)
        mean = torch.where(torch.isinf(total), rescued, mean)
    if not keepdim:
        mean = mean.squeeze(dims) if dims else mean
    return mean.to(x.dtype)
