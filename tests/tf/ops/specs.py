"""Every nanguard.tf op beside its textbook TensorFlow formula, with shapes and regular inputs.

``regular(rng)`` makes float64 inputs away from every singular point (for gradient checks);
``domain`` bounds what hypothesis draws per input (None: any moderate finite value).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

import nanguard.tf as ng

MASK = tf.constant([[True, False, True, True], [False, True, True, False], [True, True, False, True]])
NEG_INF = float("-inf")


@dataclass
class Spec:
    name: str
    safe: Callable[..., tf.Tensor]
    textbook: Callable[..., tf.Tensor]
    shapes: Sequence[Tuple[int, ...]]
    regular: Callable[[np.random.Generator], List[np.ndarray]]
    domain: Sequence[Optional[Tuple[float, float]]] = field(default_factory=list)


def _normal(rng, shape, scale=1.0, shift=0.0):
    return rng.standard_normal(shape) * scale + shift


def _uniform(rng, shape, low, high):
    return rng.random(shape) * (high - low) + low


def _probs(rng, shape):
    p = _uniform(rng, shape, 0.1, 1.0)
    return p / p.sum(-1, keepdims=True)


def _textbook_std(x, correction=1):
    n = x.shape[-1]
    return tf.sqrt(tf.reduce_sum(tf.square(x - tf.reduce_mean(x, -1, keepdims=True)), -1) / (n - correction))


SPECS: List[Spec] = [
    Spec("softplus", ng.softplus, lambda x: tf.math.log1p(tf.exp(x)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("softplus_beta", lambda x: ng.softplus(x, beta=2.0), lambda x: tf.math.log1p(tf.exp(2 * x)) / 2, [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-15, 15)]),
    Spec("logaddexp", ng.logaddexp, lambda a, b: tf.math.log(tf.exp(a) + tf.exp(b)), [(3, 4), (4,)],
         lambda r: [_normal(r, (3, 4), 3), _normal(r, (4,), 3)], [(-30, 30), (-30, 30)]),
    Spec("logsumexp", lambda x: ng.logsumexp(x, axis=1), lambda x: tf.math.log(tf.reduce_sum(tf.exp(x), 1)),
         [(3, 4)], lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("logsumexp_mask", lambda x: ng.logsumexp(x, axis=-1, mask=MASK),
         lambda x: tf.math.log(tf.reduce_sum(tf.where(MASK, tf.exp(x), 0), -1)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("softmax", lambda x: ng.softmax(x, axis=0), lambda x: tf.exp(x) / tf.reduce_sum(tf.exp(x), 0), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("softmax_mask", lambda x: ng.softmax(x, axis=-1, mask=MASK),
         lambda x: tf.where(MASK, tf.exp(x), 0) / tf.reduce_sum(tf.where(MASK, tf.exp(x), 0), -1, keepdims=True),
         [(3, 4)], lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("log_softmax", ng.log_softmax, lambda x: x - tf.math.log(tf.reduce_sum(tf.exp(x), -1, keepdims=True)),
         [(3, 4)], lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("log_softmax_mask", lambda x: ng.log_softmax(x, mask=MASK),
         lambda x: tf.where(MASK, x - tf.math.log(tf.reduce_sum(tf.where(MASK, tf.exp(x), 0), -1, keepdims=True)), 0),
         [(3, 4)], lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("xlogy", ng.xlogy, lambda x, y: x * tf.math.log(y), [(3, 4), (3, 4)],
         lambda r: [_normal(r, (3, 4)), _uniform(r, (3, 4), 0.5, 3)], [None, (1e-3, 1e3)]),
    Spec("entropy", ng.entropy, lambda p: -tf.reduce_sum(p * tf.math.log(p), -1), [(3, 4)],
         lambda r: [_probs(r, (3, 4))], [(1e-6, 1.0)]),
    Spec("cross_entropy_probs", ng.cross_entropy_probs, lambda t, q: -tf.reduce_sum(t * tf.math.log(q), -1),
         [(3, 4), (3, 4)], lambda r: [_probs(r, (3, 4)), _probs(r, (3, 4))], [(0.0, 1.0), (1e-6, 1.0)]),
    Spec("sqrt", ng.sqrt, tf.sqrt, [(3, 4)], lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-6, 1e6)]),
    Spec("pow", lambda x: ng.pow(x, 1 / 3), lambda x: tf.pow(x, 1 / 3), [(3, 4)],
         lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-6, 1e6)]),
    Spec("pow_2.5", lambda x: ng.pow(x, 2.5), lambda x: tf.pow(x, 2.5), [(3, 4)],
         lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-6, 1e3)]),
    Spec("norm", lambda x: ng.norm(x, axis=-1), lambda x: tf.sqrt(tf.reduce_sum(x * x, -1)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), shift=0.5)], [(-1e3, 1e3)]),
    Spec("norm_all", ng.norm, lambda x: tf.sqrt(tf.reduce_sum(x * x)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), shift=0.5)], [(-1e3, 1e3)]),
    Spec("normalize", ng.normalize, lambda x: x / tf.sqrt(tf.reduce_sum(x * x, -1, keepdims=True)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), shift=0.5)], [(-1e3, 1e3)]),
    Spec("cosine_similarity", ng.cosine_similarity,
         lambda a, b: tf.reduce_sum(a * b, -1) / tf.sqrt(tf.reduce_sum(a * a, -1) * tf.reduce_sum(b * b, -1)),
         [(3, 4), (3, 4)], lambda r: [_normal(r, (3, 4), shift=0.5), _normal(r, (3, 4), shift=0.5)],
         [(-1e3, 1e3), (-1e3, 1e3)]),
    Spec("distance_matrix", lambda x, y: ng.distance_matrix(x, y),
         lambda x, y: tf.sqrt(tf.reduce_sum(tf.square(x[:, None] - y[None]), -1)), [(3, 2), (4, 2)],
         lambda r: [_normal(r, (3, 2)), _normal(r, (4, 2), shift=3)], [(-1e3, 1e3), (-1e3, 1e3)]),
    Spec("div", ng.div, lambda a, b: a / b, [(3, 4), (3, 4)],
         lambda r: [_normal(r, (3, 4)), _uniform(r, (3, 4), 0.5, 2) * np.sign(_normal(r, (3, 4)))],
         [None, (0.01, 100)]),
    Spec("masked_mean", lambda x: ng.masked_mean(x, MASK, axis=1),
         lambda x: tf.reduce_sum(tf.where(MASK, x, 0), 1) / tf.reduce_sum(tf.cast(MASK, x.dtype), 1), [(3, 4)],
         lambda r: [_normal(r, (3, 4))], [None]),
    Spec("var", lambda x: ng.var(x, axis=-1), lambda x: tf.square(_textbook_std(x)), [(3, 4)],
         lambda r: [_normal(r, (3, 4))], [None]),
    Spec("std", lambda x: ng.std(x, axis=-1), _textbook_std, [(3, 4)], lambda r: [_normal(r, (3, 4))], [None]),
    Spec("std_ddof0", lambda x: ng.std(x, axis=-1, ddof=0), lambda x: tf.math.reduce_std(x, -1), [(3, 4)],
         lambda r: [_normal(r, (3, 4))], [None]),
    Spec("acos", ng.acos, tf.acos, [(3, 4)], lambda r: [_uniform(r, (3, 4), -0.9, 0.9)], [(-1.0, 1.0)]),
    Spec("asin", ng.asin, tf.asin, [(3, 4)], lambda r: [_uniform(r, (3, 4), -0.9, 0.9)], [(-1.0, 1.0)]),
    Spec("safe_where", lambda x: ng.safe_where(x > 0, tf.math.log, x), lambda x: tf.math.log(x), [(3, 4)],
         lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-3, 1e3)]),
]

BY_NAME = {spec.name: spec for spec in SPECS}
