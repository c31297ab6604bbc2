"""The double-where, packaged: ``safe_where``."""

from __future__ import annotations

from typing import Callable, Union

import torch

from nanguard.core import op_checks
from nanguard.core.opspec import document
from nanguard.torch._checks import SPELLING, broadcast_pair, check_cond, check_floating

Other = Union[torch.Tensor, float, Callable[[torch.Tensor], torch.Tensor]]


@document("safe_where", "torch")
def safe_where(cond: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, other: Other = 0.0,
               safe: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
    r"""``torch.where(cond, fn(x), other)`` evaluates ``fn`` on *every* entry. Where ``cond``
    is False the result is discarded, but the backward pass still multiplies a zero
    upstream gradient by ``fn``'s local derivative there, and ``0 * inf = NaN``
    (e.g. ``1/x`` or ``log(x)`` at 0). The double-where recipe fixes that: evaluate ``fn``
    on ``where(cond, x, safe)`` so its derivative is finite everywhere, then select.

    Example:
        >>> x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
        >>> nanguard.safe_where(x != 0, lambda v: 1 / v, x).sum().backward()
        >>> x.grad
        tensor([-1.,  0., -1.])
    """
    check_cond(cond, "safe_where")
    op_checks.need_callable(fn, "fn", "safe_where", SPELLING)
    check_floating(x, "x", "safe_where")
    broadcast_pair(cond, x, "safe_where", ("cond", "x"))
    safe = op_checks.branch_value(safe, "safe", "safe_where", SPELLING, torch.is_tensor)
    taken = fn(torch.where(cond, x, safe.to(x.dtype) if isinstance(safe, torch.Tensor) else safe))
    op_checks.branch_value(taken, "fn", "safe_where", SPELLING, torch.is_tensor)
    other = op_checks.branch_value(other(x) if callable(other) else other, "other", "safe_where", SPELLING,
                                   torch.is_tensor)
    return torch.where(cond, taken, other.to(taken.dtype) if isinstance(other, torch.Tensor) else other)
