"""``0 · log 0 = 0``: ``xlogy``, ``entropy`` and ``cross_entropy_probs`` with finite gradients."""

from __future__ import annotations

from typing import Union

import torch

from nanguard.core.opspec import document
from nanguard.torch._checks import as_floating, broadcast_pair, broadcast_shape, check_dim, check_floating
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, compute_dtype, lowest, nan_where_nan, nonpositive_is_singular,
    pow2_scale, public_op, sum_to, zero_indicator, zero_over_zero_to_zero,
)


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
            # only x = y = 0 is the convention's point; at x = 0 < y, d/dy = x / y is 0 by
            # itself, and its own derivative in x, 1 / y, must not be cut off there
            both_zero = (x == 0) & (y == 0)
            if ctx.needs_input_grad[0]:
                grad_x = grad * torch.log(torch.where(both_zero, torch.ones_like(y), y))
            if ctx.needs_input_grad[1]:
                safe_y = torch.where(both_zero, torch.ones_like(y), y)
                grad_y = torch.where(both_zero, torch.zeros_like(grad), grad * x / safe_y)
        else:
            if ctx.needs_input_grad[0]:
                # d/dx = log y; only at x = y = 0, where log y = -inf, the convention gives 0:
                # log(y + 1) there, log(y + 0) = log y everywhere else
                both_zero = torch.mul(zero_indicator(x), zero_indicator(y))
                grad_x = torch.add(y, both_zero).log_().mul_(grad)
            if ctx.needs_input_grad[1]:
                # x / y is NaN from finite inputs only at 0/0, exactly where the convention is 0
                grad_y = zero_over_zero_to_zero(torch.div(x, y), x, y).mul_(grad)
        if grad_x is not None:
            # NaN in, NaN out: d/dx = log y does not read x, but a NaN x has a NaN derivative
            grad_x = nan_where_nan(sum_to(grad_x, x.shape), x)
        if grad_y is not None:
            grad_y = sum_to(grad_y, y.shape)  # x / y: NaN for a NaN x or y
        return grad_x, grad_y


