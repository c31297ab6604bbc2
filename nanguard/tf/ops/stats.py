"""Spread: ``var`` and ``std`` that stay finite for constant input and tiny slices."""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf

from nanguard.core.opspec import document
from nanguard.tf._checks import CHECKS, Axis, check_axis, setting, check_floating
from nanguard.tf.ops._core import keep_axes, nan_marks, narrow, pow2_scale, safe_range, select, widen, zero_spread


def _count(x: tf.Tensor, axes: Optional[Tuple[int, ...]]):
    """Elements per slice: a Python int when the shape is static, else a scalar tensor."""
    dims = x.shape.as_list() if x.shape.rank else []
    picked = dims if axes is None else [dims[a] for a in axes]
    if all(d is not None for d in picked):
        n = 1
        for d in picked:
            n *= d
        return n
    shape = tf.shape(x)
    sizes = shape if axes is None else tf.gather(shape, list(axes))
    return tf.reduce_prod(sizes)


def _centred(x: tf.Tensor, axes) -> tf.Tensor:
    """x minus its mean, centred twice: the first mean's rounding error would otherwise show
    in nearly constant slices. The mean is a sum of x / N, which cannot overflow where
    sum(x) does (3e38 + 3e38)."""
    n = _count(x, axes)
    inverse = 1 / n if isinstance(n, int) else 1 / tf.cast(n, x.dtype)
    centred = x - tf.reduce_sum(x * inverse, axis=axes, keepdims=True)
    return centred - tf.reduce_mean(centred, axis=axes, keepdims=True)


def _dof(x: tf.Tensor, axes, correction: float):
    n = _count(x, axes)
    return n - correction if isinstance(n, int) else tf.cast(n, x.dtype) - correction


def _variance(x: tf.Tensor, axes, correction: float) -> tf.Tensor:
    """Variance over ``axes`` (keepdims); 0 where N - correction <= 0."""
    dof = _dof(x, axes, correction)
    squares = tf.reduce_sum(tf.square(_centred(x, axes)), axis=axes, keepdims=True)
    if isinstance(dof, float):
        return squares / dof
    return select(dof > 0, squares / tf.maximum(dof, 1), tf.reduce_sum(nan_marks(x), axis=axes, keepdims=True))


def _spread_value(x: tf.Tensor, axes, correction: float, root: bool):
    """(variance or its square root over ``axes`` (keepdims), whether it took the rescue).

    The mean of float32 entries near 3e38 overflows (NaN variance, where the std is 1.5e38),
    and the squares of entries below ~1e-19 underflow (std 0 for [1e-30, 2e-30, 3e-30]):
    slices whose result is not finite, or whose std is below the safe range (constant slices
    too: 0 does not tell them from an underflow) make the whole tensor be recomputed on inputs
    divided by a power of two per slice (exact), at run time in a ``tf.cond``.
    """
    fast = _variance(x, axes, correction)
    out = tf.sqrt(fast) if root else fast
    if root:
        suspect = tf.logical_or(tf.logical_not(tf.math.is_finite(out)), out < safe_range(x.dtype)[0])
    else:  # a variance beyond the largest float, or below the smallest, is that; only NaN is suspect
        suspect = tf.logical_not(tf.math.is_finite(out))
    rescue = tf.reduce_any(suspect)

    def rescued():
        scale = pow2_scale(x, axes)
        again = _variance(x / scale, axes, correction)
        return scale * tf.sqrt(again) if root else again * scale * scale

    return tf.cond(rescue, rescued, lambda: out), rescue


def _coefficient(x: tf.Tensor, axes, correction: float, root: bool, scale=None) -> tf.Tensor:
    """d var / dx = 2 (x - mean) / (N - c), or d std / dx = (x - mean) / ((N - c) std) with 0
    where std = 0 (a constant slice), from native ops on x alone (on x / scale, a power of
    two per slice, when given)."""
    dof = _dof(x, axes, correction)
    centred = _centred(x if scale is None else x / scale, axes)
    if root:
        # the std from the same centred values (a double-where root)
        squares = tf.reduce_sum(tf.square(centred), axis=axes, keepdims=True)
        variance = squares / (dof if isinstance(dof, float) else tf.maximum(dof, 1))
        positive = tf.not_equal(variance, 0)  # NaN counts: its gradient is NaN, not 0
        s = tf.sqrt(tf.where(positive, variance, tf.ones_like(variance)))
        local = tf.where(positive, centred / (s * dof), tf.zeros_like(centred))
    else:
        local = centred * (2 / dof) if scale is None else centred * (2 / dof) * scale
    if not isinstance(dof, float):
        local = select(tf.broadcast_to(dof > 0, tf.shape(local)), local, nan_marks(x))
    return local


def _spread(x: tf.Tensor, axes, correction: float, root: bool) -> tf.Tensor:
    """:func:`_spread_value` with the derivative written out (:func:`_coefficient`), at every
    order finite.

    Where the value took the rescue, the coefficient is taken on inputs divided by a power of
    two per slice (a constant: exact), so that neither x - mean nor std overflows or
    underflows. The gradient reads nothing of the forward pass but that decision (an outer
    tape would differentiate what it reads natively, through the rescue's ``tf.cond`` and its
    branch not taken): its own native derivative is the second one.
    """
    if isinstance(_count(x, axes), int) and _count(x, axes) - correction <= 0:
        return zero_spread(x, axes)  # no degrees of freedom: 0, gradient 0 (NaN for NaN)

    @tf.custom_gradient
    def spread(x):
        out, rescue = _spread_value(x, axes, correction, root)

        def grad(upstream):
            local = tf.cond(rescue, lambda: _coefficient(x, axes, correction, root, pow2_scale(x, axes)),
                            lambda: _coefficient(x, axes, correction, root))
            return upstream * local

        return out, grad

    return spread(x)


def _prepare(x, axis, correction, ddof, keepdims, op):
    x = check_floating(x, "x", op)
    axes = check_axis(x, axis, op)
    keepdims = setting(keepdims, "keepdims", op)
    if x.shape.rank == 0:
        axes = None
    return x, axes, CHECKS.correction(correction, ddof, op), keepdims


@document("var", "tf")
def var(x: tf.Tensor, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> tf.Tensor:
    r"""``tf.math.reduce_variance`` has no correction (it is ``correction=0``); ``torch.var``'s
    default ``correction=1`` is NaN for one element. ``ddof`` is numpy's name for
    ``correction``.

    Example:
        >>> nanguard.tf.var(tf.constant([3.0]))        # 0.0, gradient [0.0]
        >>> nanguard.tf.var(tf.constant([1.0, 3.0]))   # 2.0, gradient [-2.0, 2.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "var")
    return narrow(keep_axes(_spread(widen(x), axes, correction, root=False), axes, keepdims), x.dtype)


@document("std", "tf")
def std(x: tf.Tensor, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> tf.Tensor:
    r"""``tf.math.reduce_std`` of a constant or one-element slice has a NaN gradient
    (``sqrt``'s at 0), and is NaN for float32 slices whose sum overflows (entries near
    3e38) and 0 for slices whose squares underflow (below ~1e-19); this op is exact there.

    Example:
        >>> nanguard.tf.std(tf.ones([4]))      # 0.0, gradient [0.0, 0.0, 0.0, 0.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "std")
    return narrow(keep_axes(_spread(widen(x), axes, correction, root=True), axes, keepdims), x.dtype)
