"""Seed story 003, fixed: the cross-entropy from the logits with ``tf.nn.log_softmax``.

``log_softmax`` never takes the log of a rounded probability, so the confident class that
made ``log(0)`` is a finite, large negative number and the loss and gradients are exact.
(From probabilities you cannot avoid, ``nanguard.tf.cross_entropy_probs(y_, y_conv)`` gives
``0 * log 0 = 0`` with the right gradient.)

    nanguard run -m nanguard.stories.tf_cross_entropy_fixed
"""

import tensorflow as tf

FEATURES = [[1.0, 0.5, -0.5], [60.0, -40.0, 10.0]]
LABELS = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def main(steps: int = 3) -> float:
    x, y_ = tf.constant(FEATURES), tf.constant(LABELS)
    W = tf.Variable(tf.eye(3) * 1.5)
    b = tf.Variable(tf.zeros([3]))
    for i in range(steps):
        with tf.GradientTape() as tape:
            log_probs = tf.nn.log_softmax(tf.matmul(x, W) + b)
            cross_entropy = -tf.reduce_sum(y_ * log_probs)
        grads = tape.gradient(cross_entropy, [W, b])
        for var, grad in zip([W, b], grads):
            var.assign_sub(0.01 * grad)
        print(f"step {i + 1}: loss {float(cross_entropy):.4f}")
    return float(cross_entropy)


if __name__ == "__main__":
    main()
