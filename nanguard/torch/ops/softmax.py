"""Softmax and log-softmax that survive fully masked (all -inf) slices."""

from __future__ import annotations

from typing import Optional

import torch

from nanguard.core.opspec import document
from nanguard.torch._compat import log_softmax_backward_data, softmax_backward_data
from nanguard.torch._checks import check_dim, check_floating, check_mask
from nanguard.torch.ops._core import SafeFunction, apply_op, can_branch_on_data, public_op, sum_is_finite

_NEG_INF = float("-inf")


def _masked_scores(x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    return x if mask is None else torch.where(mask, x, _NEG_INF)


def _repair_dead_slices(out: torch.Tensor, scores: torch.Tensor, dim: int, dead_value: float) -> torch.Tensor:
    """Give slices whose every score is -inf the value `dead_value` instead of torch's NaN.

    A slice whose scores hold NaN or +inf keeps its NaN: only the 0/0 of an empty
    distribution is repaired, never a NaN that came from the data.
    """
    if scores.dim() == 0 or scores.shape[dim] == 0:
        return out
    # torch makes a dead slice NaN throughout, so its first entry is NaN: one entry per slice
    # is enough to know that nothing needs repair
    if can_branch_on_data(scores) and not bool(torch.isnan(out.select(dim, 0)).any()):
        return out
    # a dead slice has max -inf; a NaN anywhere in the slice makes the max NaN, and +inf
    # makes it +inf, so those slices are left alone. An explicit select, not arithmetic
    # such as `max * 0`, because compilers (inductor) fold `x * 0` to 0 and hide the NaN.
    dead = torch.amax(scores, dim, keepdim=True) == _NEG_INF
    return torch.where(dead, dead_value, out)


class _Softmax(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dim: int, mask: Optional[torch.Tensor]) -> torch.Tensor:
        scores = _masked_scores(x, mask)
        return _repair_dead_slices(torch.softmax(scores, dim), scores, dim, 0.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (prob,) = ctx.saved_tensors
        # Masked and dead entries have probability 0, so the usual formula
        # p * (g - sum(g * p)) already gives them exactly 0.
        return softmax_backward_data(grad, prob, ctx.dim, prob.dtype), None, None


class _LogSoftmax(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dim: int) -> torch.Tensor:
        return _repair_dead_slices(torch.log_softmax(x, dim), x, dim, _NEG_INF)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (log_prob,) = ctx.saved_tensors
        # -inf entries (and all -inf slices) have exp(log_prob) = 0: g - 0 * sum(g), finite
        return log_softmax_backward_data(grad, log_prob, ctx.dim, log_prob.dtype), None


class _MaskedLogSoftmax(SafeFunction):
    """The output holds 0 placeholders at masked entries; only it and the mask are saved
    (the log-probabilities, -inf where masked, are rebuilt from them in the backward), so
    the op keeps what torch's masked_fill + log_softmax keeps."""

    @staticmethod
    def forward(x: torch.Tensor, dim: int, mask: torch.Tensor) -> torch.Tensor:
        scores = _masked_scores(x, mask)
        log_prob = _repair_dead_slices(torch.log_softmax(scores, dim), scores, dim, _NEG_INF)
        return torch.where(mask, log_prob, 0.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, ctx.dim, mask = inputs
        ctx.save_for_backward(output, mask)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out, mask = ctx.saved_tensors
        # masked entries hold a placeholder 0; as log-probabilities they are -inf and they
        # receive no gradient. Under create_graph the graph runs through the output itself.
        if not torch.is_grad_enabled() and can_branch_on_data(grad) and sum_is_finite(grad):
            # g - softmax · Σg on the placeholders gives every kept entry its gradient (the
            # kept log-probabilities are right and a masked g is zeroed first); the masked
            # entries come out -Σg and are zeroed after. Multiplying by the mask as 0/1 is
            # half the cost of a where(), and safe here: every g is finite, so is Σg.
            keep = mask.to(grad.dtype)
            return log_softmax_backward_data(grad * keep, out, ctx.dim, out.dtype).mul_(keep), None, None
        grad = torch.where(mask, grad, 0.0)
        log_prob = torch.where(mask, out, _NEG_INF)
        return log_softmax_backward_data(grad, log_prob, ctx.dim, log_prob.dtype), None, None


def _prepare(x: torch.Tensor, dim: int, mask: Optional[torch.Tensor], op: str) -> int:
    check_floating(x, "x", op)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"nanguard.{op}: `dim` must be an int, got {dim!r}")
    (axis,) = check_dim(x, dim, op)
    if mask is not None:
        check_mask(mask, x, op)
    return axis


@public_op()
@document("softmax", "torch")
def softmax(x: torch.Tensor, dim: int, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Attention code masks scores with ``-inf``; a row with nothing to attend to (padding)
    is then all ``-inf`` and ``torch.softmax`` returns NaN for it, which poisons every
    gradient. Elsewhere the values equal ``torch.softmax`` of the kept entries.

    Example:
        >>> scores = torch.tensor([[1.0, 2.0], [float("-inf"), float("-inf")]])
        >>> nanguard.softmax(scores, dim=-1)
        tensor([[0.2689, 0.7311],
                [0.0000, 0.0000]])
    """
    axis = _prepare(x, dim, mask, "softmax")
    return apply_op(_Softmax, x, axis, mask)


@public_op()
@document("log_softmax", "torch")
def log_softmax(x: torch.Tensor, dim: int, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Values equal ``torch.log_softmax`` of the kept entries.

    Example:
        >>> logits = torch.tensor([[2.0, 0.0, 5.0]])
        >>> keep = torch.tensor([[True, True, False]])
        >>> nanguard.log_softmax(logits, dim=-1, mask=keep)
        tensor([[-0.1269, -2.1269,  0.0000]])
    """
    axis = _prepare(x, dim, mask, "log_softmax")
    if mask is None:
        return apply_op(_LogSoftmax, x, axis)
    return apply_op(_MaskedLogSoftmax, x, axis, mask)
