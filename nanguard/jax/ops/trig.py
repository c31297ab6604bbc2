"""Inverse trigonometry with finite gradients at ±1: ``acos``, ``asin``."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from nanguard.core.dtypes import trig_rounding_tolerance
from nanguard.core.opspec import document
from nanguard.jax._checks import check_floating
from nanguard.jax.ops._core import narrow, reciprocal_sqrt_or_zero, widen

def _pulled_in(x: jax.Array, tolerance: float) -> jax.Array:
    """±1 for 1 < |x| <= 1 + tolerance (a rounding error), x itself elsewhere (beyond: NaN later)."""
    rounding = (jnp.abs(x) > 1) & (jnp.abs(x) <= 1 + tolerance)
    return jnp.where(rounding, jnp.sign(x), x)


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _inverse_sine(x: jax.Array, tolerance: float, sign: float) -> jax.Array:
    """asin (sign = +1) or acos (sign = -1) of ``x`` pulled onto ±1 when within ``tolerance`` outside."""
    inside = _pulled_in(x, tolerance)
    return jnp.arcsin(inside) if sign > 0 else jnp.arccos(inside)


@_inverse_sine.defjvp
def _inverse_sine_jvp(tolerance, sign, primals, tangents):
    (x,), (t,) = primals, tangents
    inside = _pulled_in(x, tolerance)
    # (1 - x)(1 + x) rather than 1 - x², which loses all precision near ±1. It is exactly 0
    # at ±1 (gradient 0 there), negative beyond the tolerance (NaN, as the value), NaN for NaN.
    local = reciprocal_sqrt_or_zero((1 - inside) * (1 + inside))
    return _inverse_sine(x, tolerance, sign), t * local if sign > 0 else -(t * local)


@document("asin", "jax")
def asin(x: jax.Array) -> jax.Array:
    r"""``jnp.arcsin`` has an infinite gradient at ±1 and returns NaN for ``1.0000001``, which a
    dot product of unit vectors easily produces.

    Example:
        >>> nanguard.jax.asin(jnp.array([1.0, 0.5]))   # [1.5707964, 0.5235988]; gradient [0.0, 1.1547005]
    """
    x = check_floating(x, "x", "asin")
    return narrow(_inverse_sine(widen(x), trig_rounding_tolerance(str(x.dtype)), 1.0), x.dtype)


@document("acos", "jax")
def acos(x: jax.Array) -> jax.Array:
    r"""The angle between two vectors, ``acos(cosine_similarity(a, b))``, has an infinite
    gradient for parallel vectors (``jax.grad(jnp.arccos)(1.0)`` is -inf) and is NaN when
    rounding pushes the cosine to ``1.0000001``.

    Example:
        >>> nanguard.jax.acos(jnp.array([1.0000001, 0.0]))   # [0.0, 1.5707964]; gradient [0.0, -1.0]
    """
    x = check_floating(x, "x", "acos")
    return narrow(_inverse_sine(widen(x), trig_rounding_tolerance(str(x.dtype)), -1.0), x.dtype)
