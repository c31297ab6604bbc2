"""Spread: ``var`` and ``std`` that stay finite for constant input and tiny slices."""

from __future__ import annotations

import math
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.jax._checks import CHECKS, Axis, check_axis, setting, check_floating
from nanguard.jax.ops._core import Axes, keep_axes, narrow, safe_range, widen, zero_spread


def _count(x: jax.Array, axes: Axes) -> int:
    return math.prod(x.shape) if axes is None else math.prod(x.shape[a] for a in axes)


def _centred(x: jax.Array, axes: Axes) -> jax.Array:
    """x minus its mean, the mean as a sum of x / N, which cannot overflow where sum(x) does
    (3e38 + 3e38)."""
    return x - jnp.sum(x * (1 / _count(x, axes)), axis=axes, keepdims=True)


def _variance(x: jax.Array, axes: Axes, correction: float) -> jax.Array:
    """Variance over ``axes`` (keepdims) for N - correction > 0.

    The corrected two-pass sum (Chan, Golub and LeVeque): with d = x - mean rounded,
    sum(d²) - sum(d)²/N is the sum of squares about the exact mean. Centring once, as
    ``jnp.var``, leaves the mean's rounding error in it: 15% too high for a nearly constant
    float32 slice (1000 + k·2 ulps). Both sums read the same d: one pass under XLA.
    """
    n = _count(x, axes)
    centred = _centred(x, axes)
    total = jnp.sum(centred, axis=axes, keepdims=True)
    squares = jnp.sum(jnp.square(centred), axis=axes, keepdims=True)
    return (squares - total * total / n) / (n - correction)


def _pow2_scale(x: jax.Array, axes: Axes) -> jax.Array:
    """A power of two in (max|x| / 2, max|x|] over ``axes`` (keepdims; at most 2**126 in float32,
    whose reciprocal is still normal), 1 for slices all zero or not finite; a constant."""
    top = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=axes, keepdims=True, initial=0))
    _, exponent = jnp.frexp(top)
    cap = jnp.finfo(x.dtype).maxexp - 2
    scale = jnp.ldexp(jnp.ones_like(top), jnp.minimum(exponent - 1, cap))
    return jnp.where((top > 0) & jnp.isfinite(top), scale, jnp.ones_like(top))


def _spread_value(x: jax.Array, axes: Axes, correction: float, root: bool) -> jax.Array:
    """Variance (or its square root) over ``axes`` (keepdims), exact for huge and tiny slices.

    The mean of float32 entries near 3e38 overflows (the std of [3e38, 3e38, 1.5e38, 0, 1]
    came out inf, where it is 1.5e38), and the squares of entries below ~1e-19 underflow
    (std 0 for [1e-30, 2e-30, 3e-30]): when a result is not finite, or a std is below the
    safe range (constant slices too: 0 does not tell them from an underflow), every slice is
    recomputed on inputs divided by a power of two (exact), at run time in a ``lax.cond``.
    """
    fast = _variance(x, axes, correction)
    out = jnp.sqrt(fast) if root else fast
    if root:
        suspect = ~jnp.isfinite(out) | (out < safe_range(x.dtype)[0])
    else:  # a variance beyond the largest float, or below the smallest, is that; only NaN is suspect
        suspect = jnp.isnan(out)

    def rescued(x):
        scale = _pow2_scale(x, axes)
        again = _variance(x / scale, axes, correction)
        return scale * jnp.sqrt(again) if root else again * scale * scale

    return jax.lax.cond(jnp.any(suspect), rescued, lambda x: out, x)


@partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _spread(x: jax.Array, axes: Axes, correction: float, root: bool) -> jax.Array:
    return _spread_value(x, axes, correction, root)


