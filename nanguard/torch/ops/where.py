"""The double-where, packaged: ``safe_where``."""

from __future__ import annotations

from typing import Callable, Union

import torch

from nanguard.core.opspec import document
from nanguard.torch._checks import broadcast_pair, check_floating, check_tensor

Other = Union[torch.Tensor, float, Callable[[torch.Tensor], torch.Tensor]]


@document("safe_where", "torch")
def safe_where(
    cond: torch.Tensor,
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    other: Other = 0.0,
    safe: Union[float, torch.Tensor] = 1.0,
) -> torch.Tensor:
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
    check_tensor(cond, "cond", "safe_where")
    if cond.dtype != torch.bool:
        raise TypeError(f"nanguard.safe_where: `cond` must be a bool tensor, got dtype {cond.dtype}")
    if not callable(fn):
        raise TypeError(f"nanguard.safe_where: `fn` must be callable, got {type(fn).__name__}")
    check_floating(x, "x", "safe_where")
    broadcast_pair(cond, x, "safe_where", ("cond", "x"))
    if isinstance(safe, torch.Tensor):
        safe = safe.to(x.dtype)
    elif isinstance(safe, bool) or not isinstance(safe, (int, float)):
        raise TypeError(f"nanguard.safe_where: `safe` must be a number or tensor, got {type(safe).__name__}")
    safe_x = torch.where(cond, x, safe)
    taken = fn(safe_x)
    if not isinstance(taken, torch.Tensor):
        raise TypeError(f"nanguard.safe_where: `fn` must return a tensor, got {type(taken).__name__}")
    if callable(other):
        other = other(x)
    if isinstance(other, torch.Tensor):
        return torch.where(cond, taken, other.to(taken.dtype))
    if isinstance(other, bool) or not isinstance(other, (int, float)):
        raise TypeError(f"nanguard.safe_where: `other` must be a tensor, number or callable, got {type(other).__name__}")
    return torch.where(cond, taken, float(other))
