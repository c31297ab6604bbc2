"""Exponentials and logarithms: ``softplus``, ``logaddexp``, ``logsumexp``."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F

from nanguard.torch._checks import as_floating, broadcast_pair, check_dim, check_floating, check_mask, check_number
from nanguard.torch.ops._core import (
    public_op,
    SafeFunction,
    apply_op,
    can_branch_on_data,
    compute_dtype,
    lowest,
    may_hold_nan,
    sum_to,
    unsqueeze_dims,
)

# Above beta*x = t, log1p(exp(-beta*x)) is below half an ulp of x in the compute precision
# (float32 for float16/bfloat16/float32, float64 for float64), so returning x is exact
# after rounding: the switch is invisible, unlike torch's fixed threshold of 20 in float64.
_SOFTPLUS_EXACT_THRESHOLD = {torch.float64: 37.0}
_SOFTPLUS_DEFAULT_THRESHOLD = 20.0


@public_op()
def softplus(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    r"""Softplus ``log(1 + exp(beta * x)) / beta``, finite for every finite input.

    .. math:: \operatorname{softplus}(x) = \tfrac{1}{\beta}\log\!\left(1 + e^{\beta x}\right),
              \qquad \frac{d}{dx} = \sigma(\beta x)

    The textbook ``x.exp().log1p()`` overflows to inf for ``x > 88`` (float32) or ``x > 11``
    (float16), and masking the inf with ``torch.where`` still leaves a NaN *gradient*
    (``0 * inf``). This op is exact everywhere: for large ``beta * x`` it returns ``x``
    only where ``log1p(exp(-beta * x))`` is below half an ulp of ``x``, so there is no
    visible jump in value or gradient (float64 included).

    Singular points: none. Limits: value -> 0 and gradient -> 0 as x -> -inf;
    value -> x and gradient -> 1 as x -> +inf, reached exactly in every dtype.

    Args:
        x: floating tensor of any shape.
        beta: a finite number > 0.

    Example:
        >>> x = torch.tensor([0.0, 1.0, 100.0], requires_grad=True)
        >>> nanguard.softplus(x)
        tensor([  0.6931,   1.3133, 100.0000], grad_fn=<SoftplusBackward0>)
        >>> nanguard.softplus(x).sum().backward(); x.grad
        tensor([0.5000, 0.7311, 1.0000])
    """
    check_floating(x, "x", "softplus")
    beta = check_number(beta, "beta", "softplus", positive=True)
    threshold = _SOFTPLUS_EXACT_THRESHOLD.get(x.dtype, _SOFTPLUS_DEFAULT_THRESHOLD)
    return F.softplus(x, beta=beta, threshold=threshold)


def _exp_shifted(x: torch.Tensor, shift: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """grad * exp(x - shift), in place when no graph is built."""
    if torch.is_grad_enabled():
        return grad * torch.exp(x - shift)
    return torch.sub(x, shift).exp_().mul_(grad)


def _sigmoid_of_difference(a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """grad * sigmoid(a - b), with 0 where a = b = -inf (their difference is NaN)."""
    if torch.is_grad_enabled():
        both_neg_inf = torch.isneginf(a) & torch.isneginf(b)
        difference = torch.where(both_neg_inf, torch.zeros_like(a), a) - torch.where(both_neg_inf, torch.zeros_like(b), b)
        return torch.where(both_neg_inf, torch.zeros_like(grad), grad * torch.sigmoid(difference))
    # the only NaN a - b makes from non-NaN inputs is -inf - -inf: weight 0 there, as in
    # the differentiable branch; a NaN input keeps its NaN
    difference = torch.sub(a, b)
    if not can_branch_on_data(difference) or may_hold_nan(difference):
        difference = torch.where(torch.isneginf(a) & torch.isneginf(b), float("-inf"), difference)
    return difference.sigmoid_().mul_(grad)


class _LogAddExp(SafeFunction):
    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.logaddexp(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b = ctx.saved_tensors
        # d/da = sigmoid(a - b): exact even when a and b are huge and close, where
        # exp(a - logaddexp(a, b)) suffers from the rounding of the result.
        grad_a = sum_to(_sigmoid_of_difference(a, b, grad), a.shape) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(_sigmoid_of_difference(b, a, grad), b.shape) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


@public_op()
def logaddexp(a: torch.Tensor, b: Union[torch.Tensor, float]) -> torch.Tensor:
    r"""``log(exp(a) + exp(b))`` with a NaN-free gradient when both inputs are -inf.

    .. math:: \operatorname{logaddexp}(a, b) = \log(e^a + e^b), \qquad
              \frac{\partial}{\partial a} = \sigma(a - b)

    ``torch.logaddexp`` returns -inf for ``a = b = -inf`` but its gradient there is NaN
    (``exp(-inf - (-inf))``). Broadcasts like ``torch.logaddexp``.

    Singular points:
        * ``a = b = -inf`` (e.g. two masked scores): value -inf, gradient 0 for both.
        * ``a = -inf``, ``b`` finite: value ``b``, gradients 0 and 1.

    Example:
        >>> a = torch.tensor([float("-inf"), 0.0], requires_grad=True)
        >>> nanguard.logaddexp(a, torch.tensor([float("-inf"), 0.0])).sum().backward()
        >>> a.grad
        tensor([0.0000, 0.5000])
    """
    check_floating(a, "a", "logaddexp")
    b = as_floating(b, a, "b", "logaddexp")
    broadcast_pair(a, b, "logaddexp")
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = a.to(dtype), b.to(dtype)
    # torch.compile cannot trace a Function that receives one tensor twice
    return apply_op(_LogAddExp, a, b.view_as(b) if b is a else b)


class _LogSumExp(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dims: tuple, keepdim: bool) -> torch.Tensor:
        return torch.logsumexp(x, dims, keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, dims, keepdim = inputs
        ctx.dims, ctx.keepdim = dims, keepdim
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        out = unsqueeze_dims(out, ctx.dims, ctx.keepdim, x.dim())
        grad = unsqueeze_dims(grad, ctx.dims, ctx.keepdim, x.dim())
        # An all -inf slice has out = -inf; its finite stand-in makes every weight exp(-inf) = 0.
        shift = torch.clamp_min(out, lowest(out.dtype))
        return _exp_shifted(x, shift, grad), None, None


@public_op()
def logsumexp(
    x: torch.Tensor,
    dim: Union[int, Sequence[int]],
    keepdim: bool = False,
    mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    r"""``log(sum(exp(x)))`` over ``dim``, optionally over the kept entries only.

    .. math:: \operatorname{logsumexp}(x) = \log \sum_{i:\,m_i} e^{x_i}, \qquad
              \frac{\partial}{\partial x_i} = m_i\, e^{x_i - \operatorname{logsumexp}(x)}

    ``torch.logsumexp`` returns -inf for a slice that is all -inf but its gradient there is
    NaN. This op agrees with it everywhere else.

    Singular points:
        * a slice that is all -inf, or all masked out (or empty): value -inf, gradient 0.
        * masked entries (``mask`` False): no gradient (exactly 0), whatever they hold,
          NaN and inf included.

    Args:
        x: floating tensor.
        dim: dimension or dimensions to reduce.
        keepdim: keep the reduced dimensions with size 1.
        mask: optional bool tensor broadcastable to ``x``; True keeps an entry.

    Example:
        >>> x = torch.full((2, 3), float("-inf"), requires_grad=True)
        >>> nanguard.logsumexp(x, dim=1).sum().backward()
        >>> x.grad
        tensor([[0., 0., 0.],
                [0., 0., 0.]])
    """
    check_floating(x, "x", "logsumexp")
    dims = check_dim(x, dim, "logsumexp", allow_none=False)
    if mask is not None:
        check_mask(mask, x, "logsumexp")
        x = torch.where(mask, x, float("-inf"))
    if x.dtype in (torch.float16, torch.bfloat16):
        # in float32, and the float32 result is what backward reuses: exp(x - lse) from an
        # lse rounded to bfloat16 (8 bits) is off by up to |lse| * 2^-8 in the exponent
        return apply_op(_LogSumExp, x.to(compute_dtype(x.dtype)), dims, bool(keepdim)).to(x.dtype)
    return apply_op(_LogSumExp, x, dims, bool(keepdim))
