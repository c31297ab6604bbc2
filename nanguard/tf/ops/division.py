"""Division that cannot produce NaN: ``div`` (divide-no-nan) and ``masked_mean``."""

from __future__ import annotations

from typing import Union

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import (
    as_floating, Axis, broadcast_static, check_axis, check_floating, check_mask, compute_dtype, promote, setting,
)
from nanguard.tf.ops._core import broadcast_pair, keep_axes, nan_term, nan_where_nan, narrow, select, widen


def _div(a: tf.Tensor, b: tf.Tensor, fill: float) -> tf.Tensor:
    @tf.custom_gradient
    def div(a, b):
        # divide_no_nan's own gradients are finite at b = 0, so the reuse below is safe at 2nd order
        quotient = tf.math.divide_no_nan(a, b)
        if fill != 0:
            quotient = select(tf.equal(b, 0), tf.constant(fill, a.dtype), quotient)
        # divide_no_nan(NaN, 0) is 0, and the fill would replace it too: keep the NaN
        out = select(tf.math.is_nan(a), a, quotient)

        def grad(upstream):
            # d/da = 1/b, d/db = -(a/b)/b; both 0 where b = 0 (the result does not depend on
            # them), and both NaN at a NaN quotient (NaN in, NaN out: 1/b does not read a)
            grad_a = tf.math.divide_no_nan(upstream, b)
            grad_b = -tf.math.divide_no_nan(upstream * out, b)
            return nan_where_nan(grad_a, out), nan_where_nan(grad_b, out)

        return out, grad

    return div(a, b)


@document("div", "tf")
def div(a: tf.Tensor, b: Union[tf.Tensor, float], fill: float = 0.0) -> tf.Tensor:
    r"""The ``tf.where(b == 0, 0., a / b)`` idiom has the right value but a NaN or inf gradient
    at ``b = 0`` (the discarded branch still divides by zero). ``tf.math.divide_no_nan`` is
    right there but turns a NaN numerator into 0, hiding it. Broadcasts like ``tf.math.divide``.

    A subnormal ``b`` counts as 0 where TensorFlow flushes subnormals (its CPU kernels and
    XLA do): ``div(1e-30, 1e-40)`` is ``fill`` there.

    Dtypes promote as in torch (float16 with float32 gives float32); a Python number ``b``
    takes ``a``'s dtype and float16/bfloat16 are computed in float32, so ``div(x_fp16, 1e5)``
    is not ``x / inf``.

    Example:
        >>> nanguard.tf.div(tf.constant([1.0, 1.0]), tf.constant([2.0, 0.0]))   # [0.5, 0.0]
    """
    a = check_floating(a, "a", "div")
    b = as_floating(b, "b", "div")
    fill = setting(fill, "fill", "div")
    if isinstance(b, float):
        dtype = a.dtype
        b = tf.constant(b, compute_dtype(dtype))
    else:
        dtype = promote(a.dtype, b.dtype)
        broadcast_static(a.shape, b.shape, "div", ("a", "b"))
    wa, wb = broadcast_pair(widen(narrow(a, dtype)), widen(narrow(b, compute_dtype(dtype))))
    return narrow(_div(wa, wb, fill), dtype)


@document("masked_mean", "tf")
def masked_mean(x: tf.Tensor, mask: tf.Tensor, axis: Axis = None, keepdims: bool = False,
                fill: float = 0.0) -> tf.Tensor:
    r"""Mean pooling over padded sequences written as ``reduce_sum(x, 1) / lengths`` is NaN for
    an empty sequence (0/0, also Keras ``GlobalAveragePooling1D`` with a mask), and
    ``reduce_sum(x * mask)`` is NaN when a padded entry holds NaN.

    Example:
        >>> x = tf.constant([[1.0, 3.0, float("nan")], [5.0, 7.0, 9.0]])
        >>> keep = tf.constant([[True, True, False], [False, False, False]])
        >>> nanguard.tf.masked_mean(x, keep, axis=1)      # [2.0, 0.0]
    """
    x = check_floating(x, "x", "masked_mean")
    mask = check_mask(mask, x, "masked_mean")
    axes = check_axis(x, axis, "masked_mean")
    keepdims = setting(keepdims, "keepdims", "masked_mean")
    fill = setting(fill, "fill", "masked_mean")
    if x.shape.rank == 0:
        axes = None
    wide = widen(x)
    mask = tf.broadcast_to(mask, tf.shape(wide))
    # where, not x * mask: a NaN or inf held in a masked entry must not leak (NaN * 0)
    kept = select(mask, wide, tf.zeros_like(wide))
    total = tf.reduce_sum(kept, axis=axes, keepdims=True)
    count = tf.reduce_sum(tf.cast(mask, wide.dtype), axis=axes, keepdims=True)
    # divide_no_nan: the empty slice is 0 with gradient 0, at every order
    mean = tf.math.divide_no_nan(total, count)
    # a kept NaN: its own derivative is NaN too (1 / count does not read it); looked at only
    # when some mean is NaN
    mean = tf.cond(tf.reduce_any(tf.math.is_nan(mean)), lambda: mean + nan_term(kept, axes), lambda: mean)
    if fill != 0:
        mean = tf.where(tf.equal(count, 0), tf.constant(fill, wide.dtype), mean)
    return narrow(keep_axes(mean, axes, keepdims), x.dtype)
