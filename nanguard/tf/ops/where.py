"""The double-where, packaged: ``safe_where``."""

from __future__ import annotations

from typing import Callable, Union

import tensorflow as tf

from nanguard.core import op_checks
from nanguard.core.opspec import document
from nanguard.tf._checks import SPELLING, broadcast_static, check_cond, check_floating
from nanguard.tf.ops._core import select

Other = Union[tf.Tensor, float, Callable[[tf.Tensor], tf.Tensor]]



def _in(value, dtype: tf.DType) -> tf.Tensor:
    """A tensor cast to ``dtype``, or a number made a ``dtype`` constant (exactly, not via float32)."""
    return tf.cast(value, dtype) if tf.is_tensor(value) else tf.constant(value, dtype)


@document("safe_where", "tf")
def safe_where(cond: tf.Tensor, fn: Callable[[tf.Tensor], tf.Tensor], x: tf.Tensor, other: Other = 0.0,
               safe: Union[float, tf.Tensor] = 1.0) -> tf.Tensor:
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
    op_checks.need_callable(fn, "fn", "safe_where", SPELLING)
    x = check_floating(x, "x", "safe_where")
    broadcast_static(cond.shape, x.shape, "safe_where", ("cond", "x"))
    safe = op_checks.branch_value(safe, "safe", "safe_where", SPELLING, tf.is_tensor)
    taken = fn(select(cond, x, _in(safe, x.dtype)))
    op_checks.branch_value(taken, "fn", "safe_where", SPELLING, tf.is_tensor)
    other = op_checks.branch_value(other(x) if callable(other) else other, "other", "safe_where", SPELLING,
                                   tf.is_tensor)
    return select(cond, taken, _in(other, taken.dtype))
