"""Seed story 003 in TensorFlow: cross-entropy written by hand from softmax probabilities.

The classifier computes ``y_conv = tf.nn.softmax(logits)`` and the loss
``-tf.reduce_sum(y_ * tf.math.log(y_conv))``. Once the model is confident, a class it has
ruled out gets a probability that rounds to exactly 0 in float32; ``log(0) = -inf`` and the
label's ``0 * -inf`` is NaN, so the loss is NaN from the first step:

    python -m nanguard.stories.tf_cross_entropy_nan
    nanguard run -m nanguard.stories.tf_cross_entropy_nan
"""

import tensorflow as tf

# 2 samples, 3 features, 3 classes; the second sample's features are large (unnormalised)
FEATURES = [[1.0, 0.5, -0.5], [60.0, -40.0, 10.0]]
LABELS = [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def main(steps: int = 3) -> float:
    x, y_ = tf.constant(FEATURES), tf.constant(LABELS)
    W = tf.Variable(tf.eye(3) * 1.5)
    b = tf.Variable(tf.zeros([3]))
    for i in range(steps):
        with tf.GradientTape() as tape:
            y_conv = tf.nn.softmax(tf.matmul(x, W) + b)
            cross_entropy = -tf.reduce_sum(y_ * tf.math.log(y_conv))
        grads = tape.gradient(cross_entropy, [W, b])
        for var, grad in zip([W, b], grads):
            var.assign_sub(0.01 * grad)
        print(f"step {i + 1}: loss {float(cross_entropy):.4f}")
    return float(cross_entropy)


if __name__ == "__main__":
    main()
