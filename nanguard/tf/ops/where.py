"""The double-where, packaged: ``safe_where``."""

from __future__ import annotations

from typing import Callable, Union

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import broadcast_static, check_floating, check_cond
from nanguard.tf.ops._core import select

Other = Union[tf.Tensor, float, Callable[[tf.Tensor], tf.Tensor]]



@document("safe_where", "tf")
def safe_where(
    cond: tf.Tensor,
    fn: Callable[[tf.Tensor], tf.Tensor],
    x: tf.Tensor,
    other: Other = 0.0,
    safe: Union[float, tf.Tensor] = 1.0,
) -> tf.Tensor:
    r"""``tf.where(cond, fn(x), other)`` evaluates ``fn`` on *every* entry. Where ``cond`` is
    False the result is discarded, but the backward pass still multiplies a zero upstream
    gradient by ``fn``'s local derivative there, and ``0 * inf = NaN`` (e.g. ``1/x`` or
    ``log(x)`` at 0). The double-where recipe fixes that: evaluate ``fn`` on
    ``where(cond, x, safe)`` so its derivative is finite everywhere, then select.

    Example:
        >>> x = tf.constant([-1.0, 0.0, 1.0])
        >>> nanguard.tf.safe_where(x != 0, lambda v: 1 / v, x)   # [-1.0, 0.0, 1.0]; gradient [-1.0, 0.0, -1.0]
    """
    cond = check_cond(cond, "safe_where")
    if not callable(fn):
        raise TypeError(f"nanguard.tf.safe_where: `fn` must be callable, got {type(fn).__name__}")
    x = check_floating(x, "x", "safe_where")
    broadcast_static(cond.shape, x.shape, "safe_where", ("cond", "x"))
    if tf.is_tensor(safe):
        safe = tf.cast(safe, x.dtype)
    elif isinstance(safe, bool) or not isinstance(safe, (int, float)):
        raise TypeError(f"nanguard.tf.safe_where: `safe` must be a number or tensor, got {type(safe).__name__}")
    else:
        safe = tf.constant(safe, x.dtype)
    taken = fn(select(cond, x, safe))
    if not tf.is_tensor(taken):
        raise TypeError(f"nanguard.tf.safe_where: `fn` must return a tensor, got {type(taken).__name__}")
    if callable(other):
        other = other(x)
    if tf.is_tensor(other):
        return select(cond, taken, tf.cast(other, taken.dtype))
    if isinstance(other, bool) or not isinstance(other, (int, float)):
        raise TypeError(f"nanguard.tf.safe_where: `other` must be a tensor, number or callable, "
                        f"got {type(other).__name__}")
    return select(cond, taken, tf.constant(float(other), taken.dtype))
