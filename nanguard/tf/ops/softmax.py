"""Softmax and log-softmax that survive fully masked (all -inf) slices."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import CHECKS, check_floating, check_mask, check_single_axis
from nanguard.tf.ops._core import narrow, select, widen

_NEG_INF = float("-inf")


def _shifted(scores: tf.Tensor, axis: int, top: Optional[tf.Tensor] = None):
    """(scores - max, sum of exp) per slice; a dead slice (all -inf) is shifted by 0, not by -inf.

    A +inf or NaN score keeps its NaN (inf - inf), as in TensorFlow: only the 0/0 of an
    empty distribution is repaired, never a NaN that came from the data.
    """
    if top is None:
        top = tf.stop_gradient(tf.reduce_max(scores, axis=axis, keepdims=True))
    shifted = scores - tf.where(tf.equal(top, _NEG_INF), tf.zeros_like(top), top)
    weights = tf.exp(shifted)
    return shifted, weights, tf.reduce_sum(weights, axis=axis, keepdims=True)


def _softmax(scores: tf.Tensor, axis: int) -> tf.Tensor:
    last = axis in (-1, scores.shape.rank - 1)

    @tf.custom_gradient
    def softmax(scores):
        top = tf.stop_gradient(tf.reduce_max(scores, axis=axis, keepdims=True))

        def careful():
            _, weights, total = _shifted(scores, axis, top)
            # divide_no_nan: a dead slice (total 0) is all 0; its native gradient is finite
            # there, so the gradient below, which reuses `prob`, has a finite derivative too
            return tf.math.divide_no_nan(weights, total)

        if last:
            # every slice's max finite (the common case: no dead slice, no NaN or +inf, which
            # TensorFlow's kernel turns into [NaN, 0]): its fused kernel, the same values
            # (within an ulp) at a fraction of the cost of the four ops above in graph mode
            prob = tf.cond(tf.reduce_all(tf.math.is_finite(top)), lambda: tf.nn.softmax(scores, axis=-1), careful)
        else:
            prob = careful()

        def grad(upstream):
            # masked, -inf and dead entries have probability 0, so p (g - sum(g p)) is 0 there
            return prob * (upstream - tf.reduce_sum(upstream * prob, axis=axis, keepdims=True))

        return prob, grad

    return softmax(scores)


def _log_softmax(scores: tf.Tensor, axis: int) -> tf.Tensor:
    @tf.custom_gradient
    def log_softmax(scores):
        shifted, _, total = _shifted(scores, axis)
        # a dead slice has total 0: subtract log 1, leaving -inf (not -inf - -inf = NaN)
        out = shifted - tf.math.log(tf.where(tf.equal(total, 0), tf.ones_like(total), total))

        def grad(upstream):
            # exp(-inf) = 0: -inf entries and dead slices pass the upstream gradient through
            return upstream - tf.exp(out) * tf.reduce_sum(upstream, axis=axis, keepdims=True)

        return out, grad

    return log_softmax(scores)


def _prepare(x, axis, mask, op):
    x = check_floating(x, "x", op)
    axis = check_single_axis(x, axis, op)
    if mask is not None:
        mask = check_mask(mask, x, op)
    return x, axis, mask


@document("softmax", "tf")
def softmax(x: tf.Tensor, axis: int = -1, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    r"""Attention code masks scores with ``-inf``; a row with nothing to attend to (padding)
    is then all ``-inf`` and ``tf.nn.softmax`` returns NaN for it, which poisons every
    gradient. Elsewhere the values equal ``tf.nn.softmax`` of the kept entries.

    Example:
        >>> scores = tf.constant([[1.0, 2.0], [float("-inf"), float("-inf")]])
        >>> nanguard.tf.softmax(scores, axis=-1)        # [[0.2689, 0.7311], [0.0, 0.0]]
    """
    x, axis, mask = _prepare(x, axis, mask, "softmax")
    CHECKS.rank(x, 1, "`x`", "softmax")
    scores = widen(x)
    if mask is not None:
        scores = select(mask, scores, tf.constant(_NEG_INF, scores.dtype))
    return narrow(_softmax(scores, axis), x.dtype)


@document("log_softmax", "tf")
def log_softmax(x: tf.Tensor, axis: int = -1, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    r"""Values equal ``tf.nn.log_softmax`` of the kept entries.

    Example:
        >>> logits = tf.constant([[2.0, 0.0, 5.0]])
        >>> keep = tf.constant([[True, True, False]])
        >>> nanguard.tf.log_softmax(logits, axis=-1, mask=keep)   # [[-0.1269, -2.1269, 0.0]]
    """
    x, axis, mask = _prepare(x, axis, mask, "log_softmax")
    CHECKS.rank(x, 1, "`x`", "log_softmax")
    scores = widen(x)
    if mask is None:
        return narrow(_log_softmax(scores, axis), x.dtype)
    scores = select(mask, scores, tf.constant(_NEG_INF, scores.dtype))
    out = _log_softmax(scores, axis)
    # the placeholder 0 at masked entries; the outer where gives them gradient 0
    return narrow(select(mask, out, tf.zeros_like(out)), x.dtype)
