"""Exponentials and logarithms: ``softplus``, ``logaddexp``, ``logsumexp``."""

from __future__ import annotations

from functools import partial
from typing import Optional, Union

import jax
import jax.numpy as jnp

from nanguard.jax._checks import (
    Axis,
    as_floating,
    broadcast_static,
    check_axis,
    check_bool,
    check_floating,
    check_mask,
    check_number,
    pick_mask,
    promote,
)
from nanguard.jax.ops._core import Axes, divide_no_nan, keep_axes, narrow, widen

_NEG_INF = float("-inf")


def softplus(x: jax.Array, beta: float = 1.0) -> jax.Array:
    r"""Softplus ``log(1 + exp(beta * x)) / beta``, finite for every finite input.

    .. math:: \operatorname{softplus}(x) = \tfrac{1}{\beta}\log\!\left(1 + e^{\beta x}\right),
              \qquad \frac{d}{dx} = \sigma(\beta x)

    The textbook ``jnp.log1p(jnp.exp(x))`` overflows to inf for ``x > 88`` (float32) or
    ``x > 11`` (float16), and masking the inf with ``jnp.where`` still leaves a NaN
    *gradient* (``0 * inf``). This op is ``jax.nn.softplus`` (exact, with gradient
    ``sigmoid``), with a ``beta`` and float16/bfloat16 computed in float32 so that
    ``beta * x`` cannot overflow.

    Singular points: none. Limits: value -> 0 and gradient -> 0 as x -> -inf;
    value -> x and gradient -> 1 as x -> +inf, reached exactly in every dtype.

    Args:
        x: floating array of any shape.
        beta: a finite number > 0.

    Example:
        >>> x = jnp.array([0.0, 1.0, 100.0])
        >>> nanguard.jax.softplus(x)
        Array([  0.6931472,   1.3132616, 100.       ], dtype=float32)
        >>> # gradient: [0.5, 0.7310586, 1.0]
    """
    x = check_floating(x, "x", "softplus")
    beta = check_number(beta, "beta", "softplus", positive=True)
    wide = widen(x)
    out = jax.nn.softplus(wide) if beta == 1.0 else jax.nn.softplus(wide * beta) / beta
    return narrow(out, x.dtype)


def _gap(a: jax.Array, b: jax.Array):
    """(a - b, exp(-|a - b|)); a = b = ±inf would make a - b NaN: 0 there.

    Only there: a finite a = b keeps a - b, whose derivative (1, -1) the second derivative
    needs (1/4 at a = b; a where on every a == b made it 0). -|d| is written
    where(d < 0, d, -d): NaN stays NaN, and its derivative at d = 0 is -1 (abs's is 0).
    """
    diff = jnp.where((a == b) & jnp.isinf(a), jnp.zeros((), a.dtype), a - b)
    return diff, jnp.exp(jnp.where(diff < 0, diff, -diff))


