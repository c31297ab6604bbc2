"""Euclidean lengths and directions: ``norm``, ``normalize``, ``cosine_similarity``.

All three are compositions of pieces whose native gradients are finite at the zero vector
(the safe square root, ``divide_no_nan``), so TensorFlow's own differentiation of them is
finite at every order and no further custom gradient is needed.
"""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import (
    CHECKS, Axis, broadcast_static, check_axis, setting, check_floating, check_single_axis, promote,
)
from nanguard.tf.ops._core import broadcast_pair, keep_axes, narrow, safe_range, safe_sqrt, widen


def _scale(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """max |x| over ``axes`` (keepdims), 1 where that is 0 or not finite; a constant (no gradient)."""
    top = tf.stop_gradient(tf.reduce_max(tf.abs(x), axis=axes, keepdims=True))
    usable = tf.logical_and(top > 0, tf.math.is_finite(top))
    return tf.where(usable, top, tf.ones_like(top))


def _branch_norm(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """The 2-norm (keepdims) from native ops only, with a double-where sqrt (finite at every order).

    For the branches of ``tf.cond``: TensorFlow cannot differentiate a cond twice when a
    branch holds a ``tf.custom_gradient`` op.
    """
    total = tf.reduce_sum(tf.square(x), axis=axes, keepdims=True)
    empty = tf.less_equal(total, 0)  # NaN is not: NaN in, NaN out
    return tf.where(empty, tf.zeros_like(total), tf.sqrt(tf.where(empty, tf.ones_like(total), total)))


def _norm_value(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """The 2-norm over ``axes`` (keepdims), free of overflow and underflow, safe gradient at 0.

    ``sqrt(sum(x²))`` overflows for float32 entries above ~1e19 and returns 0 for subnormal
    vectors. When any norm leaves the safe range, the whole tensor is recomputed on inputs
    divided by their largest entry: a branch taken at run time, so the common case costs
    one comparison and a ``tf.cond``.
    """
    fast = safe_sqrt(tf.reduce_sum(tf.square(x), axis=axes, keepdims=True))
    lo, hi = safe_range(x.dtype)
    # NaN is neither small nor large: NaN in, NaN out. A norm of exactly 0 is the zero vector
    # unless its squares underflowed; only then (rare) is max |x| looked at.
    extreme = tf.logical_or(tf.logical_and(fast < lo, tf.not_equal(fast, 0)), fast > hi)
    zero = tf.equal(fast, 0)

    def underflowed():
        return tf.logical_and(zero, tf.reduce_max(tf.abs(x), axis=axes, keepdims=True) > 0)

    def rescued():
        outside = tf.logical_or(extreme, underflowed())
        scale = _scale(x, axes)
        slow = scale * _branch_norm(x / scale, axes)
        return tf.where(outside, slow, fast)

    hidden = tf.cond(tf.reduce_any(zero), lambda: tf.reduce_any(underflowed()), lambda: tf.constant(False))
    return tf.cond(tf.logical_or(tf.reduce_any(extreme), hidden), rescued, lambda: fast)


def _in_safe_range(n: tf.Tensor) -> tf.Tensor:
    """True when g / n can neither overflow nor underflow for any nonzero norm."""
    lo, hi = safe_range(n.dtype)
    return tf.reduce_all(tf.logical_or(tf.logical_and(n >= lo, n <= hi), tf.equal(n, 0)))


def l2_norm(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """:func:`_norm_value` with gradient ``x / |x|`` (0 at the zero vector) in one pass over ``x``.

    The gradient reuses the norm; an outer tape differentiates that through the safe pieces
    of :func:`_norm_value`, so the second derivative is exact and finite too.
    """

    @tf.custom_gradient
    def l2(x):
        n = _norm_value(x, axes)

        def grad(upstream):
            # x * (g / n) is one pass over x; for tiny or huge norms g / n could overflow or
            # underflow, and (x / n) * g, which is scale-free, is used instead
            return tf.cond(_in_safe_range(n), lambda: x * tf.math.divide_no_nan(upstream, n),
                           lambda: tf.math.divide_no_nan(x, n) * upstream)

        return n, grad

    return l2(x)


@document("norm", "tf")
def norm(x: tf.Tensor, axis: Axis = None, keepdims: bool = False) -> tf.Tensor:
    r"""``tf.norm`` and ``keras.ops.norm`` have a NaN gradient at the zero vector, and
    ``tf.norm`` of ``[3e20]`` (float32) overflows to inf. This op is exact at both ends of
    the range: huge entries, and tiny ones whose squares underflow (1e-30). Subnormal entries
    (below 1.2e-38 in float32) read as 0, since TensorFlow's CPU kernels and XLA flush
    subnormals: a subnormal vector is the zero vector there (value 0, gradient 0).

    Example:
        >>> x = tf.zeros([3])
        >>> nanguard.tf.norm(x)           # 0.0, gradient [0.0, 0.0, 0.0]
    """
    x = check_floating(x, "x", "norm")
    axes = check_axis(x, axis, "norm")
    keepdims = setting(keepdims, "keepdims", "norm")
    if x.shape.rank == 0:
        axes = None
    return narrow(keep_axes(l2_norm(widen(x), axes), axes, keepdims), x.dtype)


def _unit_value(x: tf.Tensor, n: tf.Tensor, axis: int) -> tf.Tensor:
    fast = tf.math.divide_no_nan(x, n)  # 0 at the zero vector; a NaN norm gives NaN

    def rescued():
        # a norm beyond the largest float (entries near 3e38): divide the scaled vector
        scaled = x / _scale(x, (axis,))
        return tf.where(tf.math.is_inf(n), tf.math.divide_no_nan(scaled, _branch_norm(scaled, (axis,))), fast)

    return tf.cond(tf.reduce_any(tf.math.is_inf(n)), rescued, lambda: fast)


def unit(x: tf.Tensor, axis: int) -> tf.Tensor:
    """x / |x| along ``axis``, 0 for the zero vector, exact for huge and tiny vectors."""

    @tf.custom_gradient
    def unit_vector(x):
        n = l2_norm(x, (axis,))
        u = _unit_value(x, n, axis)

        def grad(upstream):
            # (g - u (u·g)) / |x|: the part of g orthogonal to the direction, scaled by 1/|x|;
            # u and n are built from safe pieces, so this has a finite derivative as well
            tangent = upstream - u * tf.reduce_sum(u * upstream, axis=axis, keepdims=True)
            return tf.math.divide_no_nan(tangent, n)

        return u, grad

    return unit_vector(x)


@document("normalize", "tf")
def normalize(x: tf.Tensor, axis: int = -1) -> tf.Tensor:
    r"""``tf.math.l2_normalize`` divides by ``sqrt(max(||x||², 1e-12))``: vectors shorter than
    ``1e-6`` come out shorter than 1, and ``keras.ops.normalize`` has a NaN second derivative
    at the zero vector. This op is exact for every nonzero vector, tiny (1e-30) and huge ones
    included; subnormal entries read as 0 where TensorFlow flushes subnormals (its CPU
    kernels and XLA do), so a subnormal vector is the zero vector there.

    Example:
        >>> x = tf.constant([[3.0, 4.0], [0.0, 0.0]])
        >>> nanguard.tf.normalize(x)      # [[0.6, 0.8], [0.0, 0.0]]
    """
    x = check_floating(x, "x", "normalize")
    CHECKS.rank(x, 1, "`x`", "normalize")
    axis = check_single_axis(x, axis, "normalize")
    return narrow(unit(widen(x), axis), x.dtype)


@document("cosine_similarity", "tf")
def cosine_similarity(a: tf.Tensor, b: tf.Tensor, axis: int = -1) -> tf.Tensor:
    r"""``keras.losses.cosine_similarity`` and ``tf.math.l2_normalize`` clamp the norm below by
    an epsilon, which biases the value for short vectors and makes the gradient at zero
    vectors depend on it. Computed as ``sum(normalize(a) * normalize(b))``; broadcasts like
    TensorFlow's binary ops.

    Huge vectors give the exact cosine; subnormal ones count as 0 where TensorFlow flushes
    subnormals (its CPU kernels and XLA do).

    Example:
        >>> a = tf.constant([[1.0, 0.0], [0.0, 0.0]])
        >>> nanguard.tf.cosine_similarity(a, tf.constant([1.0, 1.0]))   # [0.7071, 0.0]
    """
    a = check_floating(a, "a", "cosine_similarity")
    b = check_floating(b, "b", "cosine_similarity")
    shape = broadcast_static(a.shape, b.shape, "cosine_similarity", ("a", "b"))
    CHECKS.rank(shape, 1, "inputs", "cosine_similarity")
    axis = check_single_axis(shape, axis, "cosine_similarity")
    dtype = promote(a.dtype, b.dtype)
    wa, wb = broadcast_pair(widen(narrow(a, dtype)), widen(narrow(b, dtype)))
    cos = tf.reduce_sum(unit(wa, axis) * unit(wb, axis), axis=axis)
    return narrow(tf.cond(tf.reduce_any(tf.math.is_nan(cos)), lambda: _nan_to_both(cos, wa, wb, axis),
                          lambda: cos), dtype)


def _nan_to_both(cos: tf.Tensor, a: tf.Tensor, b: tf.Tensor, axis: int) -> tf.Tensor:
    """``cos`` (value unchanged), with a NaN gradient for every entry of both vectors of a NaN slice.

    A NaN vector against a zero vector: the zero vector's convention (gradient 0) would
    otherwise hide the NaN from its gradient. Native ops only: a ``tf.cond`` branch.
    """
    marks = tf.stop_gradient(tf.where(tf.math.is_nan(cos), cos, tf.zeros_like(cos)))
    # x · 0 over the finite entries: value 0, derivative 0, which the NaN marks turn into NaN
    finite = [tf.where(tf.math.is_finite(t), t, tf.zeros_like(t)) for t in (a, b)]
    return cos + marks * tf.reduce_sum(finite[0] * 0 + finite[1] * 0, axis=axis)
