"""Small models and gradients for the TF guard tests."""

from __future__ import annotations

from typing import Callable, Dict, List

import keras
import numpy as np
import tensorflow as tf

NAN, INF = float("nan"), float("inf")
INNERS: Dict[str, Callable[[], keras.optimizers.Optimizer]] = {
    "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    "adam": lambda: keras.optimizers.Adam(1e-2),
    "adamw": lambda: keras.optimizers.AdamW(1e-2, weight_decay=0.1),
}


def make_model(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="hidden"),
                             keras.layers.Dense(1, name="head")], name="net")


def bits(variables) -> List[bytes]:
    return [np.asarray(v.numpy()).tobytes() for v in variables]


def gradients(model: keras.Model, x) -> List[tf.Tensor]:
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - 1.0) ** 2)
    return tape.gradient(loss, model.trainable_variables)


GOOD = tf.constant([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
BAD = tf.constant([[1.0, NAN, 3.0], [0.5, -1.0, 2.0]])  # poisons every gradient


def planted_head_bias(model: keras.Model, value: float) -> List[tf.Tensor]:
    """Finite gradients except one element of the head's bias."""
    grads = gradients(model, GOOD)
    grads[-1] = tf.constant([value])
    return grads