@public_op(reports_inf=True)
@document("xlogy", "torch")
def xlogy(x: torch.Tensor, y: Union[torch.Tensor, float]) -> torch.Tensor:
    r"""``torch.xlogy`` has the right value but its gradient with respect to ``y`` at
    ``x = y = 0`` is ``0 / 0 = NaN``; the hand-written ``x * torch.log(y)`` is already NaN
    in the forward pass. This op equals ``torch.xlogy`` in value everywhere.

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
    return apply_op(_Xlogy, x, y.view_as(y) if y is x else y)


class _Entropy(SafeFunction):
    """Returns (entropy, clamped log p); the second output is kept for the backward pass."""

    @staticmethod
    def forward(p: torch.Tensor, dim: int):
        # log 0 = -inf becomes the lowest finite number, so 0 * log 0 is 0 * finite = 0
        # (a clamp of p itself would break under flush-to-zero and for subnormal p).
        log_p = torch.log(p).clamp_min_(lowest(p.dtype))
        return torch.mul(p, log_p).sum(dim).neg_(), log_p

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        p, ctx.dim = inputs
        ctx.mark_non_differentiable(outputs[1])
        ctx.save_for_backward(p, outputs[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _unused: torch.Tensor):
        p, log_p = ctx.saved_tensors
        grad = grad.unsqueeze(ctx.dim) if p.dim() else grad
        if torch.is_grad_enabled():
            positive = nonpositive_is_singular(p)
            safe_p = torch.where(positive, p, torch.ones_like(p))
            return torch.where(positive, -(torch.log(safe_p) + 1) * grad, torch.zeros_like(p)), None
        # -(log p + 1), times sign(p) = 0 at p = 0, where log_p holds a finite stand-in
        local = torch.add(log_p, 1).mul_(torch.sign(p))
        return local.mul_(grad.neg()), None


@public_op()
@document("entropy", "torch")
def entropy(p: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""The textbook ``-(p * p.log()).sum()`` is NaN as soon as one probability is exactly 0;
    clipping ``p`` to ``1e-10`` biases it and zeroes the gradient at the bound.

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
    return apply_op(_Entropy, p.to(compute_dtype(p.dtype)), axis)[0].to(p.dtype)


class _CrossEntropy(SafeFunction):
    """Returns (-sum(t log q), log q with 0 where t = q = 0 for the target's gradient; empty
    when the target needs none)."""

    @staticmethod
    def forward(target: torch.Tensor, probs: torch.Tensor, dim: int):
        if can_branch_on_data(probs):
            # xlogy(t, q) is t·log q with 0 wherever t = 0 (q = 0 included) and NaN for a NaN
            # q: the convention's value in one pass. It is also 0 for t = 0 < -q, where the
            # textbook term 0·log(negative) is NaN, so an invalid (negative) probability
            # takes the path below and keeps its NaN; so does a target that needs a
            # gradient, which is -log q: computed here once rather than again in the backward.
            if not target.requires_grad and probs.numel() and not bool(probs.amin() < 0):
                return torch.special.xlogy(target, probs).sum(dim).neg_(), probs.new_empty(0)
            log_q = torch.log(probs)
            loss = torch.mul(target, log_q).sum(dim).neg_()
            if not bool(torch.isnan(loss).any()):
                return loss, log_q  # no 0 * log 0 anywhere: the textbook terms are right
            # 0 * log 0 = 0 * -inf is the only NaN term the convention removes: where t = 0
            # and log q = -inf (q = ±0); every other NaN (a NaN input, log of a negative
            # probability) stays
            zero_times_inf = torch.eq(target, 0) & torch.isneginf(log_q)
            log_q = torch.where(zero_times_inf, 0.0, log_q)
            return torch.mul(target, log_q).sum(dim).neg_(), log_q
        # log(q + 1) = 0 exactly where t = q = 0, log(q + 0) = log q everywhere else: terms
        # with t = 0 are 0 * finite, and t > 0 with q = 0 stays the true +inf
        both_zero = torch.mul(zero_indicator(target), zero_indicator(probs))
        log_q = both_zero.add_(probs).log_()
        return torch.mul(target, log_q).sum(dim).neg_(), log_q

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        target, probs, ctx.dim = inputs
        ctx.mark_non_differentiable(outputs[1])
        ctx.save_for_backward(target, probs, outputs[1])

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _unused: torch.Tensor):
        target, probs, log_q = ctx.saved_tensors
        grad = grad.unsqueeze(ctx.dim) if log_q.dim() else grad
        grad_t = grad_q = None
        if torch.is_grad_enabled():
            # as in xlogy: only t = q = 0 is the convention's point (d/dq = -t / q is 0 at
            # t = 0 < q by itself, and its derivative in t, -1 / q, must not be cut off)
            both_zero = (target == 0) & (probs == 0)
            if ctx.needs_input_grad[0]:
                grad_t = -grad * torch.log(torch.where(both_zero, torch.ones_like(probs), probs))
            if ctx.needs_input_grad[1]:
                safe_q = torch.where(both_zero, torch.ones_like(probs), probs)
                grad_q = torch.where(both_zero, torch.zeros_like(safe_q), -grad * target / safe_q)
        else:
            minus_grad = grad.neg()  # one value per slice: cheaper than negating a full tensor
            if ctx.needs_input_grad[0]:
                grad_t = torch.mul(log_q, minus_grad)
            if ctx.needs_input_grad[1]:
                # t / q is NaN from finite inputs only at 0/0, where the convention is 0
                grad_q = zero_over_zero_to_zero(torch.div(target, probs), target, probs).mul_(minus_grad)
        # NaN in, NaN out: d/dt = -log q does not read t, but a NaN t has a NaN derivative
        return (None if grad_t is None else nan_where_nan(sum_to(grad_t, target.shape), target),
                None if grad_q is None else sum_to(grad_q, probs.shape), None)


@public_op(reports_inf=True)
@document("cross_entropy_probs", "torch")
def cross_entropy_probs(target: torch.Tensor, probs: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""The hand-written ``-tf.reduce_sum(y * tf.log(y_conv))`` of the seed stories is NaN when
    a predicted probability is exactly 0, even where the target is 0 too. It does not call
    :func:`xlogy`: it is its own autograd Function, whose forward computes ``target * log(probs)``
    with ``log probs_i`` replaced by 0 exactly where ``target_i = probs_i = 0``, and whose
    hand-written backward gives those terms gradient 0. So terms with ``target_i = 0``
    contribute 0 with gradient 0 in ``probs_i`` for every probability ``probs_i`` (0 included).
    float16/bfloat16 inputs are computed in float32; a float32 loss that comes out NaN
    (terms of opposite sign overflowing to inf - inf, for targets beyond 1e36) is recomputed
    in float64 on eager CPU; elsewhere the targets are scaled by a power of two per slice. If you have
    logits, prefer ``-(target * nanguard.log_softmax(logits, dim)).sum(dim)``.

    Example:
        >>> target = torch.tensor([0.0, 1.0, 0.0])
        >>> probs = torch.tensor([0.0, 0.9, 0.1], requires_grad=True)
        >>> nanguard.cross_entropy_probs(target, probs)
        tensor(0.1054, grad_fn=<_CrossEntropyBackward>)
    """
    check_floating(target, "target", "cross_entropy_probs")
    check_floating(probs, "probs", "cross_entropy_probs")
    broadcast_pair(target, probs, "cross_entropy_probs", ("target", "probs"))
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"nanguard.cross_entropy_probs: `dim` must be an int, got {dim!r}")
    shape = broadcast_shape(target.shape, probs.shape)
    (axis,) = check_dim(torch.empty(shape, device="meta"), dim, "cross_entropy_probs")
    dtype = torch.promote_types(target.dtype, probs.dtype)
    wide = compute_dtype(dtype)
    target, probs = target.to(wide), probs.to(wide)
    if target is probs:
        probs = probs.view_as(probs)  # torch.compile cannot trace one tensor passed twice
    # terms of opposite sign can overflow to inf - inf although their sum is finite; no
    # where() picks the repaired slices, since its zero gradient into the other branch
    # would meet that branch's inf gradient (0 · inf = NaN)
    if wide != torch.float64 and not can_branch_on_data(probs):
        # no looking at values (compile, vmap, accelerators), and no float64 (slow on most
        # GPUs): targets scaled by a power of two per slice, which is exact unless a slice
        # mixes targets above 2 with targets below 2**-149 of its largest
        full = target.expand(shape)
        scale = pow2_scale(full, (axis,))
        loss = apply_op(_CrossEntropy, full / scale, probs, axis)[0] * scale.squeeze(axis)
        return loss.to(dtype)
    loss = apply_op(_CrossEntropy, target, probs, axis)[0]
    if wide != torch.float64 and bool(torch.isnan(loss).any()):
        loss = apply_op(_CrossEntropy, target.double(), probs.double(), axis)[0].to(wide)
    return loss.to(dtype)
