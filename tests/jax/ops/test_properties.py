"""Hypothesis: each safe op equals its textbook formula wherever the textbook op is finite (float64).

Inputs are drawn within each spec's ``domain``: bounded magnitudes (and norms kept away from
0), so that the reference computation itself cannot overflow or underflow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.jax.ops.specs import SPECS, Spec


def _values(bounds):
    low, high = bounds if bounds is not None else (-1e3, 1e3)
    return st.floats(low, high, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def _inputs(draw, spec: Spec):
    return [draw(arrays(np.float64, shape, elements=_values(bounds)))
            for shape, bounds in zip(spec.shapes, spec.domain or [None] * len(spec.shapes))]


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_safe_op_equals_textbook_where_textbook_is_finite(spec: Spec, x64) -> None:
    argnums = tuple(range(len(spec.shapes)))
    safe_grad = jax.jit(jax.grad(lambda *xs: jnp.sum(spec.safe(*xs)), argnums))
    textbook_grad = jax.jit(jax.grad(lambda *xs: jnp.sum(spec.textbook(*xs)), argnums))
    safe_value, textbook_value = jax.jit(spec.safe), jax.jit(spec.textbook)

    @given(_inputs(spec))
    def check(arrays_):
        xs = [jnp.asarray(a) for a in arrays_]
        want = np.asarray(textbook_value(*xs))
        finite = np.isfinite(want)
        np.testing.assert_allclose(np.asarray(safe_value(*xs))[finite], want[finite], rtol=1e-9, atol=1e-9)
        if not np.all(finite):
            return
        for got, expected in zip(safe_grad(*xs), textbook_grad(*xs)):
            expected = np.asarray(expected)
            if not np.all(np.isfinite(expected)):
                continue
            # entries that cancel to 0 carry rounding errors of the size of the largest entry
            scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
            np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-7, atol=1e-7 * scale)

    check()
