"""Softmax and log-softmax that survive fully masked (all -inf) slices."""

from __future__ import annotations

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.jax._checks import CHECKS, Axis, check_axis, check_floating, check_mask, pick_mask
from nanguard.jax.ops._core import Axes, divide_no_nan, narrow, widen

_NEG_INF = float("-inf")


def _shifted(scores: jax.Array, axes: Axes):
    """(scores - max, exp of it, its sum) per slice; a dead slice (all -inf) is shifted by 0, not by -inf.

    A +inf or NaN score keeps its NaN (inf - inf), as in ``jax.nn.softmax``: only the 0/0 of
    an empty distribution is repaired, never a NaN that came from the data.
    """
    top = jax.lax.stop_gradient(jnp.max(scores, axis=axes, keepdims=True, initial=_NEG_INF))
    shifted = scores - jnp.where(top == _NEG_INF, jnp.zeros((), scores.dtype), top)
    weights = jnp.exp(shifted)
    return shifted, weights, jnp.sum(weights, axis=axes, keepdims=True)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _softmax(scores: jax.Array, axes: Axes) -> jax.Array:
    _, weights, total = _shifted(scores, axes)
    # divide_no_nan: a dead slice (total 0) is all 0, with a finite derivative there
    return divide_no_nan(weights, total)


@_softmax.defjvp
def _softmax_jvp(axes, primals, tangents):
    (scores,), (t,) = primals, tangents
    prob = _softmax(scores, axes)
    # masked, -inf and dead entries have probability 0, so p (t - sum(t p)) is 0 there
    return prob, prob * (t - jnp.sum(t * prob, axis=axes, keepdims=True))


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _log_softmax(scores: jax.Array, axes: Axes) -> jax.Array:
    shifted, _, total = _shifted(scores, axes)
    # a dead slice has total 0: subtract log 1, leaving -inf (not -inf - -inf = NaN)
    return shifted - jnp.log(jnp.where(total == 0, jnp.ones((), total.dtype), total))


@_log_softmax.defjvp
def _log_softmax_jvp(axes, primals, tangents):
    (scores,), (t,) = primals, tangents
    out = _log_softmax(scores, axes)
    # t - sum(softmax * t); exp(-inf) = 0: -inf entries carry no weight, and a dead slice
    # (all -inf) passes the tangent through (its softmax is all 0)
    return out, t - jnp.sum(jnp.exp(out) * t, axis=axes, keepdims=True)


def _prepare(x, axis, mask, where, op):
    x = check_floating(x, "x", op)
    CHECKS.rank(x, 1, "`x`", op)
    axes = check_axis(x, axis, op)
    mask = pick_mask(mask, where, op)
    if mask is not None:
        mask = check_mask(mask, x, op)
    return x, axes, mask


@document("softmax", "jax")
def softmax(x: jax.Array, axis: Axis = -1, mask: Optional[jax.Array] = None, *,
            where: Optional[jax.Array] = None) -> jax.Array:
    r"""Attention code masks scores with ``-inf``; a row with nothing to attend to (padding)
    is then all ``-inf`` and ``jax.nn.softmax`` returns NaN for it (without ``where=``),
    which poisons every gradient. Elsewhere the values equal ``jax.nn.softmax`` of the kept
    entries.

    Example:
        >>> scores = jnp.array([[1.0, 2.0], [-jnp.inf, -jnp.inf]])
        >>> nanguard.jax.softmax(scores, axis=-1)        # [[0.2689, 0.7311], [0.0, 0.0]]
    """
    x, axes, mask = _prepare(x, axis, mask, where, "softmax")
    scores = widen(x)
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.asarray(_NEG_INF, scores.dtype))
    return narrow(_softmax(scores, axes), x.dtype)


@document("log_softmax", "jax")
def log_softmax(x: jax.Array, axis: Axis = -1, mask: Optional[jax.Array] = None, *,
                where: Optional[jax.Array] = None) -> jax.Array:
    r"""Values equal ``jax.nn.log_softmax`` of the kept entries.

    ``jax.nn.log_softmax(where=)`` puts ``-inf`` at masked entries; this op puts the 0
    placeholder there.

    Example:
        >>> logits = jnp.array([[2.0, 0.0, 5.0]])
        >>> keep = jnp.array([[True, True, False]])
        >>> nanguard.jax.log_softmax(logits, axis=-1, mask=keep)   # [[-0.1269, -2.1269, 0.0]]
    """
    x, axes, mask = _prepare(x, axis, mask, where, "log_softmax")
    scores = widen(x)
    if mask is None:
        return narrow(_log_softmax(scores, axes), x.dtype)
    scores = jnp.where(mask, scores, jnp.asarray(_NEG_INF, scores.dtype))
    out = _log_softmax(scores, axes)
    # the placeholder 0 at masked entries; the outer where gives them gradient 0
    return narrow(jnp.where(mask, out, jnp.zeros((), out.dtype)), x.dtype)
