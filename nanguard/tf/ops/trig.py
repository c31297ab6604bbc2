"""Inverse trigonometry with finite gradients at ±1: ``acos``, ``asin``."""

from __future__ import annotations

import tensorflow as tf

from nanguard.core.dtypes import trig_rounding_tolerance
from nanguard.core.opspec import document
from nanguard.tf._checks import check_floating
from nanguard.tf.ops._core import narrow, reciprocal_sqrt_or_zero, widen

def _inverse_sine(x: tf.Tensor, tolerance: float, sign: float) -> tf.Tensor:
    """asin (sign = +1) or acos (sign = -1) of ``x`` pulled onto ±1 when within ``tolerance`` outside."""

    @tf.custom_gradient
    def inverse_sine(x):
        # |x| <= 1: x / 1; 1 < |x| <= 1 + tol: x / |x| = ±1 exactly; beyond: x / (1 + tol), still
        # outside, so an input further out gives NaN like the textbook op. NaN stays NaN. Most
        # tensors lie inside [-1, 1], and the pull costs three passes: it runs only when needed.
        # Each entry on its own: any(|x| > 1), not max |x| > 1, which one NaN makes False
        # (and then 1 + 1 ulp beside it came out NaN).
        outside = tf.reduce_any(tf.abs(x) > 1.0)
        inside = tf.cond(outside, lambda: x / tf.clip_by_value(tf.abs(x), 1.0, 1.0 + tolerance), lambda: x)
        out = tf.asin(inside) if sign > 0 else tf.acos(inside)

        def grad(upstream):
            # (1 - x)(1 + x) rather than 1 - x², which loses all precision near ±1. It is exactly 0
            # at ±1 (gradient 0 there), negative beyond the tolerance (NaN, as the value), NaN for NaN.
            return upstream * reciprocal_sqrt_or_zero((1 - inside) * (1 + inside), sign)

        return out, grad

    return inverse_sine(x)


@document("asin", "tf")
def asin(x: tf.Tensor) -> tf.Tensor:
    r"""``tf.asin`` has an infinite gradient at ±1 and returns NaN for ``1.0000001``, which a
    dot product of unit vectors easily produces.

    Example:
        >>> nanguard.tf.asin(tf.constant([1.0, 0.5]))   # [1.5707964, 0.5235988]; gradient [0.0, 1.1547005]
    """
    x = check_floating(x, "x", "asin")
    return narrow(_inverse_sine(widen(x), trig_rounding_tolerance(x.dtype.name), 1.0), x.dtype)


@document("acos", "tf")
def acos(x: tf.Tensor) -> tf.Tensor:
    r"""The angle between two vectors, ``acos(cosine_similarity(a, b))``, has an infinite
    gradient for parallel vectors (``tf.acos(1.)``'s is -inf) and is NaN when rounding pushes
    the cosine to ``1.0000001``.

    Example:
        >>> nanguard.tf.acos(tf.constant([1.0000001, 0.0]))   # [0.0, 1.5707964]; gradient [0.0, -1.0]
    """
    x = check_floating(x, "x", "acos")
    return narrow(_inverse_sine(widen(x), trig_rounding_tolerance(x.dtype.name), -1.0), x.dtype)
