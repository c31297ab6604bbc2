"""Spread: ``var`` and ``std`` that stay finite for constant input and tiny slices."""

from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp

from nanguard.jax._checks import Axis, check_axis, check_bool, check_floating
from nanguard.jax.ops._core import Axes, keep_axes, narrow, safe_sqrt, widen, zero_spread


def _check_correction(correction: object, ddof: object, op: str) -> float:
    if ddof is not None:
        if correction != 1:
            raise ValueError(f"nanguard.jax.{op}: give `correction` or its numpy name `ddof`, not both")
        correction = ddof
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"nanguard.jax.{op}: `correction` must be a number, got {type(correction).__name__}")
    if not 0 <= correction < float("inf"):
        raise ValueError(f"nanguard.jax.{op}: `correction` must be a finite number >= 0, got {correction}")
    return float(correction)


def _variance(x: jax.Array, axes: Axes, correction: float) -> jax.Array:
    """Variance over ``axes`` (keepdims); 0 where N - correction <= 0. Polynomial: safe native derivatives."""
    n = math.prod(x.shape) if axes is None else math.prod(x.shape[a] for a in axes)
    if n - correction <= 0:
        return zero_spread(x, axes)
    # centred once, as jnp.var: the same rounding, and one pass less than centring twice
    centred = x - jnp.mean(x, axis=axes, keepdims=True)
    return jnp.sum(jnp.square(centred), axis=axes, keepdims=True) / (n - correction)


def _prepare(x, axis, correction, ddof, keepdims, op):
    x = check_floating(x, "x", op)
    axes = check_axis(x, axis, op)
    keepdims = check_bool(keepdims, "keepdims", op)
    if x.ndim == 0:
        axes = None
    return x, axes, _check_correction(correction, ddof, op), keepdims


def var(x: jax.Array, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> jax.Array:
    r"""Variance over ``axis`` with ``correction`` (Bessel's by default), finite for small slices.

    .. math:: \operatorname{var}(x) = \frac{1}{N - c} \sum_i (x_i - \bar x)^2,
              \qquad \frac{\partial}{\partial x_i} = \frac{2 (x_i - \bar x)}{N - c}

    ``jnp.var`` has ``ddof=0`` by default (torch's ``correction=1`` is the default here) and
    ``jnp.var(x, ddof=1)`` of one element is NaN (0/0) in value and gradient. ``ddof`` is
    numpy's name for ``correction``.

    Singular points:
        * ``N - correction <= 0`` (one element with Bessel's correction, or empty): value 0,
          gradient 0 (no spread can be measured, and none is reported); NaN if the slice
          holds NaN.
        * constant input: value 0, gradient 0 (exact).

    Example:
        >>> nanguard.jax.var(jnp.array([3.0]))        # 0.0, gradient [0.0]
        >>> nanguard.jax.var(jnp.array([1.0, 3.0]))   # 2.0, gradient [-2.0, 2.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "var")
    return narrow(keep_axes(_variance(widen(x), axes, correction), axes, keepdims), x.dtype)


def std(x: jax.Array, axis: Axis = None, correction: float = 1, keepdims: bool = False,
        ddof: Optional[float] = None) -> jax.Array:
    r"""Standard deviation over ``axis``, finite in value and gradient for constant input.

    .. math:: \operatorname{std}(x) = \sqrt{\operatorname{var}(x)}, \qquad
              \frac{\partial}{\partial x_i} = \frac{x_i - \bar x}{(N - c)\,\operatorname{std}(x)}

    ``jnp.std`` of a constant slice has a NaN gradient (``sqrt``'s at 0), and
    ``jnp.std(x, ddof=1)`` of one element is NaN.

    Singular points:
        * constant slice (std = 0): value 0, gradient 0 (minimum-norm subgradient, as for
          :func:`sqrt` at 0), second derivative finite.
        * ``N - correction <= 0``: value 0, gradient 0 (see :func:`var`).

    Example:
        >>> nanguard.jax.std(jnp.ones(4))      # 0.0, gradient [0.0, 0.0, 0.0, 0.0]
    """
    x, axes, correction, keepdims = _prepare(x, axis, correction, ddof, keepdims, "std")
    spread = safe_sqrt(_variance(widen(x), axes, correction))
    return narrow(keep_axes(spread, axes, keepdims), x.dtype)
