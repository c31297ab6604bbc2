"""The double-where, packaged: ``safe_where``."""

from __future__ import annotations

from typing import Callable, Union

import jax
import jax.numpy as jnp

from nanguard.core import op_checks
from nanguard.core.opspec import document
from nanguard.jax._checks import SPELLING, broadcast_static, check_cond, check_floating, is_array_like

Other = Union[jax.Array, float, Callable[[jax.Array], jax.Array]]


@document("safe_where", "jax")
def safe_where(cond: jax.Array, fn: Callable[[jax.Array], jax.Array], x: jax.Array, other: Other = 0.0,
               safe: Union[float, jax.Array] = 1.0) -> jax.Array:
    r"""``jnp.where(cond, fn(x), other)`` evaluates ``fn`` on *every* entry. Where ``cond`` is
    False the result is discarded, but the backward pass still multiplies a zero cotangent
    by ``fn``'s local derivative there, and ``0 * inf = NaN`` (e.g. ``1/x`` or ``log(x)`` at
    0). The double-where recipe fixes that: evaluate ``fn`` on ``where(cond, x, safe)`` so
    its derivative is finite everywhere, then select.

    Example:
        >>> x = jnp.array([-1.0, 0.0, 1.0])
        >>> nanguard.jax.safe_where(x != 0, lambda v: 1 / v, x)   # [-1.0, 0.0, 1.0]; gradient [-1.0, 0.0, -1.0]
    """
    cond = check_cond(cond, "safe_where")
    op_checks.need_callable(fn, "fn", "safe_where", SPELLING)
    x = check_floating(x, "x", "safe_where")
    broadcast_static(cond, x, "safe_where", ("cond", "x"))
    safe = op_checks.branch_value(safe, "safe", "safe_where", SPELLING, is_array_like)
    taken = jnp.asarray(op_checks.branch_value(fn(jnp.where(cond, x, jnp.asarray(safe, x.dtype))), "fn",
                                               "safe_where", SPELLING, is_array_like))
    other = op_checks.branch_value(other(x) if callable(other) else other, "other", "safe_where", SPELLING,
                                   is_array_like)
    return jnp.where(cond, taken, jnp.asarray(other, taken.dtype))
