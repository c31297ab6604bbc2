"""Hypothesis: each safe op equals its textbook formula wherever the textbook op is finite (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.tf.ops.specs import SPECS, Spec


def _values(bounds):
    low, high = bounds if bounds is not None else (-1e3, 1e3)
    # magnitudes below 1e-6 become 0: there a scale-free op's gradient amplifies rounding by
    # 1/|x| (cosine_similarity of parallel vectors of length 1e-27: 1e-16 relative error, but
    # 7e10 absolute against the textbook's exact 0), beyond this comparison's tolerance
    return st.floats(low, high, allow_nan=False, allow_infinity=False, width=64).map(
        lambda v: v if abs(v) >= 1e-6 else 0.0)


@st.composite
def _inputs(draw, spec: Spec):
    return [draw(arrays(np.float64, shape, elements=_values(bounds)))
            for shape, bounds in zip(spec.shapes, spec.domain or [None] * len(spec.shapes))]


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_safe_op_equals_textbook_where_textbook_is_finite(spec: Spec) -> None:
    @given(_inputs(spec))
    def check(arrays_):
        xs = [tf.constant(a) for a in arrays_]
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(xs)
            safe = spec.safe(*xs)
            textbook = spec.textbook(*xs)
            safe_total, textbook_total = tf.reduce_sum(safe), tf.reduce_sum(textbook)
        want = textbook.numpy()
        finite = np.isfinite(want)
        np.testing.assert_allclose(safe.numpy()[finite], want[finite], rtol=1e-9, atol=1e-9)
        if not np.all(finite):
            return
        for x, got_grad, want_grad in zip(xs, tape.gradient(safe_total, xs), tape.gradient(textbook_total, xs)):
            if want_grad is None or not np.all(np.isfinite(want_grad.numpy())):
                continue
            want = want_grad.numpy()
            # entries that cancel to 0 carry rounding errors of the size of the largest entry
            scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
            np.testing.assert_allclose(got_grad.numpy(), want, rtol=1e-7, atol=1e-7 * scale)

    check()
