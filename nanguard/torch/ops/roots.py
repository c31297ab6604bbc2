"""Roots and fractional powers: ``sqrt`` and ``pow`` with finite gradients at 0."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nanguard.core.opspec import document
from nanguard.torch._checks import check_floating, check_number
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, may_hold_nan, nonpositive_is_singular, public_op,
)

_INF = float("inf")


class _Sqrt(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, 0).sqrt_()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (root,) = ctx.saved_tensors
        if torch.is_grad_enabled():
            positive = nonpositive_is_singular(root)
            safe_root = torch.where(positive, root, torch.ones_like(root))
            return torch.where(positive, grad * 0.5 / safe_root, torch.zeros_like(grad))
        # a root of 0 becomes +inf, so grad / (2 root) is exactly 0 there (two passes, as torch)
        return torch.addcdiv(grad.new_zeros(()), grad, F.threshold(root, 0.0, _INF), value=0.5)


@public_op()
@document("sqrt", "torch")
def sqrt(x: torch.Tensor) -> torch.Tensor:
    r"""``torch.sqrt`` has gradient ``1 / (2 sqrt(x))``: +inf at ``x = 0``, and NaN once an
    upstream zero (from ``where``, a mask, a ReLU) multiplies it. This op returns the same
    values and gradients everywhere else.

    Example:
        >>> x = torch.tensor([0.0, 4.0], requires_grad=True)
        >>> nanguard.sqrt(x).sum().backward()
        >>> x.grad
        tensor([0.0000, 0.2500])
    """
    check_floating(x, "x", "sqrt")
    return apply_op(_Sqrt, x)


class _NonNegativePow(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, exponent: float) -> torch.Tensor:
        return torch.clamp_min(x, 0).pow_(exponent)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, exponent = inputs
        ctx.exponent = exponent
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, result = ctx.saved_tensors
        p = ctx.exponent
        clamped = torch.clamp_min(x, 0)
        if torch.is_grad_enabled():
            positive = nonpositive_is_singular(clamped)
            safe_x = torch.where(positive, clamped, torch.ones_like(clamped))
            local = torch.pow(safe_x, p - 1) if p != 1 else safe_x / safe_x  # NaN ** 0 is 1; NaN / NaN is not
            return torch.where(positive, grad * p * local, torch.zeros_like(grad)), None
        if p > 1:
            return torch.pow(clamped, p - 1).mul_(p).mul_(grad), None  # 0 at 0 already; NaN stays NaN
        if p == 1:
            local = torch.sign(clamped)
        else:
            # p x^(p-1) = p x^p / x for x > 0 (multiplying by p first keeps float16 from
            # overflowing); 0/0 at x <= 0 is the only NaN this makes from finite x, and it is
            # exactly where the convention says 0.
            local = torch.mul(result, p).div_(clamped).nan_to_num_(nan=0.0, posinf=_INF, neginf=-_INF)
        if not can_branch_on_data(x) or may_hold_nan(x):
            local = torch.where(torch.isnan(x), x, local)  # sign(NaN) is 0: a NaN input keeps its NaN gradient
        return local.mul_(grad), None


@public_op()
@document("pow", "torch")
def pow(x: torch.Tensor, exponent: float) -> torch.Tensor:
    r"""For ``0 < p < 1``, ``torch.pow(x, p)`` has an infinite gradient at ``x = 0`` (and NaN
    behind a mask). This op equals ``torch.pow`` for ``x > 0``.

    Example:
        >>> x = torch.tensor([0.0, 8.0], requires_grad=True)
        >>> nanguard.pow(x, 1 / 3).sum().backward()
        >>> x.grad
        tensor([0.0000, 0.0833])
    """
    check_floating(x, "x", "pow")
    p = check_number(exponent, "exponent", "pow", positive=True)
    return apply_op(_NonNegativePow, x, p)
