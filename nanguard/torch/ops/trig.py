"""Inverse trigonometry with finite gradients at ±1: ``acos``, ``asin``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nanguard.core.dtypes import trig_rounding_tolerance
from nanguard.core.opspec import document
from nanguard.torch._checks import check_floating
from nanguard.torch.ops._core import SafeFunction, apply_op, can_branch_on_data, may_hold_nan, public_op

def _pull_into_range(x: torch.Tensor) -> torch.Tensor:
    """Move inputs at most `tol` outside [-1, 1] onto ±1 (exactly); leave the rest alone.

    Without comparisons: subtract the overshoot, but never more than tol, so an input
    further out stays outside and gives NaN like the textbook op.
    """
    tol = trig_rounding_tolerance(str(x.dtype))
    overshoot = torch.sub(x, torch.clamp(x, -1.0, 1.0))
    # (out of place under vmap, which has no batching rule for clamp_)
    overshoot = overshoot.clamp_(-tol, tol) if can_branch_on_data(x) else overshoot.clamp(-tol, tol)
    return torch.sub(x, overshoot)


class _InverseSine(SafeFunction):
    """asin (sign=+1) and acos (sign=-1) share the derivative ±1/sqrt(1 - x²)."""

    @staticmethod
    def forward(x: torch.Tensor, sign: float) -> torch.Tensor:
        inside = _pull_into_range(x)
        return torch.asin(inside) if sign > 0 else torch.acos(inside)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.sign = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        # where the value is NaN (NaN input, or |x| beyond the rounding tolerance) the
        # gradient is NaN too. A select, not `out * 0`: inductor folds `x * 0` to 0.
        value = out.detach()
        if torch.is_grad_enabled():
            nan_where_value_is = torch.where(torch.isnan(value), value, torch.zeros((), dtype=value.dtype))
            inside = torch.clamp(x, -1.0, 1.0)
            room = (1 - inside) * (1 + inside)
            open_interval = room > 0
            safe_room = torch.where(open_interval, room, torch.ones_like(room))
            local = torch.where(open_interval, torch.rsqrt(safe_room), torch.zeros_like(room))
            return ctx.sign * grad * local + nan_where_value_is, None
        # (1 - x)(1 + x) rather than 1 - x², which loses all precision near ±1. It is <= 0
        # for |x| >= 1 (inputs pulled onto ±1 included): +inf there, so its rsqrt is 0.
        room = torch.rsub(x, 1.0).mul_(torch.add(x, 1.0))
        local = F.threshold(room, 0.0, float("inf")).rsqrt_().mul_(grad if ctx.sign > 0 else -grad)
        # a NaN x already gives NaN here; only |x| beyond the tolerance (value NaN, local 0)
        # needs marking, and in eager code one look at the value says whether there is any
        if can_branch_on_data(value) and not may_hold_nan(value):
            return local, None
        return local.add_(torch.where(torch.isnan(value), value, torch.zeros((), dtype=value.dtype))), None


@public_op()
@document("asin", "torch")
def asin(x: torch.Tensor) -> torch.Tensor:
    r"""``torch.asin`` has an infinite gradient at ±1 and returns NaN for ``1.0000001``, which
    a dot product of unit vectors easily produces.

    Example:
        >>> x = torch.tensor([1.0, 0.5], requires_grad=True)
        >>> nanguard.asin(x).sum().backward(); x.grad
        tensor([0.0000, 1.1547])
    """
    check_floating(x, "x", "asin")
    return apply_op(_InverseSine, x, 1.0)


@public_op()
@document("acos", "torch")
def acos(x: torch.Tensor) -> torch.Tensor:
    r"""The angle between two vectors, ``acos(cosine_similarity(a, b))``, has an infinite
    gradient for parallel vectors and is NaN when rounding pushes the cosine to
    ``1.0000001``.

    Example:
        >>> x = torch.tensor([1.0000001, 0.0], requires_grad=True)
        >>> nanguard.acos(x)
        tensor([0.0000, 1.5708], grad_fn=<_InverseSineBackward>)
    """
    check_floating(x, "x", "acos")
    return apply_op(_InverseSine, x, -1.0)
