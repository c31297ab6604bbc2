"""Euclidean lengths and directions: ``norm``, ``normalize``, ``cosine_similarity``.

The norm is exact over the whole range: ``sqrt(sum(x²))`` overflows for float32 entries
above ~1e19 and returns 0 for subnormal vectors, so when a norm leaves the safe range the
tensor is recomputed on inputs divided by their largest entry, in a ``lax.cond`` taken at
run time: the common case costs one comparison.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.jax._checks import (
    CHECKS, Axis, broadcast_static, check_axis, setting, check_floating, check_single_axis, promote,
)
from nanguard.jax.ops._core import Axes, divide_no_nan, keep_axes, narrow, safe_range, safe_sqrt, widen


def _scale(x: jax.Array, axes: Axes) -> jax.Array:
    """max |x| over ``axes`` (keepdims), 1 where that is 0 or not finite; a constant (no gradient)."""
    top = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=axes, keepdims=True, initial=0))
    usable = (top > 0) & jnp.isfinite(top)
    return jnp.where(usable, top, jnp.ones((), x.dtype))


def _unscaled(x: jax.Array, scale: jax.Array) -> jax.Array:
    """x / scale in two halves: XLA turns a division into a multiplication by the reciprocal,
    and 1 / 3e38 is a float32 subnormal that the CPU flushes to 0; 1 / sqrt(3e38) is not."""
    half = jnp.sqrt(scale)
    return x / half / half


def _plain_norm(x: jax.Array, axes: Axes) -> jax.Array:
    return safe_sqrt(jnp.sum(jnp.square(x), axis=axes, keepdims=True))


def norm_value(make: Callable[..., jax.Array], operands: Tuple[jax.Array, ...], axes: Axes,
               may_hide: Optional[Callable[..., jax.Array]] = None) -> jax.Array:
    """The 2-norm of ``make(*operands)`` over ``axes`` (keepdims), free of overflow and underflow.

    ``make`` builds the vectors from ``operands``; the rare rescue branch builds them again
    rather than receiving them, so that a ``lax.cond`` never forces XLA to materialise an
    intermediate (the differences of :func:`distance_matrix`) that it would otherwise fuse
    into the reduction.

    A norm of exactly 0 is the zero vector unless its squares underflowed (vectors shorter
    than sqrt(smallest normal): ~1e-19 in float32, ~1e-154 in float64), which only max |x|
    tells, in a second pass. It is looked at only when some norm is 0 (rare for data), or,
    where zeros are expected (a distance matrix's diagonal), only when ``may_hide(*operands)``,
    a cheap test on the operands, says that such short nonzero vectors can be made at all.
    """
    x = make(*operands)
    fast = _plain_norm(x, axes)
    lo, hi = safe_range(fast.dtype)

    def extreme_of(n):  # NaN is neither small nor large: NaN in, NaN out
        return ((n < lo) & (n != 0)) | (n > hi)

    # masks are recomputed from the norms inside each branch: a mask captured by a cond is
    # computed (and stored) whether the branch runs or not
    extreme = extreme_of(fast)
    zero = fast == 0

    def top_of(operands):
        return jax.lax.stop_gradient(jnp.max(jnp.abs(make(*operands)), axis=axes, keepdims=True, initial=0))

    gate = jnp.any(zero) if may_hide is None else may_hide(*operands)
    hidden = jax.lax.cond(gate, lambda n, ops: jnp.any((n == 0) & (top_of(ops) > 0)),
                          lambda n, ops: jnp.asarray(False), fast, operands)

    def rescued(fast, operands):
        x = make(*operands)
        top = top_of(operands)
        scale = jnp.where((top > 0) & jnp.isfinite(top), top, jnp.ones((), x.dtype))
        outside = extreme_of(fast) | ((fast == 0) & (top > 0))
        return jnp.where(outside, scale * _plain_norm(_unscaled(x, scale), axes), fast)

    return jax.lax.cond(jnp.any(extreme) | hidden, rescued, lambda fast, ops: fast, fast, operands)


def _identity(x: jax.Array) -> jax.Array:
    return x


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def l2_norm(x: jax.Array, axes: Axes) -> jax.Array:
    """:func:`_norm_value` with derivative ``x / |x|`` (0 at the zero vector), at every order."""
    return norm_value(_identity, (x,), axes)


@l2_norm.defjvp
def _l2_norm_jvp(axes, primals, tangents):
    (x,), (t,) = primals, tangents
    n = l2_norm(x, axes)
    # x / n is scale-free (no overflow for tiny or huge norms) and 0 at the zero vector
    return n, jnp.sum(divide_no_nan(x, n) * t, axis=axes, keepdims=True)


@document("norm", "jax")
def norm(x: jax.Array, axis: Axis = None, keepdims: bool = False) -> jax.Array:
    r"""``jnp.linalg.norm`` has a NaN gradient at the zero vector, and ``jnp.linalg.norm`` of
    ``[3e20]`` (float32) overflows to inf. This op is exact at both ends of the range:
    huge entries, and tiny ones whose squares underflow (1e-30). Subnormal entries (below
    1.2e-38 in float32) read as 0 where XLA flushes subnormals (on CPU): a subnormal vector
    is the zero vector there (value 0, gradient 0).

    Example:
        >>> x = jnp.zeros(3)
        >>> nanguard.jax.norm(x)           # 0.0, gradient [0.0, 0.0, 0.0]
    """
    x = check_floating(x, "x", "norm")
    axes = check_axis(x, axis, "norm")
    keepdims = setting(keepdims, "keepdims", "norm")
    if x.ndim == 0:
        axes = None
    return narrow(keep_axes(l2_norm(widen(x), axes), axes, keepdims), x.dtype)


def _unit_value(x: jax.Array, n: jax.Array, axis: int) -> jax.Array:
    """x / n, 0 at the zero vector; exact also for a norm beyond the largest float."""

    def rescued(x):
        # a norm beyond the largest float (entries near 3e38): divide the scaled vector
        scale = _scale(x, (axis,))
        huge = jnp.isinf(n)
        half = jax.lax.rsqrt(jnp.where(huge, scale, jnp.ones((), x.dtype)))
        return half, jnp.where(huge, _plain_norm(_unscaled(x, scale), (axis,)), n)

    # the cond returns per-slice factors only (1 and n but for huge norms); the reciprocal is
    # taken per slice, so the full-size work is one multiplication (within an ulp of x / n).
    # 1 / n cannot overflow: XLA flushes subnormal norms to 0, which gives 0. The scale's
    # halves are applied one each, as half * half can be subnormal (flushed to 0).
    half, length = jax.lax.cond(jnp.any(jnp.isinf(n)), rescued, lambda x: (jnp.ones_like(n), n), x)
    return (x * half) * divide_no_nan(half, length)  # a NaN norm gives NaN


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def unit(x: jax.Array, axis: int) -> jax.Array:
    """x / |x| along ``axis``, 0 for the zero vector, exact for huge and tiny vectors."""
    return _unit_value(x, l2_norm(x, (axis,)), axis)


@unit.defjvp
def _unit_jvp(axis, primals, tangents):
    (x,), (t,) = primals, tangents
    n = l2_norm(x, (axis,))
    # u from the pieces (not unit() again): one norm for value and tangent; its own
    # derivative, through divide_no_nan and the safe norm, is finite at the zero vector too
    u = _unit_value(x, n, axis)
    # (t - u (u·t)) / |x|: the part of t orthogonal to the direction, scaled by 1/|x|
    tangent = t - u * jnp.sum(u * t, axis=axis, keepdims=True)
    return u, tangent * divide_no_nan(jnp.ones((), n.dtype), n)


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _cosine(a: jax.Array, b: jax.Array, axis: int) -> jax.Array:
    """sum(a b) / (|a| |b|) along ``axis`` (keepdims); 0 when either is the zero vector."""
    return _cosine_value(a, b, l2_norm(a, (axis,)), l2_norm(b, (axis,)), axis)


def _cosine_value(a: jax.Array, b: jax.Array, na: jax.Array, nb: jax.Array, axis: int) -> jax.Array:
    lo, hi = safe_range(a.dtype)
    # both norms in the safe range: neither a·b nor |a||b| can overflow or lose to underflow
    usable = (na >= lo) & (na <= hi) & (nb >= lo) & (nb <= hi)

    def scaled(ab):
        a, b = ab
        sa, sb = _scale(a, (axis,)), _scale(b, (axis,))
        return jnp.where(usable, jnp.ones((), a.dtype), sa), jnp.where(usable, jnp.ones((), b.dtype), sb)

    ones = (jnp.ones_like(na), jnp.ones_like(nb))
    sa, sb = jax.lax.cond(jnp.all(usable | (na == 0) | (nb == 0)), lambda ab: ones, scaled, (a, b))
    # 1 but in the rare rescue; applied in halves (normal floats), as multiplications
    ha, hb = jax.lax.rsqrt(sa), jax.lax.rsqrt(sb)
    dot = jnp.sum((a * ha * ha) * (b * hb * hb), axis=axis, keepdims=True)
    return divide_no_nan(dot, (na * ha * ha) * (nb * hb * hb))


@_cosine.defjvp
def _cosine_jvp(axis, primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    na, nb = l2_norm(a, (axis,)), l2_norm(b, (axis,))
    cos = _cosine_value(a, b, na, nb, axis)  # safe pieces: its own derivative is finite too
    ua, ub = divide_no_nan(a, na), divide_no_nan(b, nb)
    # d cos / da = (b̂ - cos â) / |a|, and symmetrically; 0 for a zero vector
    da = divide_no_nan(jnp.sum(ta * (ub - cos * ua), axis=axis, keepdims=True), na)
    db = divide_no_nan(jnp.sum(tb * (ua - cos * ub), axis=axis, keepdims=True), nb)
    return cos, da + db


@document("normalize", "jax")
def normalize(x: jax.Array, axis: int = -1) -> jax.Array:
    r"""``x / jnp.linalg.norm(x, axis=-1, keepdims=True)`` is NaN at the zero vector, and the
    usual ``x / jnp.maximum(norm, 1e-12)`` biases vectors shorter than the epsilon. This op
    is exact for every nonzero vector, tiny (1e-30) and huge ones included; subnormal
    entries read as 0 where XLA flushes subnormals (on CPU), so a subnormal vector is the
    zero vector there.

    Example:
        >>> x = jnp.array([[3.0, 4.0], [0.0, 0.0]])
        >>> nanguard.jax.normalize(x)      # [[0.6, 0.8], [0.0, 0.0]]
    """
    x = check_floating(x, "x", "normalize")
    CHECKS.rank(x, 1, "`x`", "normalize")
    axis = check_single_axis(x, axis, "normalize")
    return narrow(unit(widen(x), axis), x.dtype)


@document("cosine_similarity", "jax")
def cosine_similarity(a: jax.Array, b: jax.Array, axis: int = -1) -> jax.Array:
    r"""``optax.cosine_similarity`` and the usual ``a @ b / max(|a| |b|, eps)`` clamp the norm
    below by an epsilon, which biases the value for short vectors and makes the gradient at
    zero vectors depend on it; without the epsilon it is NaN there. Broadcasts like ``jnp``
    binary ops.

    Huge and tiny vectors give the exact cosine; subnormal ones count as 0 where XLA flushes
    subnormals (on CPU).

    Example:
        >>> a = jnp.array([[1.0, 0.0], [0.0, 0.0]])
        >>> nanguard.jax.cosine_similarity(a, jnp.array([1.0, 1.0]))   # [0.7071, 0.0]
    """
    a = check_floating(a, "a", "cosine_similarity")
    b = check_floating(b, "b", "cosine_similarity")
    shape = broadcast_static(a, b, "cosine_similarity", ("a", "b"))
    CHECKS.rank(shape, 1, "inputs", "cosine_similarity")
    axis = check_single_axis(shape, axis, "cosine_similarity")
    dtype = promote(a.dtype, b.dtype)
    wa, wb = jnp.broadcast_arrays(widen(narrow(a, dtype)), widen(narrow(b, dtype)))
    return narrow(jnp.squeeze(_cosine(wa, wb, axis), axis), dtype)
