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


def xdivy(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """x / y, and 0 where x = 0 (y = 0 included), with derivatives that follow the same rule.

    ``tf.math.xdivy`` has the value, but its native gradient in x is ``(x != 0) / y``: 0/0 =
    NaN at x = y = 0. Here ∂x = xdivy(x != 0, y) and ∂y = -xdivy(xdivy(x, y), y), both 0 at
    x = 0, and each again this op, so every order is safe.
    """

    @tf.custom_gradient
    def ratio(x, y):
        def grad(upstream):
            nonzero = tf.cast(tf.not_equal(x, 0), x.dtype)
            return upstream * xdivy(nonzero, y), -upstream * xdivy(xdivy(x, y), y)

        return tf.math.xdivy(x, y), grad

    return ratio(x, y)


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
