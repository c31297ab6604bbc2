"""Internals shared by the JAX safe ops.

How second derivatives stay finite. A ``jax.custom_jvp`` rule is itself differentiated by
JAX for every further order (``hessian``, ``jacfwd(jacrev)``, ``grad(grad)``). So each rule
computes its primal output and its tangent from pieces whose own derivatives are finite at
the singular points: the op itself again (recursion through its rule), a double ``where``
(``divide_no_nan``), or another safe op. ``jnp.where``'s derivative selects tangents rather
than multiplying by a zero, so a discarded branch never turns ``0 * inf`` into NaN.

Tangents are linear in the incoming tangent and their coefficients depend on the primal
inputs only, so reverse mode keeps the coefficient as a residual and the backward pass is
one multiply; under ``jit`` XLA merges the pieces a rule shares with the primal (CSE).
"""

from __future__ import annotations

from functools import partial
from typing import Optional, Tuple

import jax
import jax.numpy as jnp

from nanguard.jax._checks import compute_dtype

Axes = Optional[Tuple[int, ...]]


def widen(x: jax.Array) -> jax.Array:
    """float16/bfloat16 to float32 (the cast's derivative casts back); other dtypes unchanged."""
    wide = compute_dtype(x.dtype)
    return x if wide == x.dtype else x.astype(wide)


def narrow(x: jax.Array, dtype) -> jax.Array:
    return x if x.dtype == dtype else x.astype(dtype)


def safe_range(dtype) -> Tuple[float, float]:
    """Norms in [lo, hi] were computed without overflow and without a loss to underflow.

    Below lo the squares of the largest entries may have been subnormal; above hi the
    product of two such norms could overflow (cosine similarity needs that margin).
    """
    info = jnp.finfo(dtype)
    return float(info.tiny) ** 0.5 / float(info.eps), float(info.max) ** 0.5 / 4


def keep_axes(t: jax.Array, axes: Axes, keepdims: bool) -> jax.Array:
    """Drop the reduced (size-1) axes of a keepdims result unless ``keepdims``."""
    if keepdims:
        return t
    if axes is None:
        return jnp.reshape(t, ())
    return jnp.squeeze(t, axis=axes)


def divide_no_nan(a: jax.Array, b: jax.Array) -> jax.Array:
    """a / b, and 0 where b = 0: a double where, so every derivative is finite (0) there too.

    A NaN numerator gives 0 where b = 0, as ``tf.math.divide_no_nan``; callers that must keep
    a NaN from the data say so.
    """
    zero = b == 0
    return jnp.where(zero, jnp.zeros((), a.dtype), a / jnp.where(zero, jnp.ones((), b.dtype), b))


@jax.custom_jvp
def ratio_unless_both_zero(x: jax.Array, y: jax.Array) -> jax.Array:
    """x / y, and 0 where x = y = 0 only; derivatives 1/y and -(x/y)/y, 0 at x = y = 0.

    Unlike a divide that is 0 wherever x = 0, x = 0 < y is the quotient itself: its value 0
    is the same, but its derivative in x, 1/y, is not cut off, and ``0 / NaN`` is NaN. The
    derivative in y is this op again (never x·y⁻², which is 0·inf = NaN for y = 1e-20 in
    float32).
    """
    both_zero = (x == 0) & (y == 0)
    return jnp.where(both_zero, jnp.zeros((), x.dtype), x / jnp.where(both_zero, jnp.ones((), y.dtype), y))


@ratio_unless_both_zero.defjvp
def _ratio_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = ratio_unless_both_zero(x, y)
    both_zero = (x == 0) & (y == 0)
    inverse = ratio_unless_both_zero(jnp.where(both_zero, jnp.zeros((), x.dtype), jnp.ones((), x.dtype)), y)
    return out, tx * inverse - ty * ratio_unless_both_zero(out, y)


@jax.custom_jvp
def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with derivative ``1 / (2 sqrt(x))`` for x > 0 and 0 at x <= 0, at every order."""
    return jnp.sqrt(jnp.maximum(x, 0))  # maximum keeps NaN (NaN in, NaN out)


@safe_sqrt.defjvp
def _safe_sqrt_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    root = safe_sqrt(x)  # the op again: its derivative follows this rule
    return root, t * divide_no_nan(jnp.asarray(0.5, root.dtype), root)


@jax.custom_jvp
def reciprocal_sqrt_or_zero(x: jax.Array) -> jax.Array:
    """1 / sqrt(x) for x > 0, 0 at x = 0, NaN for x < 0 or NaN; derivative -x^(-3/2)/2 by the same rule."""
    zero = x == 0
    return jnp.where(zero, jnp.zeros((), x.dtype), jax.lax.rsqrt(jnp.where(zero, jnp.ones((), x.dtype), x)))


@reciprocal_sqrt_or_zero.defjvp
def _reciprocal_sqrt_or_zero_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    r = reciprocal_sqrt_or_zero(x)
    return r, t * (-0.5 * r * r * r)


def nan_marks(x: jax.Array) -> jax.Array:
    """0 for every number, NaN for NaN (an inf counts as a number here)."""
    return jnp.where(jnp.isnan(x), x, jnp.zeros((), x.dtype))


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def zero_spread(x: jax.Array, axes: Axes) -> jax.Array:
    """0 per slice over ``axes`` (keepdims), NaN if the slice holds NaN; derivative 0 (NaN for NaN)."""
    return jnp.sum(nan_marks(x), axis=axes, keepdims=True)


@zero_spread.defjvp
def _zero_spread_jvp(axes, primals, tangents):
    (x,), (t,) = primals, tangents
    return zero_spread(x, axes), jnp.sum(t * nan_marks(x), axis=axes, keepdims=True)
