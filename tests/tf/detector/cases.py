"""Real TensorFlow NaN/Inf bugs and their fixes, as functions of one tensor (the tests run each
eagerly, in ``tf.function`` and under XLA, forward and backward). The comment ``# BUG: name``
marks the line a report must name; `line_of` finds it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

HERE = os.path.abspath(__file__)


def line_of(marker: str) -> int:
    with open(HERE, encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            if f"# BUG: {marker}" in text:
                return number
    raise LookupError(marker)


LABELS = tf.constant([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def xent_story(logits):                      # seed 003: cross-entropy from softmax probabilities
    y_conv = tf.nn.softmax(logits)
    return -tf.reduce_sum(LABELS * tf.math.log(y_conv))  # BUG: xent


def xent_fixed(logits):
    return -tf.reduce_sum(LABELS * tf.nn.log_softmax(logits))


def double_where_story(x):                   # seed 004: one tf.where around 1/x
    return tf.reduce_sum(tf.where(tf.not_equal(x, 0.0), 1.0 / x, tf.zeros_like(x)))  # BUG: where


def double_where_fixed(x):
    ok = tf.not_equal(x, 0.0)
    safe_x = tf.where(ok, x, tf.ones_like(x))
    return tf.reduce_sum(tf.where(ok, 1.0 / safe_x, tf.zeros_like(x)))


def distance_story(points):                  # the Gram expansion, sqrt at 0 on the diagonal
    sq = tf.reduce_sum(points * points, axis=-1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * tf.matmul(points, points, transpose_b=True)
    return tf.reduce_sum(tf.sqrt(tf.maximum(d2, 0.0)))  # BUG: distance


def distance_fixed(points):
    d2 = tf.reduce_sum(tf.square(points[:, None, :] - points[None, :, :]), axis=-1)
    positive = d2 > 0
    return tf.reduce_sum(tf.where(positive, tf.sqrt(tf.where(positive, d2, tf.ones_like(d2))), tf.zeros_like(d2)))


def log_story(p):                            # log of a probability that is exactly 0
    return tf.reduce_sum(tf.math.log(p))  # BUG: log


def log_fixed(p):
    return tf.reduce_sum(tf.math.xlogy(p, p))


def exp_story(x):                            # exp overflow in float32
    return tf.reduce_sum(tf.math.log(1.0 + tf.exp(x)))  # BUG: exp


def exp_fixed(x):
    return tf.reduce_sum(tf.nn.softplus(x))


def softplus_where_story(x):                 # exp's inf replaced by where: NaN in the backward only
    e = tf.exp(x)  # BUG: softplus_where
    return tf.reduce_sum(tf.where(tf.math.is_inf(e), x, tf.math.log1p(e)))


MASK = tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def masked_mean_story(x):                    # mean over a mask with an empty row
    mask = tf.concat([MASK[:1], tf.zeros_like(MASK[1:])], axis=0)
    return tf.reduce_sum(tf.reduce_sum(x * mask, axis=1) / tf.reduce_sum(mask, axis=1))  # BUG: masked_mean


def masked_mean_fixed(x):
    mask = tf.concat([MASK[:1], tf.zeros_like(MASK[1:])], axis=0)
    return tf.reduce_sum(tf.math.divide_no_nan(tf.reduce_sum(x * mask, axis=1), tf.reduce_sum(mask, axis=1)))


def attention_mask(x):                       # a deliberate -inf mask: every row keeps a key
    scores = tf.matmul(x, x, transpose_b=True)
    masked = tf.where(tf.cast(MASK[:, :2], tf.bool), scores, tf.fill(tf.shape(scores), float("-inf")))
    weights = tf.nn.softmax(masked, axis=-1)
    return tf.reduce_sum(tf.matmul(weights, x))


@dataclass(frozen=True)
class Case:
    name: str
    bug: Callable
    fixed: Optional[Callable]
    value: np.ndarray
    op: str                  # the forward op the report names
    check: str = "both"
    backward: bool = False   # the first finding is in the gradient


POINTS = np.array([[0.0, 1.0], [2.0, 0.5], [1.0, 1.0]], np.float32)
CASES = [
    Case("xent", xent_story, xent_fixed, np.array([[0.0, 200.0, -200.0], [300.0, 0.0, -300.0]], np.float32), "Log"),
    Case("where", double_where_story, double_where_fixed, np.array([0.0, 2.0, -4.0], np.float32), "RealDiv"),
    Case("where", double_where_story, double_where_fixed, np.array([0.0, 2.0, -4.0], np.float32), "RealDiv",
         check="nan", backward=True),
    Case("distance", distance_story, distance_fixed, POINTS, "Sqrt", backward=True),
    Case("log", log_story, log_fixed, np.array([0.0, 0.5, 0.5], np.float32), "Log"),
    Case("exp", exp_story, exp_fixed, np.array([1.0, 100.0], np.float32), "Exp"),
    Case("softplus_where", softplus_where_story, exp_fixed, np.array([0.0, 1.0, 100.0], np.float32), "Exp",
         check="nan", backward=True),
    Case("masked_mean", masked_mean_story, masked_mean_fixed, np.ones((2, 3), np.float32), "RealDiv"),
]
