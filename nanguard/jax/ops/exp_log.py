"""Exponentials and logarithms: ``softplus``, ``logaddexp``, ``logsumexp``."""

from __future__ import annotations

from functools import partial
from typing import Optional, Union

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.core.softplus_parts import BetaParts, beta_parts, product_is_exact, product_low
from nanguard.jax._checks import (
    as_floating, Axis, broadcast_static, check_axis, check_floating, check_mask, pick_mask, promote, setting,
)
from nanguard.jax.ops._core import Axes, divide_no_nan, keep_axes, narrow, widen

_NEG_INF = float("-inf")


@document("softplus", "jax")
def softplus(x: jax.Array, beta: float = 1.0) -> jax.Array:
    r"""The textbook ``jnp.log1p(jnp.exp(x))`` overflows to inf for ``x > 88`` (float32)
    or ``x > 11`` (float16), and masking the inf with ``jnp.where`` still leaves a NaN
    *gradient* (``0 * inf``). ``jax.nn.softplus`` is finite, but its gradient is 27
    float64 ulps off (``logaddexp``'s), and ``jax.nn.softplus(beta * x) / beta``
    overflows where ``beta * x`` does (inf at ``x = 1e38, beta = 7``, where softplus is
    x) and turns the rounding of ``beta * x`` into up to ``|beta * x| / 2`` ulps (91 in
    float32 at ``beta = 0.3``, 391 in float64). The method (``beta * x`` split exactly,
    the tail through ``exp(t - log beta)``) is :mod:`nanguard.core.softplus_parts`'s:
    value and gradient ``sigmoid(beta * x)`` within 4 ulps for every beta, as
    ``nanguard.torch``. float16/bfloat16 are computed in float32.

    Example:
        >>> x = jnp.array([0.0, 1.0, 100.0])
        >>> nanguard.jax.softplus(x)
        Array([  0.6931472,   1.3132616, 100.       ], dtype=float32)
        >>> # gradient: [0.5, 0.7310586, 1.0]
    """
    x = check_floating(x, "x", "softplus")
    beta = setting(beta, "beta", "softplus")
    wide = widen(x)
    return narrow(_softplus(wide, beta_parts(beta, wide.dtype.name), product_is_exact(beta)), x.dtype)


def _softplus_and_gradient(x: jax.Array, p: BetaParts, exact: bool):
    """(softplus(x, beta), sigmoid(beta x)) with the constants ``p`` of beta; ``exact``: beta x
    is exact (a power of two >= 1): no product correction, no tail. The branches are those of
    :mod:`nanguard.core.softplus_parts`.
    """
    dtype = x.dtype
    t = x if p.b == 1.0 else x * jnp.asarray(p.b, dtype)
    if exact:  # t = ±inf needs no care: e = 0, value ±inf or 0 (then x), s = 1 or 0
        t_safe = t
    else:
        infinite = jnp.isinf(t)
        # -inf (x = -inf, or b x beyond the largest float) to a t whose tail value is 0
        t_safe = jnp.where(infinite, jnp.where(t > 0, 0, -1e4).astype(dtype), t)
    e = jnp.exp(-jnp.abs(t_safe))
    one_plus = 1 + e
    positive = t_safe >= 0
    s = jnp.where(positive, jnp.ones((), dtype), e) / one_plus
    value = jnp.maximum(t_safe, 0) + jnp.log1p(e)
    if exact:
        grad = s
        if p.b != 1.0:
            value = value / p.b
    else:
        lo = jax.lax.stop_gradient(jnp.where(infinite, jnp.zeros((), dtype), _product_error(x, p)))
        complement = jnp.where(positive, e, jnp.ones((), dtype)) / one_plus
        value = (value + lo * s) / p.b
        value = value - value * p.inverse_rest  # / beta, not / b
        grad = s + lo * s * complement
        # the tail: t capped where it is not taken (exp(t) would overflow)
        in_tail = t_safe < p.tail
        t_tail = jnp.where(in_tail, t_safe, jnp.asarray(p.tail, dtype))
        exponent = t_tail - p.log_hi
        back = exponent - t_tail
        sum_error = (t_tail - (exponent - back)) + (-p.log_hi - back)
        tail_value = jnp.exp(exponent) * (1 + (sum_error + lo - p.log_lo))
        value = jnp.where(in_tail, tail_value, value)
        grad = jnp.where(in_tail, jnp.exp(t_tail) * (1 + lo), grad)
    if p.b == 1.0:  # t + log1p(e) rounds to t beyond HUGE by itself
        return value, grad
    beyond = t > p.huge
    return jnp.where(beyond, x, value), jnp.where(beyond, jnp.ones((), dtype), grad)


def _product_error(x: jax.Array, p: BetaParts) -> jax.Array:
    """b x - fl(b x) exactly (Dekker's two-product) plus (beta - b) x.

    x beyond the largest float / (4 · splitter) is split scaled by 2**-64 (exact), so that
    x · splitter cannot overflow; where b x itself overflows the result is not used."""
    scale = jnp.where(jnp.abs(x) > p.big, jnp.asarray(2.0**-64, x.dtype), jnp.asarray(1.0, x.dtype))
    return product_low(x * scale, p) / scale + x * p.b_rest


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _softplus(x: jax.Array, p: BetaParts, exact: bool) -> jax.Array:
    return _softplus_and_gradient(x, p, exact)[0]


@_softplus.defjvp
def _softplus_jvp(p, exact, primals, tangents):
    """d/dx = sigmoid(beta x), from the same pieces as the value; its own native derivative
    is the second one."""
    (x,), (t,) = primals, tangents
    value, grad = _softplus_and_gradient(x, p, exact)
    return value, t * grad


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


@document("logaddexp", "jax")
def logaddexp(a: jax.Array, b: Union[jax.Array, float]) -> jax.Array:
    r"""``jnp.logaddexp`` returns -inf for ``a = b = -inf`` but its gradient there is NaN.
    Broadcasts like ``jnp.logaddexp``.

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


@document("logsumexp", "jax")
def logsumexp(x: jax.Array, axis: Axis = None, keepdims: bool = False, mask: Optional[jax.Array] = None, *,
              where: Optional[jax.Array] = None) -> jax.Array:
    r"""``jax.nn.logsumexp`` returns -inf for a slice that is all -inf (or fully masked with
    ``where=``) but its gradient there is NaN. This op agrees with it everywhere else.

    Example:
        >>> x = jnp.full((2, 3), -jnp.inf)
        >>> nanguard.jax.logsumexp(x, axis=1)     # [-inf, -inf], gradient all 0
    """
    x = check_floating(x, "x", "logsumexp")
    axes = check_axis(x, axis, "logsumexp")
    keepdims = setting(keepdims, "keepdims", "logsumexp")
    mask = pick_mask(mask, where, "logsumexp")
    if mask is not None:
        mask = check_mask(mask, x, "logsumexp")
        x = jnp.where(mask, x, jnp.asarray(_NEG_INF, x.dtype))
    if x.ndim == 0:
        axes = None
    out = _logsumexp(widen(x), axes)
    return narrow(keep_axes(out, axes, keepdims), x.dtype)
