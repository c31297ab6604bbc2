"""nanguard.tf under TensorFlow's transformations and in Keras 3: tf.function, XLA, vectorized_map,
jacobian, nested tapes, and layers/losses inside ``model.fit``."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import nanguard.tf as ng
from tests.tf.ops.specs import SPECS, Spec

IDS = [s.name for s in SPECS]


def _singular(spec: Spec):
    """The regular inputs with singular points planted: zeros (zero vectors, 0·log 0) and ±1."""
    inputs = [a.copy() for a in spec.regular(np.random.default_rng(0))]
    first = inputs[0]
    if spec.name in ("acos", "asin"):
        first[0, :2] = [1.0, -1.0]
    elif spec.name == "distance_matrix":
        first[0] = inputs[1][0]  # a distance of exactly 0
    else:
        first[0] = 0.0
    return [tf.constant(a) for a in inputs]


def _jacobians(spec: Spec, xs, pfor: bool):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xs)
        out = spec.safe(*xs)
    return [tape.jacobian(out, x, experimental_use_pfor=pfor) for x in xs]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jacobian_with_pfor_equals_the_loop_and_is_finite(spec: Spec) -> None:
    xs = _singular(spec)
    for fast, slow in zip(_jacobians(spec, xs, True), _jacobians(spec, xs, False)):
        assert np.all(np.isfinite(fast.numpy()))
        np.testing.assert_allclose(fast.numpy(), slow.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vectorized_map_equals_a_python_loop(spec: Spec) -> None:
    batch = [tf.stack([x, x * 0.5]) for x in _singular(spec)]

    def one(args):
        return spec.safe(*args)

    mapped = tf.vectorized_map(one, batch)
    looped = tf.stack([one([b[i] for b in batch]) for i in range(2)])
    np.testing.assert_allclose(mapped.numpy(), looped.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("jit", [False, True], ids=["function", "xla"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_compiled_value_gradient_and_hessian_equal_eager(spec: Spec, jit: bool) -> None:
    xs = _singular(spec)

    def derivatives(*inputs):
        with tf.GradientTape() as outer:
            outer.watch(inputs)
            with tf.GradientTape() as inner:
                inner.watch(inputs)
                out = spec.safe(*inputs)
                total = tf.reduce_sum(out * tf.cos(out))
            grads = inner.gradient(total, inputs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            combination = tf.add_n([tf.reduce_sum(g * tf.sin(x)) for g, x in zip(grads, inputs)])
        seconds = outer.gradient(combination, inputs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return [out, *grads, *seconds]

    eager = derivatives(*xs)
    compiled = tf.function(derivatives, jit_compile=jit)(*xs)
    for e, c in zip(eager, compiled):
        assert np.all(np.isfinite(c.numpy()))
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-9, atol=1e-9)


def test_keras_layer_and_loss_on_the_tensorflow_backend_train_with_fit() -> None:
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras runs on another backend here")

    class MaskedAttentionPool(keras.layers.Layer):
        """Attention pooling whose padded rows (nothing to attend to) stay finite."""

        def build(self, input_shape):
            self.score = self.add_weight(shape=(input_shape[-1], 1), initializer="glorot_uniform")

        def call(self, x, keep):
            scores = tf.squeeze(tf.matmul(x, self.score), -1)
            weights = ng.softmax(scores, axis=-1, mask=keep)
            return tf.reduce_sum(x * weights[..., None], axis=1) + ng.masked_mean(x, keep[..., None], axis=1)

    def loss(target, predicted):
        return ng.cross_entropy_probs(target, ng.softmax(predicted, axis=-1))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 5, 4)).astype(np.float32)
    keep = rng.random((16, 5)) > 0.3
    keep[:4] = False  # four examples that are all padding
    target = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
    inputs, mask = keras.Input((5, 4)), keras.Input((5,), dtype="bool")
    model = keras.Model([inputs, mask], keras.layers.Dense(3)(MaskedAttentionPool()(inputs, mask)))
    for jit in (False, True):
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss, jit_compile=jit)
        history = model.fit([x, keep], target, epochs=3, batch_size=8, verbose=0)
        assert np.all(np.isfinite(history.history["loss"]))
        assert all(np.all(np.isfinite(w)) for w in model.get_weights())
