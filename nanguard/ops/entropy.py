"""``0 · log 0 = 0``: ``xlogy``, ``entropy`` and ``cross_entropy_probs`` with finite gradients."""

from __future__ import annotations

from typing import Union

import torch

from nanguard._checks import as_floating, broadcast_pair, check_dim, check_floating
from nanguard.ops._core import SafeFunction, can_branch_on_data, compute_dtype, lowest, sum_to, zero_indicator


class _Xlogy(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.xlogy(x, y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, y = ctx.saved_tensors
        grad_x = grad_y = None
        if torch.is_grad_enabled():
            nonzero = x != 0
            if ctx.needs_input_grad[0]:
                both_zero = (x == 0) & (y == 0)
                grad_x = grad * torch.log(torch.where(both_zero, torch.ones_like(y), y))
            if ctx.needs_input_grad[1]:
                safe_y = torch.where(nonzero, y, torch.ones_like(y))
                grad_y = torch.where(nonzero, grad * x / safe_y, torch.zeros_like(grad))
        else:
            if ctx.needs_input_grad[0]:
                # d/dx = log y; only at x = y = 0, where log y = -inf, the convention gives 0:
                # log(y + 1) there, log(y + 0) = log y everywhere else
                both_zero = torch.mul(zero_indicator(x), zero_indicator(y))
                grad_x = torch.add(y, both_zero).log_().mul_(grad)
            if ctx.needs_input_grad[1]:
                # x / y is NaN from finite inputs only at 0/0, exactly where the convention is 0
                grad_y = torch.div(x, y).nan_to_num_(nan=0.0, posinf=float("inf"), neginf=float("-inf")).mul_(grad)
        if grad_x is not None:
            grad_x = sum_to(grad_x, x.shape)
        if grad_y is not None:
            grad_y = sum_to(grad_y, y.shape)
        return grad_x, grad_y


def xlogy(x: torch.Tensor, y: Union[torch.Tensor, float]) -> torch.Tensor:
    r"""``x * log(y)`` with ``0 · log 0 = 0`` and finite gradients there.

    .. math:: \operatorname{xlogy}(x, y) = \begin{cases} 0 & x = 0 \\ x \log y & x \ne 0
              \end{cases}, \qquad \frac{\partial}{\partial x} = \log y, \quad
              \frac{\partial}{\partial y} = \frac{x}{y} \quad (x \ne 0)

    ``torch.xlogy`` has the right value but its gradient with respect to ``y`` at
    ``x = y = 0`` is ``0 / 0 = NaN``; the hand-written ``x * torch.log(y)`` is already NaN
    in the forward pass. This op equals ``torch.xlogy`` in value everywhere.

    Singular points:
        * ``x = y = 0``: value 0, both gradients 0 (where ``d/dx = log y = -inf``).
        * ``x = 0, y > 0``: value 0, gradient ``log y`` in ``x`` (the true partial
          derivative; ``torch.xlogy`` reports 0 here) and 0 in ``y``.
        * ``x != 0, y = 0``: value ``-inf * sign(x)``; it is a real infinity, not hidden.
        * ``y < 0`` or NaN: value NaN, as in torch.

    Example:
        >>> p = torch.tensor([0.0, 0.5], requires_grad=True)
        >>> nanguard.xlogy(p, p).sum().backward()
        >>> p.grad
        tensor([0.0000, 0.3069])
    """
    check_floating(x, "x", "xlogy")
    y = as_floating(y, x, "y", "xlogy")
    broadcast_pair(x, y, "xlogy", ("x", "y"))
    dtype = torch.promote_types(x.dtype, y.dtype)
    x, y = x.to(dtype), y.to(dtype)
    # torch.compile cannot trace a Function that receives one tensor twice (xlogy(p, p))
    return _Xlogy.apply(x, y.view_as(y) if y is x else y)


class _Entropy(SafeFunction):
    @staticmethod
    def forward(p: torch.Tensor, dim: int) -> torch.Tensor:
        # log 0 = -inf becomes the lowest finite number, so 0 * log 0 is 0 * finite = 0
        # (a clamp of p itself would break under flush-to-zero and for subnormal p).
        log_p = torch.log(p).clamp_min_(lowest(p.dtype))
        return torch.mul(p, log_p).sum(dim).neg_()

    @staticmethod
    def setup_context(ctx, inputs, output):
        p, ctx.dim = inputs
        ctx.save_for_backward(p)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (p,) = ctx.saved_tensors
        grad = grad.unsqueeze(ctx.dim) if p.dim() else grad
        if torch.is_grad_enabled():
            positive = p > 0
            safe_p = torch.where(positive, p, torch.ones_like(p))
            return torch.where(positive, -(torch.log(safe_p) + 1) * grad, torch.zeros_like(p)), None
        local = torch.log(p).clamp_min_(lowest(p.dtype)).add_(1).mul_(torch.sign(p))
        return local.mul_(grad).neg_(), None


def entropy(p: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Shannon entropy ``-sum(p * log p)`` over ``dim``, in nats, with ``0 · log 0 = 0``.

    .. math:: H(p) = -\sum_i p_i \log p_i, \qquad \frac{\partial H}{\partial p_i} =
              -(\log p_i + 1) \quad (p_i > 0)

    The textbook ``-(p * p.log()).sum()`` is NaN as soon as one probability is exactly 0;
    clipping ``p`` to ``1e-10`` biases it and zeroes the gradient at the bound.

    Singular points:
        * ``p_i = 0``: contributes 0, gradient 0 (where ``d/dp`` of ``-p log p`` is +inf;
          the same convention as TensorFlow's double-where recipe).
        * ``p_i < 0`` or NaN: NaN, as in the textbook formula.

    The input is not required to sum to 1; no normalisation is applied.

    Example:
        >>> p = torch.tensor([0.1, 0.2, 0.0, 0.7], requires_grad=True)
        >>> nanguard.entropy(p)
        tensor(0.8018, grad_fn=<_EntropyBackward>)
        >>> nanguard.entropy(p).backward(); p.grad
        tensor([ 1.3026,  0.6094,  0.0000, -0.6433])
    """
    check_floating(p, "p", "entropy")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"nanguard.entropy: `dim` must be an int, got {dim!r}")
    (axis,) = check_dim(p, dim, "entropy")
    # float16/bfloat16: terms and sum in float32, so one large term cannot overflow the sum
    return _Entropy.apply(p.to(compute_dtype(p.dtype)), axis).to(p.dtype)


def cross_entropy_probs(target: torch.Tensor, probs: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Cross-entropy ``-sum(target * log(probs))`` over ``dim`` between two distributions.

    .. math:: H(t, q) = -\sum_i t_i \log q_i

    The hand-written ``-tf.reduce_sum(y * tf.log(y_conv))`` of the seed stories is NaN when
    a predicted probability is exactly 0, even where the target is 0 too. Built on
    :func:`xlogy`, so terms with ``target_i = 0`` contribute 0 with gradient 0 whatever
    ``probs_i`` is (0 included). If you have logits, prefer
    ``-(target * nanguard.log_softmax(logits, dim)).sum(dim)``.

    Singular points:
        * ``target_i = 0``: term 0 and gradient 0 in ``probs_i`` (also when
          ``probs_i = 0``); the gradient in ``target_i`` is ``-log probs_i``, or 0 when
          ``probs_i = 0`` too.
        * ``target_i > 0, probs_i = 0``: +inf, the true value of the loss.

    Example:
        >>> target = torch.tensor([0.0, 1.0, 0.0])
        >>> probs = torch.tensor([0.0, 0.9, 0.1], requires_grad=True)
        >>> nanguard.cross_entropy_probs(target, probs)
        tensor(0.1054, grad_fn=<NegBackward0>)
    """
    check_floating(target, "target", "cross_entropy_probs")
    check_floating(probs, "probs", "cross_entropy_probs")
    broadcast_pair(target, probs, "cross_entropy_probs", ("target", "probs"))
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"nanguard.cross_entropy_probs: `dim` must be an int, got {dim!r}")
    shape = torch.broadcast_shapes(target.shape, probs.shape)
    check_dim(torch.empty(shape, device="meta"), dim, "cross_entropy_probs")
    dtype = torch.promote_types(target.dtype, probs.dtype)
    wide = compute_dtype(dtype)
    loss = -xlogy(target.to(wide), probs.to(wide)).sum(dim)
    if wide != torch.float64 and not (can_branch_on_data(loss) and bool(torch.isfinite(loss).all())):
        # terms of opposite sign can overflow although their sum is finite: redo in float64
        exact = -xlogy(target.double(), probs.double()).sum(dim)
        loss = torch.where(torch.isfinite(loss), loss, exact.to(wide))
    return loss.to(dtype)
