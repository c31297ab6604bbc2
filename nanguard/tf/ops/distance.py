"""Pairwise Euclidean distances, exact at 0: ``distance_matrix``."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from nanguard.core import op_checks
from nanguard.core.opspec import document
from nanguard.tf._checks import SPELLING, check_floating, promote
from nanguard.tf.ops._core import narrow, widen
from nanguard.tf.ops.norms import l2_norm


@document("distance_matrix", "tf")
def distance_matrix(x: tf.Tensor, y: Optional[tf.Tensor] = None) -> tf.Tensor:
    r"""TensorFlow has no ``cdist``; the usual ``sqrt(|x|² + |y|² - 2 x yᵀ)`` has zeros on the
    diagonal, where the sqrt gradient is inf and training turns NaN after one step, and
    ``tf.norm(x[:, None] - y[None], axis=-1)`` has a NaN gradient there. The subtraction of
    the Gram form also cancels for nearby rows (tiny negative values). This op works from the
    differences themselves (``O(n·m·d)`` memory) with the safe norm.

    Returns:
        ``(..., n, m)`` distances in the promoted dtype of ``x`` and ``y``.

    Example:
        >>> x = tf.constant([[0.0, 0.0], [3.0, 4.0]])
        >>> nanguard.tf.distance_matrix(x)      # [[0.0, 5.0], [5.0, 0.0]]
    """
    x = check_floating(x, "x", "distance_matrix")
    y = x if y is None else check_floating(y, "y", "distance_matrix")
    op_checks.rows_and_features(*(None if t.shape.rank is None else tuple(t.shape.as_list()) for t in (x, y)),
                                "distance_matrix", SPELLING)
    dtype = promote(x.dtype, y.dtype)
    wx, wy = widen(narrow(x, dtype)), widen(narrow(y, dtype))
    differences = tf.expand_dims(wx, -2) - tf.expand_dims(wy, -3)  # (..., n, m, d)
    return narrow(tf.squeeze(l2_norm(differences, (differences.shape.rank - 1,)), -1), dtype)
