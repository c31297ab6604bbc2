"""Numeric gradient checks away from every singular point: ``tf.test.compute_gradient`` in float64.

First derivatives against finite differences, and second derivatives (the gradient of the
summed gradient) against finite differences of the first.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.tf.ops.specs import SPECS, Spec


def _check(fn, xs):
    theoretical, numerical = tf.test.compute_gradient(fn, xs, delta=1e-6)
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_first_derivative_matches_finite_differences(spec: Spec) -> None:
    xs = [tf.constant(a) for a in spec.regular(np.random.default_rng(0))]
    _check(spec.safe, xs)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_second_derivative_matches_finite_differences(spec: Spec) -> None:
    xs = [tf.constant(a) for a in spec.regular(np.random.default_rng(1))]

    def summed_gradient(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = spec.safe(*inputs)
            weights = tf.reshape(tf.cast(tf.range(1, 1 + tf.size(out)), out.dtype), tf.shape(out))
            total = tf.reduce_sum(out * weights)
        grads = tape.gradient(total, inputs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        # a generic function of the first derivatives, so that every second derivative shows
        return tf.add_n([tf.reduce_sum(g * tf.sin(x)) for g, x in zip(grads, inputs)])

    _check(summed_gradient, xs)
