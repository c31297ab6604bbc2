"""The seed stories' numbers, in TensorFlow: the textbook code is NaN, nanguard.tf is not."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import nanguard.tf as ng


def _value_and_grad(fn, x):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y.numpy(), tape.gradient(y, x).numpy()


def test_entropy_seed_003_numbers() -> None:
    value, grad = _value_and_grad(ng.entropy, [0.1, 0.2, 0.0, 0.7])
    assert abs(value - 0.80181855) < 1e-7
    np.testing.assert_allclose(grad, [1.30258512, 0.60943794, 0.0, -0.64332503], rtol=1e-6, atol=1e-7)
    textbook, _ = _value_and_grad(lambda p: -tf.reduce_sum(p * tf.math.log(p)), [0.1, 0.2, 0.0, 0.7])
    assert np.isnan(textbook), "the seed's NaN should reproduce with plain TensorFlow"


def test_cross_entropy_seed_003_textbook_is_nan_and_safe_op_is_finite() -> None:
    # -tf.reduce_sum(y_ * tf.log(y_conv)) with a prediction of exactly 0 where the label is 0
    labels = tf.constant([[0.0, 1.0, 0.0]])
    predicted = [[0.0, 0.9, 0.1]]
    textbook, _ = _value_and_grad(lambda q: -tf.reduce_sum(labels * tf.math.log(q)), predicted)
    assert np.isnan(textbook)
    value, grad = _value_and_grad(lambda q: tf.reduce_sum(ng.cross_entropy_probs(labels, q)), predicted)
    np.testing.assert_allclose(value, -np.log(0.9), rtol=1e-6)
    np.testing.assert_allclose(grad, [[0.0, -1 / 0.9, 0.0]], rtol=1e-6)


def test_double_where_seed_004_gradient() -> None:
    x = tf.constant([-1.0, 0.0, 1.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        naive = tf.reduce_sum(tf.where(x != 0, 1 / x, tf.zeros_like(x)))
        safe = tf.reduce_sum(ng.safe_where(tf.not_equal(x, 0), lambda v: 1 / v, x))
    assert np.isnan(tape.gradient(naive, x).numpy()[1])
    assert tape.gradient(safe, x).numpy().tolist() == [-1.0, 0.0, -1.0]


def test_log_softmax_instead_of_clipping_seed_003_trains() -> None:
    # the fix the story recommends: log_softmax of the logits, finite even at confident zeros
    logits = tf.Variable([[30.0, -30.0, 0.0], [0.0, 0.0, 0.0]])
    labels = tf.constant([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    optimizer_step = 0.1
    for _ in range(20):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_sum(labels * ng.log_softmax(logits, axis=-1))
        grad = tape.gradient(loss, logits)
        assert np.all(np.isfinite(grad.numpy()))
        logits.assign_sub(optimizer_step * grad)
    assert np.isfinite(loss.numpy()) and loss.numpy() < 1.1


def test_distance_matrix_story_trains_in_tensorflow() -> None:
    rng = np.random.default_rng(0)
    true = tf.constant(rng.standard_normal((10, 3)), tf.float32)
    start = rng.standard_normal((10, 3)).astype(np.float32)

    def gram_distances(x):  # the story's sqrt(|x|² + |y|² - 2 x·y): NaN gradient on the diagonal
        sq = tf.reduce_sum(x * x, -1)
        return tf.sqrt(sq[:, None] + sq[None, :] - 2 * tf.matmul(x, x, transpose_b=True))

    pred = tf.Variable(start)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(gram_distances(pred) - gram_distances(true)))
    assert np.isnan(tape.gradient(loss, pred).numpy()).any()

    pred = tf.Variable(start)
    optimizer = tf.keras.optimizers.Adam(0.05)
    target = ng.distance_matrix(true)
    for _ in range(300):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(ng.distance_matrix(pred) - target))
        optimizer.apply_gradients([(tape.gradient(loss, pred), pred)])
    assert np.isfinite(loss.numpy()) and loss.numpy() < 0.05
