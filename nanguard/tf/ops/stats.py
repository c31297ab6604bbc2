"""Spread: ``var`` and ``std`` that stay finite for constant input and tiny slices."""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf

from nanguard.tf._checks import Axis, check_axis, check_bool, check_floating
from nanguard.tf.ops._core import keep_axes, narrow, safe_sqrt, select, widen


def _check_correction(correction: object, ddof: object, op: str) -> float:
    if ddof is not None:
        if correction != 1:
            raise ValueError(f"nanguard.tf.{op}: give `correction` or its numpy name `ddof`, not both")
        correction = ddof
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"nanguard.tf.{op}: `correction` must be a number, got {type(correction).__name__}")
    if not 0 <= correction < float("inf"):
        raise ValueError(f"nanguard.tf.{op}: `correction` must be a finite number >= 0, got {correction}")
    return float(correction)


def _nan_marks(x: tf.Tensor) -> tf.Tensor:
    """0 for every number, NaN for NaN (an inf counts as a number here)."""
    return select(tf.math.is_nan(x), x, tf.zeros_like(x))


def _zero_spread(x: tf.Tensor, axes: Optional[Tuple[int, ...]]) -> tf.Tensor:
    """The spread of slices with no degrees of freedom left: 0 (NaN if the slice holds NaN), gradient 0."""

    @tf.custom_gradient
    def zero_spread(x):
        def grad(upstream):
            return _nan_marks(x)  # NaN in, NaN out; 0 everywhere else

        return tf.reduce_sum(_nan_marks(x), axis=axes, keepdims=True), grad

    return zero_spread(x)


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


def _variance(x: tf.Tensor, axes, correction: float) -> tf.Tensor:
    """Variance over ``axes`` (keepdims); 0 where N - correction <= 0. Polynomial: safe native gradients."""
    n = _count(x, axes)
    if isinstance(n, int) and n - correction <= 0:
        return _zero_spread(x, axes)
    centred = x - tf.reduce_mean(x, axis=axes, keepdims=True)
    # centre twice: the first mean's rounding error would otherwise show in nearly constant slices
    centred = centred - tf.reduce_mean(centred, axis=axes, keepdims=True)
    squares = tf.reduce_sum(tf.square(centred), axis=axes, keepdims=True)
    if isinstance(n, int):
        return squares / (n - correction)
    dof = tf.cast(n, x.dtype) - correction
    return select(dof > 0, squares / tf.maximum(dof, 1), _zero_spread(x, axes))


def _prepare(x, axis, correction, ddof, keepdims, op):
    x = check_floating(x, "x", op)
    axes = check_axis(x, axis, op)
    keepdims = check_bool(keepdims, "keepdims", op)
    if x.shape.rank == 0:
        axes = None
    return x, axes, _check_correction(correction, ddof, op), keepdims


def var(x: tf.Tensor, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> tf.Tensor:
    r"""Variance over ``axis`` with ``correction`` (Bessel's by default), finite for small slices.

    .. math:: \operatorname{var}(x) = \frac{1}{N - c} \sum_i (x_i - \bar x)^2,
              \qquad \frac{\partial}{\partial x_i} = \frac{2 (x_i - \bar x)}{N - c}

    ``tf.math.reduce_variance`` has no correction (it is ``correction=0``); ``torch.var``'s
    default ``correction=1`` is NaN for one element. ``ddof`` is numpy's name for
    ``correction``.

    Singular points:
        * ``N - correction <= 0`` (one element with Bessel's correction, or empty): value 0,
          gradient 0 (no spread can be measured, and none is reported); NaN if the slice
          holds NaN.
        * constant input: value 0, gradient 0 (exact).

    Example:
        >>> nanguard.tf.var(tf.constant([3.0]))        # 0.0, gradient [0.0]
        >>> nanguard.tf.var(tf.constant([1.0, 3.0]))   # 2.0, gradient [-2.0, 2.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "var")
    return narrow(keep_axes(_variance(widen(x), axes, correction), axes, keepdims), x.dtype)


def std(x: tf.Tensor, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> tf.Tensor:
    r"""Standard deviation over ``axis``, finite in value and gradient for constant input.

    .. math:: \operatorname{std}(x) = \sqrt{\operatorname{var}(x)}, \qquad
              \frac{\partial}{\partial x_i} = \frac{x_i - \bar x}{(N - c)\,\operatorname{std}(x)}

    ``tf.math.reduce_std`` of a constant or one-element slice has a NaN gradient
    (``sqrt``'s at 0).

    Singular points:
        * constant slice (std = 0): value 0, gradient 0 (minimum-norm subgradient, as for
          :func:`sqrt` at 0), second derivative finite.
        * ``N - correction <= 0``: value 0, gradient 0 (see :func:`var`).

    Example:
        >>> nanguard.tf.std(tf.ones([4]))      # 0.0, gradient [0.0, 0.0, 0.0, 0.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "std")
    spread = safe_sqrt(_variance(widen(x), axes, correction))
    return narrow(keep_axes(spread, axes, keepdims), x.dtype)
