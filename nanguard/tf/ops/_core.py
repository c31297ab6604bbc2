"""Internals shared by the TensorFlow safe ops.

How second derivatives stay finite. ``tf.custom_gradient`` leaves the forward pass on the
tape: an intermediate tensor that the gradient function reuses is differentiated, by an
outer ``GradientTape``, through the native gradients of the ops that made it. So every
intermediate that a gradient function reuses is built from pieces whose native gradients
are finite at the singular points (``divide_no_nan``, a double ``where``, another safe op);
the first-order gradient stays cheap (no recomputation) and the second-order one is exact.
"""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf

from nanguard.tf._checks import compute_dtype


def select(cond: tf.Tensor, a: tf.Tensor, b) -> tf.Tensor:
    """``tf.where(cond, a, b)``; through the older ``Select`` kernel when the shapes allow it.

    In graph mode ``Select`` and its gradient (also a ``Select``) take about half the time of
    ``SelectV2``, whose broadcasting path they skip, at identical values. They need one shape
    for all three operands: a scalar ``b`` is filled to ``a``'s static shape; anything else
    that differs goes to ``tf.where``.
    """
    if not tf.is_tensor(b):
        b = tf.constant(b, a.dtype)
    if not (cond.shape.is_fully_defined() and cond.shape == a.shape):
        return tf.where(cond, a, b)
    if b.shape.rank == 0 and a.shape.rank != 0:
        b = tf.fill(a.shape, b)  # only when Select will take it: a fill tf.where does not need
    if a.shape == b.shape:
        return tf.compat.v1.where(cond, a, b)
    return tf.where(cond, a, b)


def widen(x: tf.Tensor) -> tf.Tensor:
    """float16/bfloat16 to float32 (the cast's gradient casts back); other dtypes unchanged."""
    wide = compute_dtype(x.dtype)
    return x if wide == x.dtype else tf.cast(x, wide)


