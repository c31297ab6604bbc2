"""Roots and fractional powers: ``sqrt`` and ``pow`` with finite gradients at 0."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from nanguard.jax._checks import check_floating, check_number
from nanguard.jax.ops._core import narrow, safe_sqrt, widen


def sqrt(x: jax.Array) -> jax.Array:
    r"""Square root with a finite gradient at 0.

    .. math:: \operatorname{sqrt}(x) = \sqrt{\max(x, 0)}, \qquad
              \frac{d}{dx} = \frac{1}{2\sqrt{x}} \ (x > 0)

    ``jnp.sqrt`` has gradient ``1 / (2 sqrt(x))``: +inf at ``x = 0``, and NaN once an
    upstream zero (from ``jnp.where``, a mask, a ReLU) multiplies it; ``jnp.sqrt(-1e-9)`` is
    NaN. This op returns the same values and gradients everywhere else.

    Singular points:
        * ``x = 0``: value 0, gradient 0 (the minimum-norm subgradient).
        * ``x < 0`` (e.g. ``-1e-9`` from cancellation in ``a² + b² - 2ab``): treated as 0,
          value 0, gradient 0.
        * Second and higher derivatives at 0 are 0 as well.

    A subnormal ``x`` (below 1.2e-38 in float32) reads as 0 where XLA flushes subnormals (on CPU):
    ``sqrt(1.8e-40)`` is 0 there, with gradient 0, not 1.3e-20.

    NaN inputs give NaN.

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


def pow(x: jax.Array, exponent: float) -> jax.Array:
    r"""Power of the non-negative part, ``max(x, 0) ** p`` for ``p > 0``, finite gradient at 0.

    .. math:: \operatorname{pow}(x, p) = \max(x, 0)^p, \qquad
              \frac{d}{dx} = p\,x^{p-1} \ (x > 0)

    For ``0 < p < 1``, ``jnp.power(x, p)`` has an infinite gradient at ``x = 0`` (and NaN
    behind a mask): ``jax.grad(lambda x: x ** (1 / 3))(0.0)`` is inf. This op equals
    ``jnp.power`` for ``x > 0``.

    Singular points:
        * ``x = 0``: value 0, gradient 0 for every ``p > 0`` (minimum-norm subgradient; for
          ``p = 1`` this makes ``pow(x, 1)`` a ReLU with ReLU's gradient convention).
        * ``x < 0``: treated as 0 (value 0, gradient 0), as in :func:`sqrt`.
        * Second and higher derivatives at 0 are 0.

    ``exponent`` must be a finite Python number ``> 0``; for ``p <= 0`` the value at 0 is
    infinite and no finite convention exists (use ``div(1, pow(x, -p))``).

    Example:
        >>> x = jnp.array([0.0, 8.0])
        >>> nanguard.jax.pow(x, 1 / 3)     # [0.0, 2.0]; gradient [0.0, 0.0833]
    """
    x = check_floating(x, "x", "pow")
    p = check_number(exponent, "exponent", "pow", positive=True)
    return narrow(_positive_power(widen(x), p), x.dtype)
