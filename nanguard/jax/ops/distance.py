"""Pairwise Euclidean distances, exact at 0: ``distance_matrix``."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from nanguard.core import op_checks
from nanguard.core.opspec import document
from nanguard.jax._checks import SPELLING, check_floating, promote
from nanguard.jax.ops._core import divide_no_nan, narrow, widen
from nanguard.jax.ops.norms import norm_value


def _differences(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.expand_dims(x, -2) - jnp.expand_dims(y, -3)  # (..., n, m, d)


def _may_be_close(x: jax.Array, y: jax.Array) -> jax.Array:
    """Whether two rows may differ by less than sqrt(smallest normal) without being equal
    (their squared differences underflow, or are flushed to 0): only where some entry is
    nonzero and below 4 sqrt(tiny) / eps (2**-38 in float32, 2**-457 in float64), since a
    nonzero difference of larger floats, or of one and 0, is at least an ulp of that bound,
    whose square (2**-122 in float32) is normal.
    O((n + m) d): rows of ordinary data never take the second pass."""
    info = jnp.finfo(x.dtype)
    threshold = 4 * float(info.tiny) ** 0.5 / float(info.eps)

    def tiny(t):
        return jnp.any((t != 0) & (jnp.abs(t) < threshold))

    return tiny(x) | tiny(y)


@jax.custom_jvp
def _distances(x: jax.Array, y: jax.Array) -> jax.Array:
    """|x_i - y_j| (..., n, m), exact over the whole range; the differences stay fused into the reduction."""
    return jnp.squeeze(norm_value(_differences, (x, y), (max(x.ndim, y.ndim),), may_hide=_may_be_close), -1)


@_distances.defjvp
def _distances_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    distances = _distances(x, y)
    # d D_ij = (x_i - y_j)·(tx_i - ty_j) / D_ij, and 0 where D_ij = 0 (identical rows)
    direction = divide_no_nan(_differences(x, y), distances[..., None])
    return distances, jnp.sum(direction * _differences(tx, ty), axis=-1)


@document("distance_matrix", "jax")
def distance_matrix(x: jax.Array, y: Optional[jax.Array] = None) -> jax.Array:
    r"""The usual ``sqrt(|x|² + |y|² - 2 x yᵀ)`` has zeros on the diagonal, where the sqrt
    gradient is inf and training turns NaN after one step, and
    ``jnp.linalg.norm(x[:, None] - y[None], axis=-1)`` has a NaN gradient there. The
    subtraction of the Gram form also cancels for nearby rows (tiny negative values). This
    op works from the differences themselves (``O(n·m·d)`` memory) with the safe norm.

    Rows closer than sqrt(smallest normal float) (~1e-19 in float32), whose squared
    differences underflow, are exact, as huge distances are (a second pass, taken only when
    some entry is nonzero and below 2**-38 in float32). Where XLA flushes subnormals (CPU),
    entries below the smallest normal float read as 0.

    Returns:
        ``(..., n, m)`` distances in the promoted dtype of ``x`` and ``y``.

    Example:
        >>> x = jnp.array([[0.0, 0.0], [3.0, 4.0]])
        >>> nanguard.jax.distance_matrix(x)      # [[0.0, 5.0], [5.0, 0.0]]
    """
    x = check_floating(x, "x", "distance_matrix")
    y = x if y is None else check_floating(y, "y", "distance_matrix")
    op_checks.rows_and_features(tuple(x.shape), tuple(y.shape), "distance_matrix", SPELLING)
    dtype = promote(x.dtype, y.dtype)
    wx, wy = widen(narrow(x, dtype)), widen(narrow(y, dtype))
    return narrow(_distances(wx, wy), dtype)
