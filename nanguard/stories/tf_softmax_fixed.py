"""Seed story 004, fixed: the double ``tf.where``, packaged as ``nanguard.tf.safe_where``.

``nanguard.tf.safe_where(h_ok, lambda v: 1.0 / v, h)`` evaluates ``1/v`` only on a safe input
(the inner where puts 1 where ``h = 0``), so neither the value nor the gradient meets ``1/0``:
the gradient at ``h = 0`` is 0 and every step is finite:

    nanguard run -m nanguard.stories.tf_softmax_fixed
"""

import tensorflow as tf

import nanguard.tf

# three batches of (features, one-hot labels); in the second, one sample turns a hidden unit
# off (its ReLU activation is exactly 0)
BATCHES = [
    ([[1.0, 2.0, 0.5], [0.5, 1.0, 2.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
    ([[2.0, 0.5, 1.0], [-1.0, 1.0, 1.0]], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
    ([[1.5, 1.0, 1.0], [0.5, 2.0, 1.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
]


def inverse(h):
    h_ok = tf.not_equal(h, 0.0)
    return nanguard.tf.safe_where(h_ok, lambda v: 1.0 / v, h)


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
