"""The double-where, packaged: ``safe_where``."""

from __future__ import annotations

from typing import Callable, Union

import jax
import jax.numpy as jnp
import numpy as np

from nanguard.core.opspec import document
from nanguard.jax._checks import broadcast_static, check_cond, check_floating, is_array_like

Other = Union[jax.Array, float, Callable[[jax.Array], jax.Array]]


@document("safe_where", "jax")
def safe_where(
    cond: jax.Array,
    fn: Callable[[jax.Array], jax.Array],
    x: jax.Array,
    other: Other = 0.0,
    safe: Union[float, jax.Array] = 1.0,
) -> jax.Array:
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
    if not callable(fn):
        raise TypeError(f"nanguard.jax.safe_where: `fn` must be callable, got {type(fn).__name__}")
    x = check_floating(x, "x", "safe_where")
    broadcast_static(cond, x, "safe_where", ("cond", "x"))
    if is_array_like(safe):
        safe = jnp.asarray(safe).astype(x.dtype)
    elif isinstance(safe, bool) or not isinstance(safe, (int, float, np.floating, np.integer)):
        raise TypeError(f"nanguard.jax.safe_where: `safe` must be a number or array, got {type(safe).__name__}")
    else:
        safe = jnp.asarray(safe, x.dtype)
    taken = fn(jnp.where(cond, x, safe))
    if not is_array_like(taken):
        raise TypeError(f"nanguard.jax.safe_where: `fn` must return an array, got {type(taken).__name__}")
    taken = jnp.asarray(taken)
    if callable(other):
        other = other(x)
    if is_array_like(other):
        return jnp.where(cond, taken, jnp.asarray(other).astype(taken.dtype))
    if isinstance(other, bool) or not isinstance(other, (int, float, np.floating, np.integer)):
        raise TypeError(f"nanguard.jax.safe_where: `other` must be an array, number or callable, "
                        f"got {type(other).__name__}")
    return jnp.where(cond, taken, jnp.asarray(float(other), taken.dtype))
