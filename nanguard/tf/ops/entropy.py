"""``0 · log 0 = 0``: ``xlogy``, ``entropy`` and ``cross_entropy_probs`` with finite gradients."""

from __future__ import annotations

from typing import Union

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import CHECKS, as_floating, broadcast_static, check_floating, check_single_axis, promote
from nanguard.tf.ops._core import broadcast_pair, nan_where_nan, narrow, ratio_unless_both_zero, select, widen


def _log_unless_both_zero(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """log y, but 0 where x = y = 0: the x-derivative of x·log y by the convention.

    A double where (log 1 there), not log(y + [x = y = 0]): the latter's derivative in y
    at that point is 1, which made the mixed second derivative 1 instead of the convention's 0.
    """
    both_zero = tf.logical_and(tf.equal(x, 0), tf.equal(y, 0))
    return tf.math.log(tf.where(both_zero, tf.ones_like(y), y))


@tf.custom_gradient
def _xlogy(x: tf.Tensor, y: tf.Tensor):
    # tf.math.xlogy(0, NaN) is 0; a NaN y must give NaN (NaN in, NaN out)
    out = select(tf.math.is_nan(y), y, tf.math.xlogy(x, y))

    def grad(upstream):
        # d/dx = log y does not read x: a NaN x gets its NaN derivative explicitly;
        # d/dy = x / y (0 only at x = y = 0) is NaN for a NaN x or y by itself
        grad_x = nan_where_nan(upstream * _log_unless_both_zero(x, y), x)
        return grad_x, upstream * ratio_unless_both_zero(x, y)

    return out, grad


@document("xlogy", "tf")
def xlogy(x: tf.Tensor, y: Union[tf.Tensor, float]) -> tf.Tensor:
    r"""``tf.math.xlogy`` has the right value at ``x = y = 0``, but its gradient in ``x`` at
    ``x = 0 < y`` is 0 instead of ``log y``, it turns a NaN ``y`` into 0 when ``x = 0``,
    and its second derivative at ``x = y = 0`` is NaN; the hand-written ``x * tf.math.log(y)``
    is NaN already in the forward pass.

    Example:
        >>> p = tf.constant([0.0, 0.5])
        >>> nanguard.tf.xlogy(p, p)        # [0.0, -0.3466]; gradient of the sum: [0.0, 0.3069]
    """
    x = check_floating(x, "x", "xlogy")
    y = as_floating(y, "y", "xlogy")
    dtype = x.dtype if isinstance(y, float) else promote(x.dtype, y.dtype)
    y = tf.constant(y, dtype) if isinstance(y, float) else y
    broadcast_static(x.shape, y.shape, "xlogy", ("x", "y"))
    wx, wy = broadcast_pair(widen(narrow(x, dtype)), widen(narrow(y, dtype)))
    return narrow(_xlogy(wx, wy), dtype)


def _entropy(p: tf.Tensor, axis: int) -> tf.Tensor:
    @tf.custom_gradient
    def entropy(p):
        out = -tf.reduce_sum(tf.math.xlogy(p, p), axis=axis)  # xlogy(0, 0) = 0; p < 0 or NaN: NaN

        def grad(upstream):
            # -(log p + 1) for p > 0, written as -(sign(p) log p + sign(p)): exactly 0 at p = 0
            # (xlogy(0, 0) = 0), NaN for p < 0 or NaN; its own derivative is finite at 0
            sign = tf.sign(p)
            local = tf.math.xlogy(sign, p) + sign
            return -local * tf.expand_dims(upstream, axis)

        return out, grad

    return entropy(p)


@document("entropy", "tf")
def entropy(p: tf.Tensor, axis: int = -1) -> tf.Tensor:
    r"""The textbook ``-tf.reduce_sum(p * tf.math.log(p))`` is NaN as soon as one probability is
    exactly 0; clipping ``p`` to ``1e-10`` biases it and zeroes the gradient at the bound.

    float16/bfloat16 are computed in float32.

    Example:
        >>> p = tf.constant([0.1, 0.2, 0.0, 0.7])
        >>> nanguard.tf.entropy(p)       # 0.80181855
        >>> # gradient: [1.3025851, 0.6094379, 0.0, -0.643325]
    """
    p = check_floating(p, "p", "entropy")
    axis = check_single_axis(p, axis, "entropy")
    CHECKS.rank(p, 1, "`p`", "entropy")
    return narrow(_entropy(widen(p), axis), p.dtype)


def _cross_entropy(target: tf.Tensor, probs: tf.Tensor, axis: int) -> tf.Tensor:
    @tf.custom_gradient
    def cross_entropy(target, probs):
        # Every q in (0, inf), the common case, has no 0 · log 0 to repair: t · log q is xlogy
        # there and log q is its t-derivative, so one log serves the value and both gradients.
        regular = tf.logical_and(tf.reduce_min(probs) > 0, tf.reduce_max(probs) < float("inf"))

        def plain():
            log_q = tf.math.log(probs)
            return -tf.reduce_sum(target * log_q, axis=axis), log_q

        def repaired():
            # xlogy(0, q) = 0 (q = 0 included); t > 0 = q gives the true +inf. A NaN q stays NaN.
            terms = tf.where(tf.math.is_nan(probs), probs, tf.math.xlogy(target, probs))
            return -tf.reduce_sum(terms, axis=axis), _log_unless_both_zero(target, probs)

        out, d_target = tf.cond(regular, plain, repaired)

        def grad(upstream):
            minus = -tf.expand_dims(upstream, axis)
            d_probs = tf.cond(regular, lambda: target / probs, lambda: ratio_unless_both_zero(target, probs))
            # d/dt = -log q does not read t: a NaN target gets its NaN derivative explicitly,
            # looked at only when some loss is NaN
            d_t = tf.cond(tf.reduce_any(tf.math.is_nan(out)), lambda: nan_where_nan(d_target, target),
                          lambda: d_target)
            return minus * d_t, minus * d_probs

        return out, grad

    return cross_entropy(target, probs)


@document("cross_entropy_probs", "tf")
def cross_entropy_probs(target: tf.Tensor, probs: tf.Tensor, axis: int = -1) -> tf.Tensor:
    r"""The hand-written ``-tf.reduce_sum(y * tf.log(y_conv))`` of the seed stories is NaN when
    a predicted probability is exactly 0, even where the target is 0 too. Terms with
    ``target_i = 0`` contribute 0 with gradient 0 in ``probs_i`` for every probability
    (0 included). float16/bfloat16 inputs are computed in float32. If you have logits,
    prefer ``-tf.reduce_sum(target * nanguard.tf.log_softmax(logits, axis), axis)``.

    Example:
        >>> target = tf.constant([0.0, 1.0, 0.0])
        >>> probs = tf.constant([0.0, 0.9, 0.1])
        >>> nanguard.tf.cross_entropy_probs(target, probs)     # 0.10536052
    """
    target = check_floating(target, "target", "cross_entropy_probs")
    probs = check_floating(probs, "probs", "cross_entropy_probs")
    shape = broadcast_static(target.shape, probs.shape, "cross_entropy_probs", ("target", "probs"))
    CHECKS.rank(shape, 1, "inputs", "cross_entropy_probs")
    axis = check_single_axis(shape, axis, "cross_entropy_probs")
    dtype = promote(target.dtype, probs.dtype)
    wt, wq = broadcast_pair(widen(narrow(target, dtype)), widen(narrow(probs, dtype)))
    return narrow(_cross_entropy(wt, wq, axis), dtype)