@jax.custom_jvp
def _logaddexp(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.maximum(a, b) + jnp.log1p(_gap(a, b)[1])


@_logaddexp.defjvp
def _logaddexp_jvp(primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    diff, e = _gap(a, b)
    # d/da = sigmoid(a - b), exact even where a and b are huge and close: 1 / (1 + e) for the
    # larger input, e / (1 + e) for the other, from the value's one exp. 0 for both at
    # a = b = -inf, 1/2 at a = b = +inf (diff 0); a NaN in either gives NaN
    dead = (a == _NEG_INF) & (b == _NEG_INF)
    larger = jnp.where(dead, jnp.zeros((), a.dtype), 1 / (1 + e))
    smaller = e * larger
    ahead = diff >= 0
    return _logaddexp(a, b), ta * jnp.where(ahead, larger, smaller) + tb * jnp.where(ahead, smaller, larger)


def logaddexp(a: jax.Array, b: Union[jax.Array, float]) -> jax.Array:
    r"""``log(exp(a) + exp(b))`` with a NaN-free gradient when both inputs are -inf.

    .. math:: \operatorname{logaddexp}(a, b) = \log(e^a + e^b), \qquad
              \frac{\partial}{\partial a} = \sigma(a - b)

    ``jnp.logaddexp`` returns -inf for ``a = b = -inf`` but its gradient there is NaN.
    Broadcasts like ``jnp.logaddexp``.

    Singular points:
        * ``a = b = -inf`` (e.g. two masked scores): value -inf, gradient 0 for both.
        * ``a = b = +inf``: value +inf, gradient 1/2 for both (the limit along ``a = b``).
        * ``a = -inf``, ``b`` finite: value ``b``, gradients 0 and 1.

    Example:
        >>> a = jnp.array([-jnp.inf, 0.0])
        >>> nanguard.jax.logaddexp(a, jnp.array([-jnp.inf, 0.0]))   # [-inf, 0.6931472]
        >>> # gradient in a: [0.0, 0.5]
    """
    a = check_floating(a, "a", "logaddexp")
    b = as_floating(b, "b", "logaddexp")
    dtype = a.dtype if isinstance(b, float) else promote(a.dtype, b.dtype)
    b = jnp.asarray(b, dtype) if isinstance(b, float) else b
    broadcast_static(a, b, "logaddexp", ("a", "b"))
    wa, wb = jnp.broadcast_arrays(widen(narrow(a, dtype)), widen(narrow(b, dtype)))
    return narrow(_logaddexp(wa, wb), dtype)


def _shifted_exp(x: jax.Array, axes: Axes):
    """(shift, exp(x - shift), its sum) per slice (keepdims); an all -inf or empty slice shifts by 0."""
    top = jax.lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True, initial=_NEG_INF))
    # an all -inf slice (and +inf, NaN) shifts by 0: exp(-inf) = 0 gives log 0 = -inf
    shift = jnp.where(jnp.isfinite(top), top, jnp.zeros((), x.dtype))
    weights = jnp.exp(x - shift)
    return shift, weights, jnp.sum(weights, axis=axes, keepdims=True)


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _logsumexp(x: jax.Array, axes: Axes) -> jax.Array:
    """log sum exp over ``axes`` (keepdims), -inf for empty or all -inf slices, derivative softmax."""
    shift, _, total = _shifted_exp(x, axes)
    return jnp.log(total) + shift


@_logsumexp.defjvp
def _logsumexp_jvp(axes, primals, tangents):
    (x,), (t,) = primals, tangents
    _, weights, total = _shifted_exp(x, axes)
    # softmax = weights / total; divide_no_nan gives a dead slice (total 0) derivative 0
    prob = divide_no_nan(weights, total)
    return _logsumexp(x, axes), jnp.sum(t * prob, axis=axes, keepdims=True)


def logsumexp(x: jax.Array, axis: Axis = None, keepdims: bool = False, mask: Optional[jax.Array] = None, *,
              where: Optional[jax.Array] = None) -> jax.Array:
    r"""``log(sum(exp(x)))`` over ``axis``, optionally over the kept entries only.

    .. math:: \operatorname{logsumexp}(x) = \log \sum_{i:\,m_i} e^{x_i}, \qquad
              \frac{\partial}{\partial x_i} = m_i\, e^{x_i - \operatorname{logsumexp}(x)}

    ``jax.nn.logsumexp`` returns -inf for a slice that is all -inf (or fully masked with
    ``where=``) but its gradient there is NaN. This op agrees with it everywhere else.

    Singular points:
        * a slice that is all -inf, or all masked out (or empty): value -inf, gradient 0.
        * masked entries (``mask`` False): no gradient (exactly 0), whatever they hold,
          NaN and inf included.

    Args:
        x: floating array.
        axis: axis or axes to reduce (None: all).
        keepdims: keep the reduced axes with size 1.
        mask: optional bool array broadcastable to ``x``; True keeps an entry.
        where: jax.nn's name for ``mask`` (give one of them).

    Example:
        >>> x = jnp.full((2, 3), -jnp.inf)
        >>> nanguard.jax.logsumexp(x, axis=1)     # [-inf, -inf], gradient all 0
    """
    x = check_floating(x, "x", "logsumexp")
    axes = check_axis(x, axis, "logsumexp")
    keepdims = check_bool(keepdims, "keepdims", "logsumexp")
    mask = pick_mask(mask, where, "logsumexp")
    if mask is not None:
        mask = check_mask(mask, x, "logsumexp")
        x = jnp.where(mask, x, jnp.asarray(_NEG_INF, x.dtype))
    if x.ndim == 0:
        axes = None
    out = _logsumexp(widen(x), axes)
    return narrow(keep_axes(out, axes, keepdims), x.dtype)
