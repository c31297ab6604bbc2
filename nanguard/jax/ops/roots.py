"""Roots and fractional powers: ``sqrt`` and ``pow`` with finite gradients at 0."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.jax._checks import check_floating, setting
from nanguard.jax.ops._core import narrow, safe_sqrt, widen


@document("sqrt", "jax")
def sqrt(x: jax.Array) -> jax.Array:
    r"""``jnp.sqrt`` has gradient ``1 / (2 sqrt(x))``: +inf at ``x = 0``, and NaN once an
    upstream zero (from ``jnp.where``, a mask, a ReLU) multiplies it; ``jnp.sqrt(-1e-9)`` is
    NaN. This op returns the same values and gradients everywhere else.

    A subnormal ``x`` (below 1.2e-38 in float32) reads as 0 where XLA flushes subnormals (on CPU):
    ``sqrt(1.8e-40)`` is 0 there, with gradient 0, not 1.3e-20.

    Example:
        >>> x = jnp.array([0.0, 4.0])
        >>> nanguard.jax.sqrt(x)          # [0.0, 2.0]; gradient [0.0, 0.25]
    """
    x = check_floating(x, "x", "sqrt")
    return narrow(safe_sqrt(widen(x)), x.dtype)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _positive_power(x: jax.Array, p: float) -> jax.Array:
    """x ** p for x > 0, 0 for x <= 0 (NaN stays NaN), derivative p x^(p-1) by the same rule, at every order."""
    if p > 0:
        return jnp.power(jnp.maximum(x, 0), p)  # 0 at x <= 0 already; maximum keeps NaN
    if p == 0:
        return jnp.maximum(jnp.sign(x), 0)  # 1 for x > 0, 0 for x <= 0, NaN for NaN
    nonpositive = x <= 0  # x ** p would be inf there
    return jnp.where(nonpositive, jnp.zeros((), x.dtype), jnp.power(jnp.where(nonpositive, 1, x), p))


@_positive_power.defjvp
def _positive_power_jvp(p, primals, tangents):
    (x,), (t,) = primals, tangents
    out = _positive_power(x, p)
    if p == 0:
        return out, jnp.zeros_like(t)
    # the lower power is this op again, so its own derivative follows the same rule
    return out, t * (p * _positive_power(x, p - 1))


@document("pow", "jax")
def pow(x: jax.Array, exponent: float) -> jax.Array:
    r"""For ``0 < p < 1``, ``jnp.power(x, p)`` has an infinite gradient at ``x = 0`` (and NaN
    behind a mask): ``jax.grad(lambda x: x ** (1 / 3))(0.0)`` is inf. This op equals
    ``jnp.power`` for ``x > 0``.

    Example:
        >>> x = jnp.array([0.0, 8.0])
        >>> nanguard.jax.pow(x, 1 / 3)     # [0.0, 2.0]; gradient [0.0, 0.0833]
    """
    x = check_floating(x, "x", "pow")
    p = setting(exponent, "exponent", "pow")
    return narrow(_positive_power(widen(x), p), x.dtype)
