"""``0 · log 0 = 0``: ``xlogy``, ``entropy`` and ``cross_entropy_probs`` with finite gradients."""

from __future__ import annotations

from functools import partial
from typing import Union

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.jax._checks import CHECKS, as_floating, broadcast_static, check_floating, check_single_axis, promote
from nanguard.jax.ops._core import narrow, ratio_unless_both_zero, widen


def _log_unless_both_zero(x: jax.Array, y: jax.Array) -> jax.Array:
    """log y, but 0 where x = y = 0 (log 1 there): the x-derivative of x·log y by the convention."""
    both_zero = (x == 0) & (y == 0)
    return jnp.log(jnp.where(both_zero, jnp.ones((), y.dtype), y))


def _xlogy_value(x: jax.Array, y: jax.Array, log_y: jax.Array) -> jax.Array:
    """x·log y with 0 where x = 0 (y = 0 and y = inf included), but NaN for a NaN y (NaN in, NaN out)."""
    zero_term = jnp.where(jnp.isnan(y), y, jnp.zeros((), y.dtype))
    return jnp.where(x == 0, zero_term, x * log_y)


@jax.custom_jvp
def _xlogy(x: jax.Array, y: jax.Array) -> jax.Array:
    return _xlogy_value(x, y, _log_unless_both_zero(x, y))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    # d/dx = log y does not read x: a NaN x gets its NaN derivative explicitly; d/dy = x / y
    # (0 only at x = y = 0) is NaN for a NaN x or y by itself
    d_x = jnp.where(jnp.isnan(x), x, _log_unless_both_zero(x, y))
    return _xlogy(x, y), tx * d_x + ty * ratio_unless_both_zero(x, y)


@document("xlogy", "jax")
def xlogy(x: jax.Array, y: Union[jax.Array, float]) -> jax.Array:
    r"""``jax.scipy.special.xlogy`` has the right value at ``x = y = 0``, but its gradient there
    is ``-inf`` in ``x`` and NaN in ``y``, and it turns a NaN ``y`` into 0 when ``x = 0``;
    the hand-written ``x * jnp.log(y)`` is NaN already in the forward pass.

    Example:
        >>> p = jnp.array([0.0, 0.5])
        >>> nanguard.jax.xlogy(p, p)        # [0.0, -0.3466]; gradient of the sum: [0.0, 0.3069]
    """
    x = check_floating(x, "x", "xlogy")
    y = as_floating(y, "y", "xlogy")
    dtype = x.dtype if isinstance(y, float) else promote(x.dtype, y.dtype)
    y = jnp.asarray(y, dtype) if isinstance(y, float) else y
    broadcast_static(x, y, "xlogy", ("x", "y"))
    wx, wy = jnp.broadcast_arrays(widen(narrow(x, dtype)), widen(narrow(y, dtype)))
    return narrow(_xlogy(wx, wy), dtype)


def _log_or_zero(p: jax.Array) -> jax.Array:
    """log p, and 0 at p = 0 (double where: its derivative is 0 there); NaN for p < 0 or NaN."""
    return jnp.log(jnp.where(p == 0, jnp.ones((), p.dtype), p))


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _entropy(p: jax.Array, axis: int) -> jax.Array:
    return -jnp.sum(p * _log_or_zero(p), axis=axis)  # 0 · 0 at p = 0; p < 0 or NaN: NaN


@_entropy.defjvp
def _entropy_jvp(axis, primals, tangents):
    (p,), (t,) = primals, tangents
    # -(log p + 1) for p > 0, exactly 0 at p = 0 (sign 0), NaN for p < 0 or NaN
    local = _log_or_zero(p) + jnp.sign(p)
    return _entropy(p, axis), -jnp.sum(t * local, axis=axis)


@document("entropy", "jax")
def entropy(p: jax.Array, axis: int = -1) -> jax.Array:
    r"""The textbook ``-jnp.sum(p * jnp.log(p))`` is NaN as soon as one probability is exactly
    0; ``jax.scipy.special.entr`` has the value but a +inf gradient at 0; clipping ``p`` to
    ``1e-10`` biases it and zeroes the gradient at the bound.

    float16/bfloat16 are computed in float32.

    Example:
        >>> p = jnp.array([0.1, 0.2, 0.0, 0.7])
        >>> nanguard.jax.entropy(p)       # 0.80181855
        >>> # gradient: [1.3025851, 0.6094379, 0.0, -0.643325]
    """
    p = check_floating(p, "p", "entropy")
    CHECKS.rank(p, 1, "`p`", "entropy")
    axis = check_single_axis(p, axis, "entropy")
    return narrow(_entropy(widen(p), axis), p.dtype)


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _cross_entropy(target: jax.Array, probs: jax.Array, axis: int) -> jax.Array:
    # xlogy(0, q) = 0 (q = 0 included); t > 0 = q gives the true +inf. A NaN q stays NaN.
    return -jnp.sum(_xlogy_value(target, probs, _log_unless_both_zero(target, probs)), axis=axis)


@_cross_entropy.defjvp
def _cross_entropy_jvp(axis, primals, tangents):
    (target, probs), (tt, tq) = primals, tangents
    # as in xlogy: a NaN target's derivative is NaN although -log q does not read it
    d_target = jnp.where(jnp.isnan(target), target, _log_unless_both_zero(target, probs))
    terms = tt * d_target + tq * ratio_unless_both_zero(target, probs)
    return _cross_entropy(target, probs, axis), -jnp.sum(terms, axis=axis)


@document("cross_entropy_probs", "jax")
def cross_entropy_probs(target: jax.Array, probs: jax.Array, axis: int = -1) -> jax.Array:
    r"""The hand-written ``-jnp.sum(y * jnp.log(y_conv))`` of the seed stories is NaN when a
    predicted probability is exactly 0, even where the target is 0 too. Terms with
    ``target_i = 0`` contribute 0 with gradient 0 in ``probs_i`` for every probability
    (0 included). float16/bfloat16 inputs are computed in float32. If you have logits,
    prefer ``-jnp.sum(target * nanguard.jax.log_softmax(logits, axis), axis)`` (or
    ``optax.softmax_cross_entropy``).

    Example:
        >>> target = jnp.array([0.0, 1.0, 0.0])
        >>> probs = jnp.array([0.0, 0.9, 0.1])
        >>> nanguard.jax.cross_entropy_probs(target, probs)     # 0.10536052
    """
    target = check_floating(target, "target", "cross_entropy_probs")
    probs = check_floating(probs, "probs", "cross_entropy_probs")
    shape = broadcast_static(target, probs, "cross_entropy_probs", ("target", "probs"))
    CHECKS.rank(shape, 1, "inputs", "cross_entropy_probs")
    axis = check_single_axis(shape, axis, "cross_entropy_probs")
    dtype = promote(target.dtype, probs.dtype)
    wt, wq = jnp.broadcast_arrays(widen(narrow(target, dtype)), widen(narrow(probs, dtype)))
    return narrow(_cross_entropy(wt, wq, axis), dtype)
