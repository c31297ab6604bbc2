"""Exponentials and logarithms: ``softplus``, ``logaddexp``, ``logsumexp``."""

from __future__ import annotations

from typing import Optional, Union

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.core.softplus_parts import BetaParts, beta_parts, product_is_exact, product_low
from nanguard.tf._checks import (
    as_floating, Axis, broadcast_static, check_axis, check_floating, check_mask, promote, setting,
)
from nanguard.tf.ops._core import broadcast_pair, keep_axes, narrow, select, widen

_NEG_INF = float("-inf")


@document("softplus", "tf")
def softplus(x: tf.Tensor, beta: float = 1.0) -> tf.Tensor:
    r"""The textbook ``tf.math.log1p(tf.exp(x))`` overflows to inf for ``x > 88``
    (float32) or ``x > 11`` (float16), and masking the inf with ``tf.where`` still
    leaves a NaN *gradient* (``0 * inf``). ``tf.nn.softplus`` is finite but returns
    ``exp(x)`` below ``x = -13.9`` in float32, 7 ulps off (``log1p(e) = e - e²/2``), and
    ``tf.nn.softplus(beta * x) / beta`` overflows where ``beta * x`` does (inf at ``x =
    1e38, beta = 7``, where softplus is x) and turns the rounding of ``beta * x`` into
    up to ``|beta * x| / 2`` ulps (91 in float32 at ``beta = 0.3``, 391 in float64). The
    method (``beta * x`` split exactly, the tail through ``exp(t - log beta)``) is
    :mod:`nanguard.core.softplus_parts`'s: value and gradient ``sigmoid(beta * x)``
    within 4 ulps for every beta, as ``nanguard.torch``. float16/bfloat16 are computed
    in float32.

    Example:
        >>> x = tf.constant([0.0, 1.0, 100.0])
        >>> nanguard.tf.softplus(x)
        <tf.Tensor: shape=(3,), dtype=float32, numpy=array([  0.6931472,   1.3132616, 100.       ], dtype=float32)>
        >>> # gradient: [0.5, 0.7310586, 1.0]
    """
    x = check_floating(x, "x", "softplus")
    beta = setting(beta, "beta", "softplus")
    wide = widen(x)
    return narrow(_softplus(wide, beta_parts(beta, wide.dtype.name), product_is_exact(beta)), x.dtype)


def _softplus(x: tf.Tensor, p: BetaParts, exact: bool) -> tf.Tensor:
    """softplus(x, beta) with the constants ``p`` of beta; ``exact``: beta * x is exact (a
    power of two >= 1): no product correction, no tail. The branches are those of
    :mod:`nanguard.core.softplus_parts`.
    """
    dtype = x.dtype

    @tf.custom_gradient
    def softplus(x):
        t = x if p.b == 1.0 else x * p.b
        if exact:  # t = ±inf needs no care: e = 0, value ±inf or 0 (then x), s = 1 or 0
            t_safe = t
        else:
            infinite = tf.math.is_inf(t)
            # -inf (x = -inf, or b x beyond the largest float) to a t whose tail value is 0
            t_safe = select(infinite, select(t > 0, tf.zeros_like(t), tf.fill(tf.shape(t), tf.constant(-1e4, dtype))),
                            t)
        e = tf.exp(-tf.abs(t_safe))
        one_plus = 1 + e
        positive = t_safe >= 0
        s = select(positive, tf.ones_like(e), e) / one_plus
        value = tf.maximum(t_safe, 0) + tf.math.log1p(e)
        if exact:
            grad_factor = s
            if p.b != 1.0:
                value = value / p.b
        else:
            lo = tf.stop_gradient(select(infinite, tf.zeros_like(t), _product_error(x, t, p)))
            complement = select(positive, e, tf.ones_like(e)) / one_plus
            value = (value + lo * s) / p.b
            value = value - value * p.inverse_rest  # / beta, not / b
            grad_factor = s + lo * s * complement
            # the tail: t capped where it is not taken (exp(t) would overflow)
            in_tail = t_safe < p.tail
            t_tail = select(in_tail, t_safe, tf.fill(tf.shape(t), tf.constant(p.tail, dtype)))
            exponent = t_tail - p.log_hi
            back = exponent - t_tail
            sum_error = (t_tail - (exponent - back)) + (-p.log_hi - back)
            tail_value = tf.exp(exponent) * (1 + (sum_error + lo - p.log_lo))
            value = select(in_tail, tail_value, value)
            grad_factor = select(in_tail, tf.exp(t_tail) * (1 + lo), grad_factor)
        if p.b != 1.0:  # at beta = 1, t + log1p(e) rounds to t there by itself
            beyond = t > p.huge
            value = select(beyond, x, value)
            grad_factor = select(beyond, tf.ones_like(grad_factor), grad_factor)
        return value, lambda upstream: upstream * grad_factor

    return softplus(x)


