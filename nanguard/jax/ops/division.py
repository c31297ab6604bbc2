"""Division that cannot produce NaN: ``div`` (divide-no-nan) and ``masked_mean``."""

from __future__ import annotations

from functools import partial
from typing import Optional, Union

import jax
import jax.numpy as jnp

from nanguard.core.opspec import document
from nanguard.jax._checks import (
    as_floating, Axis, broadcast_static, check_axis, check_floating, check_mask, compute_dtype, pick_mask,
    promote, setting,
)
from nanguard.jax.ops._core import divide_no_nan, keep_axes, narrow, widen


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _div(a: jax.Array, b: jax.Array, fill: float) -> jax.Array:
    quotient = divide_no_nan(a, b)
    if fill != 0:
        quotient = jnp.where(b == 0, jnp.asarray(fill, a.dtype), quotient)
    # divide_no_nan(NaN, 0) is 0, and the fill would replace it too: keep the NaN
    return jnp.where(jnp.isnan(a), a, quotient)


@_div.defjvp
def _div_jvp(fill, primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    out = _div(a, b, fill)
    # d/da = 1/b, d/db = -(a/b)/b: 0 where b = 0 (the result does not depend on them), NaN at
    # a NaN quotient (NaN in, NaN out: 1/b does not read a; (a/b)/b is NaN by itself). Both
    # are quotients by b again, never a·b⁻² (JAX's own: 0·inf = NaN at a = 0, b = 1e-20).
    regular = _over(ta, b) - tb * _over(out, b)
    return out, jnp.where(jnp.isnan(out), (ta + tb) * out, regular)


@jax.custom_jvp
def _over(u: jax.Array, b: jax.Array) -> jax.Array:
    """u / b, 0 where b = 0; its derivatives are quotients by b again (at every order)."""
    zero = b == 0
    return jnp.where(zero, jnp.zeros((), u.dtype), u / jnp.where(zero, jnp.ones((), b.dtype), b))


@_over.defjvp
def _over_jvp(primals, tangents):
    (u, b), (tu, tb) = primals, tangents
    q = _over(u, b)
    return q, _over(tu, b) - tb * _over(q, b)


@document("div", "jax")
def div(a: Union[jax.Array, float], b: Union[jax.Array, float], fill: float = 0.0) -> jax.Array:
    r"""The ``jnp.where(b == 0, 0., a / b)`` idiom has the right value but a NaN or inf gradient
    at ``b = 0`` (the discarded branch still divides by zero). A divide-no-nan that returns
    0 for ``0 / 0`` also turns a NaN numerator into 0, hiding it; this one does not.
    Broadcasts like ``jnp.divide``.

    The derivatives never square ``b`` (``div(0, 1e-20)`` has ∂b = 0, not 0·inf). A
    subnormal ``b`` counts as 0 where XLA flushes subnormals (on CPU): ``div(1e-30, 1e-40)``
    is ``fill`` there.

    Dtypes promote as in torch (float16 with float32 gives float32); a Python number takes
    the other operand's dtype (``div(1, x)`` works) and float16/bfloat16 are computed in
    float32, so ``div(x_fp16, 1e5)`` is not ``x / inf``.

    Example:
        >>> nanguard.jax.div(jnp.array([1.0, 1.0]), jnp.array([2.0, 0.0]))   # [0.5, 0.0]
    """
    a = as_floating(a, "a", "div")
    b = as_floating(b, "b", "div")
    fill = setting(fill, "fill", "div")
    if isinstance(a, float) and isinstance(b, float):
        raise TypeError("nanguard.jax.div: at least one of `a` and `b` must be an array, got two numbers")
    if isinstance(b, float):
        dtype = a.dtype
        b = jnp.asarray(b, compute_dtype(dtype))
    elif isinstance(a, float):
        dtype = b.dtype
        a = jnp.asarray(a, compute_dtype(dtype))
    else:
        dtype = promote(a.dtype, b.dtype)
        broadcast_static(a, b, "div", ("a", "b"))
    wa, wb = jnp.broadcast_arrays(widen(narrow(a, compute_dtype(dtype))), widen(narrow(b, compute_dtype(dtype))))
    return narrow(_div(wa, wb, fill), dtype)


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _masked_mean(x: jax.Array, mask: jax.Array, axes) -> jax.Array:
    """Mean of the kept entries over ``axes`` (keepdims), 0 for an empty slice."""
    # where, not x * mask: a NaN or inf held in a masked entry must not leak (NaN * 0)
    total = jnp.sum(jnp.where(mask, x, jnp.zeros((), x.dtype)), axis=axes, keepdims=True)
    return divide_no_nan(total, jnp.sum(mask, axis=axes, keepdims=True, dtype=x.dtype))


@_masked_mean.defjvp
def _masked_mean_jvp(axes, primals, tangents):
    (x, mask), (t, _) = primals, tangents
    # d/dx_i = m_i / count: 0 for masked entries and empty slices; NaN for a kept NaN, whose
    # own derivative does not read it otherwise (NaN in, NaN out). A constant coefficient:
    # every further derivative is 0.
    share = divide_no_nan(jnp.ones((), x.dtype), jnp.sum(mask, axis=axes, keepdims=True, dtype=x.dtype))
    local = jnp.where(mask, jnp.where(jnp.isnan(x), x, share), jnp.zeros((), x.dtype))
    return _masked_mean(x, mask, axes), jnp.sum(t * local, axis=axes, keepdims=True)


@document("masked_mean", "jax")
def masked_mean(x: jax.Array, mask: Optional[jax.Array] = None, axis: Axis = None, keepdims: bool = False,
                fill: float = 0.0, *, where: Optional[jax.Array] = None) -> jax.Array:
    r"""Mean pooling over padded sequences written as ``jnp.sum(x, 1) / lengths`` is NaN for an
    empty sequence (0/0), so is ``jnp.mean(x, where=mask)`` of an empty row (value and
    gradient), and ``jnp.sum(x * mask)`` is NaN when a padded entry holds NaN.

    Example:
        >>> x = jnp.array([[1.0, 3.0, jnp.nan], [5.0, 7.0, 9.0]])
        >>> keep = jnp.array([[True, True, False], [False, False, False]])
        >>> nanguard.jax.masked_mean(x, keep, axis=1)      # [2.0, 0.0]
    """
    x = check_floating(x, "x", "masked_mean")
    mask = pick_mask(mask, where, "masked_mean")
    if mask is None:
        raise TypeError("nanguard.jax.masked_mean: `mask` (or `where`) is required: a bool array, True = keep")
    mask = check_mask(mask, x, "masked_mean")
    axes = check_axis(x, axis, "masked_mean")
    keepdims = setting(keepdims, "keepdims", "masked_mean")
    fill = setting(fill, "fill", "masked_mean")
    if x.ndim == 0:
        axes = None
    wide = widen(x)
    mask = jnp.broadcast_to(mask, wide.shape)
    mean = _masked_mean(wide, mask, axes)
    if fill != 0:
        count = jnp.sum(mask, axis=axes, keepdims=True, dtype=wide.dtype)
        mean = jnp.where(count == 0, jnp.asarray(fill, wide.dtype), mean)
    return narrow(keep_axes(mean, axes, keepdims), x.dtype)
