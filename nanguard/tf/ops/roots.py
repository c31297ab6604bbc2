"""Roots and fractional powers: ``sqrt`` and ``pow`` with finite gradients at 0."""

from __future__ import annotations

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import check_floating, setting
from nanguard.tf.ops._core import narrow, safe_sqrt, select, widen


@document("sqrt", "tf")
def sqrt(x: tf.Tensor) -> tf.Tensor:
    r"""``tf.sqrt`` has gradient ``1 / (2 sqrt(x))``: +inf at ``x = 0``, and NaN once an
    upstream zero (from ``tf.where``, a mask, a ReLU) multiplies it; ``tf.sqrt(-1e-9)`` is
    NaN. This op returns the same values and gradients everywhere else.

    A subnormal ``x`` (below 1.2e-38 in float32) reads as 0 where TensorFlow flushes subnormals (its CPU kernels and XLA do):
    ``sqrt(1.8e-40)`` is 0 there, with gradient 0, not 1.3e-20.

    Example:
        >>> x = tf.constant([0.0, 4.0])
        >>> nanguard.tf.sqrt(x)          # [0.0, 2.0]; gradient [0.0, 0.25]
    """
    x = check_floating(x, "x", "sqrt")
    return narrow(safe_sqrt(widen(x)), x.dtype)


def _positive_power(x: tf.Tensor, p: float) -> tf.Tensor:
    """x ** p for x > 0, 0 for x <= 0 (NaN stays NaN), gradient p x^(p-1) by the same rule, at every order."""

    @tf.custom_gradient
    def power(x):
        if p > 0:
            out = tf.pow(tf.nn.relu(x), p)  # 0 at x <= 0 already; relu keeps NaN
        elif p == 0:
            out = tf.nn.relu(tf.sign(x))  # 1 for x > 0, 0 for x <= 0, NaN for NaN
        else:
            # x <= 0 would be inf; a double where keeps the native gradient finite
            nonpositive = tf.less_equal(x, 0)
            out = select(nonpositive, tf.zeros_like(x), tf.pow(select(nonpositive, tf.ones_like(x), x), p))

        def grad(upstream):
            if p == 0:
                return upstream * tf.zeros_like(x)
            # the lower power is this op again, so its own derivative follows the same rule
            return upstream * (p * _positive_power(x, p - 1))

        return out, grad

    return power(x)


@document("pow", "tf")
def pow(x: tf.Tensor, exponent: float) -> tf.Tensor:
    r"""For ``0 < p < 1``, ``tf.pow(x, p)`` has an infinite gradient at ``x = 0`` (and NaN
    behind a mask). This op equals ``tf.pow`` for ``x > 0``.

    Example:
        >>> x = tf.constant([0.0, 8.0])
        >>> nanguard.tf.pow(x, 1 / 3)     # [0.0, 2.0]; gradient [0.0, 0.0833]
    """
    x = check_floating(x, "x", "pow")
    p = setting(exponent, "exponent", "pow")
    return narrow(_positive_power(widen(x), p), x.dtype)