def _product_error(x: tf.Tensor, t: tf.Tensor, p: BetaParts) -> tf.Tensor:
    """b x - t exactly (Dekker's two-product: t = fl(b x)) plus (beta - b) x.

    x beyond the largest float / (4 · splitter) is split scaled by 2**-64 (exact), so that
    x · splitter cannot overflow; where b x itself overflows the result is not used."""
    scale = select(tf.abs(x) > p.big, tf.fill(tf.shape(x), tf.constant(2.0**-64, x.dtype)), tf.ones_like(x))
    return product_low(x * scale, p) / scale + x * p.b_rest


@tf.custom_gradient
def _logaddexp(a: tf.Tensor, b: tf.Tensor):
    # a = b = ±inf would make a - b NaN; their difference is 0 there. Only there: a finite
    # a = b keeps a - b, whose derivative (1, -1) the second derivative needs (1/4 at a = b)
    same_inf = tf.logical_and(tf.equal(a, b), tf.math.is_inf(a))
    diff = select(same_inf, tf.zeros_like(a), a - b)
    out = tf.maximum(a, b) + tf.nn.softplus(-tf.abs(diff))

    def grad(upstream):
        # d/da = sigmoid(a - b), exact even where a and b are huge and close; 0 for both at
        # a = b = -inf, 1/2 at a = b = +inf (diff 0). Both compared, not max(a, b): XLA's max
        # of -inf and NaN is -inf, which took a NaN for a dead pair (gradient 0, not NaN)
        dead = tf.logical_and(tf.equal(a, _NEG_INF), tf.equal(b, _NEG_INF))
        zero = tf.zeros_like(upstream)
        return (select(dead, zero, upstream * tf.sigmoid(diff)),
                select(dead, zero, upstream * tf.sigmoid(-diff)))

    return out, grad


@document("logaddexp", "tf")
def logaddexp(a: tf.Tensor, b: Union[tf.Tensor, float]) -> tf.Tensor:
    r"""``tf.experimental.numpy.logaddexp`` returns -inf for ``a = b = -inf`` but its gradient
    there is NaN. Broadcasts like TensorFlow's binary ops.

    Example:
        >>> a = tf.constant([float("-inf"), 0.0])
        >>> nanguard.tf.logaddexp(a, tf.constant([float("-inf"), 0.0]))   # [-inf, 0.6931472]
        >>> # gradient in a: [0.0, 0.5]
    """
    a = check_floating(a, "a", "logaddexp")
    b = as_floating(b, "b", "logaddexp")
    dtype = a.dtype if isinstance(b, float) else promote(a.dtype, b.dtype)
    b = tf.constant(b, dtype) if isinstance(b, float) else b
    broadcast_static(a.shape, b.shape, "logaddexp", ("a", "b"))
    wa, wb = broadcast_pair(widen(narrow(a, dtype)), widen(narrow(b, dtype)))
    return narrow(_logaddexp(wa, wb), dtype)


def _logsumexp(x: tf.Tensor, axes) -> tf.Tensor:
    """log sum exp over ``axes`` (keepdims), -inf for empty or all -inf slices, gradient softmax."""

    @tf.custom_gradient
    def lse(x):
        top = tf.stop_gradient(tf.reduce_max(x, axis=axes, keepdims=True))
        # an all -inf slice (and +inf, NaN) shifts by 0: exp(-inf) = 0 gives log 0 = -inf
        shift = tf.where(tf.math.is_finite(top), top, tf.zeros_like(top))
        weights = tf.exp(x - shift)
        total = tf.reduce_sum(weights, axis=axes, keepdims=True)
        out = tf.math.log(total) + shift

        def grad(upstream):
            # softmax = weights / total; divide_no_nan gives a dead slice (total 0) gradient 0
            return weights * tf.math.divide_no_nan(upstream, total)

        return out, grad

    return lse(x)


@document("logsumexp", "tf")
def logsumexp(x: tf.Tensor, axis: Axis = None, keepdims: bool = False, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    r"""``tf.reduce_logsumexp`` returns -inf for a slice that is all -inf but its gradient there
    is NaN. This op agrees with it everywhere else.

    Example:
        >>> x = tf.fill([2, 3], float("-inf"))
        >>> nanguard.tf.logsumexp(x, axis=1)     # [-inf, -inf], gradient all 0
    """
    x = check_floating(x, "x", "logsumexp")
    axes = check_axis(x, axis, "logsumexp")
    keepdims = setting(keepdims, "keepdims", "logsumexp")
    if mask is not None:
        mask = check_mask(mask, x, "logsumexp")
        x = select(mask, x, tf.constant(_NEG_INF, x.dtype))
    if x.shape.rank == 0:
        axes = None
    out = _logsumexp(widen(x), axes)
    return narrow(keep_axes(out, axes, keepdims), x.dtype)
