"""Exponentials and logarithms: ``softplus``, ``logaddexp``, ``logsumexp``."""

from __future__ import annotations

from typing import Optional, Union

import tensorflow as tf

from nanguard.tf._checks import (
    Axis,
    as_floating,
    broadcast_static,
    check_axis,
    check_bool,
    check_floating,
    check_mask,
    check_number,
    promote,
)
from nanguard.tf.ops._core import broadcast_pair, keep_axes, narrow, select, widen

_NEG_INF = float("-inf")


def softplus(x: tf.Tensor, beta: float = 1.0) -> tf.Tensor:
    r"""Softplus ``log(1 + exp(beta * x)) / beta``, finite for every finite input.

    .. math:: \operatorname{softplus}(x) = \tfrac{1}{\beta}\log\!\left(1 + e^{\beta x}\right),
              \qquad \frac{d}{dx} = \sigma(\beta x)

    The textbook ``tf.math.log1p(tf.exp(x))`` overflows to inf for ``x > 88`` (float32) or
    ``x > 11`` (float16), and masking the inf with ``tf.where`` still leaves a NaN *gradient*
    (``0 * inf``). This op is ``tf.nn.softplus`` (exact, with gradient ``sigmoid``), with a
    ``beta`` and float16/bfloat16 computed in float32 so that ``beta * x`` cannot overflow.

    Singular points: none. Limits: value -> 0 and gradient -> 0 as x -> -inf;
    value -> x and gradient -> 1 as x -> +inf, reached exactly in every dtype.

    Args:
        x: floating tensor of any shape.
        beta: a finite number > 0.

    Example:
        >>> x = tf.constant([0.0, 1.0, 100.0])
        >>> nanguard.tf.softplus(x)
        <tf.Tensor: shape=(3,), dtype=float32, numpy=array([  0.6931472,   1.3132616, 100.       ], dtype=float32)>
        >>> # gradient: [0.5, 0.7310586, 1.0]
    """
    x = check_floating(x, "x", "softplus")
    beta = check_number(beta, "beta", "softplus", positive=True)
    wide = widen(x)
    out = tf.nn.softplus(wide) if beta == 1.0 else tf.nn.softplus(wide * beta) / beta
    return narrow(out, x.dtype)


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


def logaddexp(a: tf.Tensor, b: Union[tf.Tensor, float]) -> tf.Tensor:
    r"""``log(exp(a) + exp(b))`` with a NaN-free gradient when both inputs are -inf.

    .. math:: \operatorname{logaddexp}(a, b) = \log(e^a + e^b), \qquad
              \frac{\partial}{\partial a} = \sigma(a - b)

    ``tf.experimental.numpy.logaddexp`` returns -inf for ``a = b = -inf`` but its gradient
    there is NaN. Broadcasts like TensorFlow's binary ops.

    Singular points:
        * ``a = b = -inf`` (e.g. two masked scores): value -inf, gradient 0 for both.
        * ``a = b = +inf``: value +inf, gradient 1/2 for both (the limit along ``a = b``).
        * ``a = -inf``, ``b`` finite: value ``b``, gradients 0 and 1.

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


def logsumexp(x: tf.Tensor, axis: Axis = None, keepdims: bool = False, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    r"""``log(sum(exp(x)))`` over ``axis``, optionally over the kept entries only.

    .. math:: \operatorname{logsumexp}(x) = \log \sum_{i:\,m_i} e^{x_i}, \qquad
              \frac{\partial}{\partial x_i} = m_i\, e^{x_i - \operatorname{logsumexp}(x)}

    ``tf.reduce_logsumexp`` returns -inf for a slice that is all -inf but its gradient there
    is NaN. This op agrees with it everywhere else.

    Singular points:
        * a slice that is all -inf, or all masked out (or empty): value -inf, gradient 0.
        * masked entries (``mask`` False): no gradient (exactly 0), whatever they hold,
          NaN and inf included.

    Args:
        x: floating tensor.
        axis: axis or axes to reduce (None: all).
        keepdims: keep the reduced axes with size 1.
        mask: optional bool tensor broadcastable to ``x``; True keeps an entry.

    Example:
        >>> x = tf.fill([2, 3], float("-inf"))
        >>> nanguard.tf.logsumexp(x, axis=1)     # [-inf, -inf], gradient all 0
    """
    x = check_floating(x, "x", "logsumexp")
    axes = check_axis(x, axis, "logsumexp")
    keepdims = check_bool(keepdims, "keepdims", "logsumexp")
    if mask is not None:
        mask = check_mask(mask, x, "logsumexp")
        x = select(mask, x, tf.constant(_NEG_INF, x.dtype))
    if x.shape.rank == 0:
        axes = None
    out = _logsumexp(widen(x), axes)
    return narrow(keep_axes(out, axes, keepdims), x.dtype)