@_spread.defjvp
def _spread_jvp(axes, correction, root, primals, tangents):
    """d var / dx = 2 (x - mean) / (N - c), d std / dx = (x - mean) / ((N - c) std), 0 where
    std = 0 (a constant slice); x - mean corrected as in :func:`_variance` (the same
    expressions: under jit they are the value's own, not computed again).

    Where the value needed the rescue (huge or tiny slices), the coefficient is taken on
    inputs divided by a power of two per slice (a constant: exact), in a ``lax.cond`` whose
    branches read only x, so that neither x - mean nor std overflows or underflows and no
    NaN from the fast path reaches the second derivative through the branch not taken."""
    (x,), (t,) = primals, tangents
    out = _spread(x, axes, correction, root)
    dof = _count(x, axes) - correction

    def coefficient(x, spread):
        centred = _centred(x, axes)
        centred = centred - jnp.sum(centred, axis=axes, keepdims=True) * (1 / _count(x, axes))
        if not root:
            return centred * (2 / dof)
        positive = spread != 0  # NaN counts: its gradient is NaN, not 0
        # divided twice: std · (N - c) overflows for a std near the largest float
        return jnp.where(positive, centred / jnp.where(positive, spread, jnp.ones((), x.dtype)) / dof,
                         jnp.zeros((), x.dtype))

    def rescued(x):
        scale = _pow2_scale(x, axes)
        scaled = x / scale
        spread = _spread(scaled, axes, correction, root) if root else None
        local = coefficient(scaled, spread)
        return local if root else local * scale

    # outside the cond (under jit it shares the value's own centring), so it must have
    # finite derivatives where the rescue is taken: there it divides by 1, not by a std whose
    # square underflows (the second derivative of std at [1e-30, 2e-30, 4e-30] was NaN)
    # (a std outside the safe range too: XLA divides by a broadcast std as a multiplication by
    # its reciprocal, which is subnormal, flushed to 0, for a std above 8.5e37 in float32)
    lo, hi = safe_range(x.dtype)
    suspect = ~jnp.isfinite(out) | (((out < lo) | (out > hi)) if root else False)
    plain = coefficient(x, jnp.where(suspect, jnp.ones((), out.dtype), out) if root else None)
    local = jax.lax.cond(jnp.any(suspect), rescued, lambda x: plain, x)
    return out, jnp.sum(t * local, axis=axes, keepdims=True)


def _spread_or_zero(x: jax.Array, axes: Axes, correction: float, root: bool) -> jax.Array:
    if _count(x, axes) - correction <= 0:
        return zero_spread(x, axes)  # no degrees of freedom: 0, gradient 0 (NaN for NaN)
    return _spread(x, axes, correction, root)


def _prepare(x, axis, correction, ddof, keepdims, op):
    x = check_floating(x, "x", op)
    axes = check_axis(x, axis, op)
    keepdims = setting(keepdims, "keepdims", op)
    if x.ndim == 0:
        axes = None
    return x, axes, CHECKS.correction(correction, ddof, op), keepdims


@document("var", "jax")
def var(x: jax.Array, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> jax.Array:
    r"""``jnp.var`` has ``ddof=0`` by default (torch's ``correction=1`` is the default here) and
    ``jnp.var(x, ddof=1)`` of one element is NaN (0/0) in value and gradient. ``ddof`` is
    numpy's name for ``correction``.

    Example:
        >>> nanguard.jax.var(jnp.array([3.0]))        # 0.0, gradient [0.0]
        >>> nanguard.jax.var(jnp.array([1.0, 3.0]))   # 2.0, gradient [-2.0, 2.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "var")
    return narrow(keep_axes(_spread_or_zero(widen(x), axes, correction, False), axes, keepdims), x.dtype)


@document("std", "jax")
def std(x: jax.Array, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> jax.Array:
    r"""``jnp.std`` of a constant slice has a NaN gradient (``sqrt``'s at 0), and
    ``jnp.std(x, ddof=1)`` of one element is NaN; it is inf for float32 slices whose sum
    overflows (entries near 3e38), 0 for slices whose squares underflow (below ~1e-19) and
    15% high for nearly constant slices. This op is exact there.

    Example:
        >>> nanguard.jax.std(jnp.ones(4))      # 0.0, gradient [0.0, 0.0, 0.0, 0.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "std")
    return narrow(keep_axes(_spread_or_zero(widen(x), axes, correction, True), axes, keepdims), x.dtype)
