"""Division that cannot produce NaN: ``div`` (divide-no-nan) and ``masked_mean``."""

from __future__ import annotations

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
    compute_dtype,
    pick_mask,
    promote,
)
from nanguard.jax.ops._core import divide_no_nan, keep_axes, narrow, widen


def _div(a: jax.Array, b: jax.Array, fill: float) -> jax.Array:
    # divide_no_nan is a double where: its derivatives at b = 0 are 0 at every order
    quotient = divide_no_nan(a, b)
    if fill == 0:
        return jnp.where(jnp.isnan(a), a, quotient)  # divide_no_nan(NaN, 0) is 0: keep the NaN
    filled = (b == 0) & ~jnp.isnan(a)
    return jnp.where(filled, jnp.asarray(fill, a.dtype), quotient)


def div(a: Union[jax.Array, float], b: Union[jax.Array, float], fill: float = 0.0) -> jax.Array:
    r"""Divide-no-nan: ``a / b`` where ``b != 0`` and ``fill`` where ``b == 0``.

    .. math:: \operatorname{div}(a, b) = \begin{cases} a / b & b \ne 0 \\ \text{fill} & b = 0
              \end{cases}, \qquad \frac{\partial}{\partial a} = \frac{1}{b},\quad
              \frac{\partial}{\partial b} = -\frac{a}{b^2} \quad (b \ne 0)

    The ``jnp.where(b == 0, 0., a / b)`` idiom has the right value but a NaN or inf gradient
    at ``b = 0`` (the discarded branch still divides by zero). A divide-no-nan that returns
    0 for ``0 / 0`` also turns a NaN numerator into 0, hiding it; this one does not.
    Broadcasts like ``jnp.divide``.

    Singular points:
        * ``b = 0`` (either sign of zero): value ``fill`` for every finite or infinite ``a``,
          gradient 0 for ``a`` and ``b`` (the result does not depend on them there).
        * ``a`` NaN: NaN, also where ``b = 0`` (a NaN from the data is never hidden).
        * tiny nonzero ``b``: the exact quotient, which may overflow to inf.

    Dtypes promote as in torch (float16 with float32 gives float32); a Python number takes
    the other operand's dtype (``div(1, x)`` works) and float16/bfloat16 are computed in
    float32, so ``div(x_fp16, 1e5)`` is not ``x / inf``.

    Args:
        a: numerator (floating array, or a number when ``b`` is an array).
        b: denominator, array or number.
        fill: finite number returned where ``b == 0``.

    Example:
        >>> nanguard.jax.div(jnp.array([1.0, 1.0]), jnp.array([2.0, 0.0]))   # [0.5, 0.0]
    """
    a = as_floating(a, "a", "div")
    b = as_floating(b, "b", "div")
    fill = check_number(fill, "fill", "div")
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


def masked_mean(x: jax.Array, mask: Optional[jax.Array] = None, axis: Axis = None, keepdims: bool = False,
                fill: float = 0.0, *, where: Optional[jax.Array] = None) -> jax.Array:
    r"""Mean of the kept entries of ``x`` over ``axis``; an empty slice gives ``fill``.

    .. math:: \operatorname{masked\_mean}(x) = \frac{\sum_i m_i x_i}{\sum_i m_i}, \qquad
              \frac{\partial}{\partial x_i} = \frac{m_i}{\sum_j m_j}

    Mean pooling over padded sequences written as ``jnp.sum(x, 1) / lengths`` is NaN for an
    empty sequence (0/0), so is ``jnp.mean(x, where=mask)`` of an empty row (value and
    gradient), and ``jnp.sum(x * mask)`` is NaN when a padded entry holds NaN.

    Singular points:
        * a slice with no kept entry (empty sequence): value ``fill``, gradient 0.
        * masked entries (``mask`` False): no gradient (exactly 0) and no influence on the
          value, whatever they hold, NaN and inf included.

    Args:
        x: floating array.
        mask: bool array broadcastable to ``x``; True keeps an entry.
        axis: axis or axes to average over, or None for all.
        keepdims: keep reduced axes with size 1.
        fill: finite number returned for empty slices.
        where: ``jnp.mean``'s name for ``mask`` (give one of them).

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
    keepdims = check_bool(keepdims, "keepdims", "masked_mean")
    fill = check_number(fill, "fill", "masked_mean")
    if x.ndim == 0:
        axes = None
    wide = widen(x)
    mask = jnp.broadcast_to(mask, wide.shape)
    # where, not x * mask: a NaN or inf held in a masked entry must not leak (NaN * 0)
    total = jnp.sum(jnp.where(mask, wide, jnp.zeros((), wide.dtype)), axis=axes, keepdims=True)
    count = jnp.sum(mask, axis=axes, keepdims=True, dtype=wide.dtype)
    # divide_no_nan: the empty slice is 0 with gradient 0, at every order
    mean = divide_no_nan(total, count)
    if fill != 0:
        mean = jnp.where(count == 0, jnp.asarray(fill, wide.dtype), mean)
    return narrow(keep_axes(mean, axes, keepdims), x.dtype)
