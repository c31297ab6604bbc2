"""Seed story 004 in TensorFlow: the softmax output turns NaN, and check_numerics cannot say why.

A classifier has an inverse-activation feature, ``1 / h`` where the ReLU activation ``h`` is
non-zero and 0 where it is not, written as the seed wrote ``f(x) = 1/x`` with a single
``tf.where``. The value is finite, but the gradient of ``1/h`` at ``h = 0`` is ``-inf`` and
``tf.where`` multiplies it by 0: NaN. The second batch has such a sample; the update writes
NaN into the weights, and at the next step ``tf.debugging.check_numerics(probabilities,
'bad probabilities')`` fails, one step after the damage and far from it:

    python -m nanguard.stories.tf_softmax_nan
    nanguard run -m nanguard.stories.tf_softmax_nan
"""

import tensorflow as tf

# three batches of (features, one-hot labels); in the second, one sample turns a hidden unit
# off (its ReLU activation is exactly 0)
BATCHES = [
    ([[1.0, 2.0, 0.5], [0.5, 1.0, 2.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
    ([[2.0, 0.5, 1.0], [-1.0, 1.0, 1.0]], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
    ([[1.5, 1.0, 1.0], [0.5, 2.0, 1.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
]


def inverse(h):
    h_ok = tf.not_equal(h, 0.0)
    return tf.where(h_ok, 1.0 / h, tf.zeros_like(h))


def main(steps: int = 3, optimizer=None) -> float:
    W1 = tf.Variable([[1.0, 0.5, 0.2], [0.3, 1.0, 0.4], [0.2, 0.1, 1.0]], name="W1")
    W2 = tf.Variable(tf.eye(3), name="W2")
    optimizer = optimizer or tf.keras.optimizers.SGD(0.1)
    for i in range(steps):
        x, y_ = (tf.constant(t) for t in BATCHES[i % len(BATCHES)])
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, W1))
            logits = tf.matmul(inverse(h), W2)
            probabilities = tf.nn.softmax(logits=logits, name="Softmax")
            probabilities = tf.debugging.check_numerics(probabilities, message="bad probabilities")
            loss = -tf.reduce_mean(tf.reduce_sum(y_ * tf.math.log(probabilities), axis=-1))
        grads = tape.gradient(loss, [W1, W2])
        optimizer.apply_gradients(zip(grads, [W1, W2]))
        print(f"step {i + 1}: loss {float(loss):.4f}")
    return float(loss)


if __name__ == "__main__":
    main()