def narrow(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    return x if x.dtype == dtype else tf.cast(x, dtype)


def lowest(dtype: tf.DType) -> float:
    """The most negative finite value of ``dtype``."""
    return float(dtype.min)


def safe_range(dtype: tf.DType) -> Tuple[float, float]:
    """Norms in [lo, hi] were computed without overflow and without a loss to underflow.

    Below lo the squares of the largest entries may have been subnormal; above hi the
    product of two such norms could overflow (cosine similarity needs that margin).
    """
    tiny = float(tf.experimental.numpy.finfo(dtype.as_numpy_dtype).tiny)
    eps = float(tf.experimental.numpy.finfo(dtype.as_numpy_dtype).eps)
    return tiny**0.5 / eps, float(dtype.max) ** 0.5 / 4


def broadcast_pair(a: tf.Tensor, b: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """Both operands at their common shape; ``broadcast_to``'s gradient sums back to each shape."""
    if a.shape.is_fully_defined() and a.shape == b.shape:
        return a, b
    shape = tf.broadcast_dynamic_shape(tf.shape(a), tf.shape(b))
    return tf.broadcast_to(a, shape), tf.broadcast_to(b, shape)


def keep_axes(t: tf.Tensor, axes: Optional[Tuple[int, ...]], keepdims: bool) -> tf.Tensor:
    """Drop the reduced (size-1) axes of a keepdims result unless ``keepdims``."""
    if keepdims:
        return t
    if axes is None:
        return tf.reshape(t, [])
    return tf.squeeze(t, axis=list(axes))


def safe_sqrt(x: tf.Tensor) -> tf.Tensor:
    """``sqrt(max(x, 0))`` with gradient ``1 / (2 sqrt(x))`` for x > 0 and 0 at x <= 0, at every order.

    The gradient function calls this op again, so each further derivative is safe too.
    """

    @tf.custom_gradient
    def _sqrt(x):
        root = tf.sqrt(tf.nn.relu(x))  # relu keeps NaN (NaN in, NaN out)

        def grad(upstream):
            # divide_no_nan: 0 where the root is 0; its own gradient is finite there
            again = safe_sqrt(x)
            return tf.math.divide_no_nan(upstream, again + again)

        return root, grad

    return _sqrt(x)


def ratio_unless_both_zero(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """x / y, and 0 where x = y = 0 only: a double where of native ops, so every derivative is
    the quotient's own (∂x = 1/y, ∂y = -(x/y)/y, no y² to underflow) and 0 at x = y = 0.

    Unlike ``tf.math.xdivy`` (0 wherever x = 0), x = 0 < y is the quotient itself: its value
    0 is the same, but its derivative in x, 1/y, is not cut off, and ``0 / NaN`` is NaN.
    """
    both_zero = tf.logical_and(tf.equal(x, 0), tf.equal(y, 0))
    return tf.where(both_zero, tf.zeros_like(x), x / tf.where(both_zero, tf.ones_like(y), y))


def nan_marks(x: tf.Tensor) -> tf.Tensor:
    """0 for every number, NaN for NaN (an inf counts as a number here)."""
    return select(tf.math.is_nan(x), x, tf.zeros_like(x))


def nan_where_nan(grad: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """``grad`` with NaN where ``x`` (same shape) is NaN: the derivative at a NaN input is NaN,
    also for a derivative that does not read that input (div's 1/b, a mean's 1/count)."""
    return select(tf.math.is_nan(x), x, grad)


def zero_spread(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """0 per slice over ``axes`` (keepdims), NaN if the slice holds NaN; gradient 0 (NaN for NaN)."""

    @tf.custom_gradient
    def spread(x):
        def grad(upstream):
            return nan_marks(x)  # NaN in, NaN out; 0 everywhere else

        return tf.reduce_sum(nan_marks(x), axis=axes, keepdims=True), grad

    return spread(x)


def nan_term(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """0 per slice (keepdims), NaN where the slice holds NaN, with derivative NaN at each NaN
    entry and 0 elsewhere; from native ops (a ``tf.cond`` branch may hold it).

    Added to a result whose derivative does not read the values (a mean's is 1/count), it
    puts a NaN from the data into that entry's gradient too.
    """
    marks = nan_marks(x)
    return tf.reduce_sum(marks * marks, axis=axes, keepdims=True)  # d/dx = 2·marks: NaN or 0


# the exponent bits of each floating dtype, and the largest power of two whose reciprocal
# is still normal (XLA multiplies by a reciprocal, and flushes a subnormal one to 0)
_EXPONENT_BITS = {tf.float32: (tf.int32, 0x7F800000, 2.0**126), tf.float64: (tf.int64, 0x7FF0000000000000, 2.0**1022)}


def pow2_scale(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """A power of two in (max|x| / 2, max|x|] over ``axes`` (keepdims; at most 2**126 in
    float32), 1 for slices that are all zero, subnormal or not finite; a constant.

    Dividing by it is exact, so a computation on ``x / scale`` neither overflows nor
    underflows and loses nothing: the rescue of the norm-like reductions (``std`` of 3e38s).
    """
    ints, mask, cap = _EXPONENT_BITS[x.dtype]
    top = tf.stop_gradient(tf.reduce_max(tf.abs(x), axis=axes, keepdims=True))
    power = tf.bitcast(tf.bitwise.bitwise_and(tf.bitcast(top, ints), tf.constant(mask, ints)), x.dtype)
    usable = tf.logical_and(power > 0, tf.math.is_finite(power))
    return tf.minimum(tf.where(usable, power, tf.ones_like(power)), cap)


def reciprocal_sqrt_or_zero(x: tf.Tensor, scale: float = 1.0) -> tf.Tensor:
    """scale / sqrt(x) for x > 0, 0 at x = 0, NaN for x < 0 or NaN; derivative -scale·x^(-3/2)/2 by the same rule.

    ``scale`` folds a constant factor (a sign) into the one division, so a caller needs no
    extra pass over the tensor for it.
    """

    @tf.custom_gradient
    def rsqrt(x):
        def grad(upstream):
            again = reciprocal_sqrt_or_zero(x)
            return (-0.5 * scale) * upstream * again * again * again

        return tf.math.divide_no_nan(tf.constant(scale, x.dtype), tf.sqrt(x)), grad

    return rsqrt(x)
