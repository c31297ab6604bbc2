"""Every nanguard.jax op beside its textbook jnp formula, with shapes and regular inputs.

``regular(rng)`` makes float64 inputs away from every singular point (for gradient checks);
``domain`` bounds what hypothesis draws per input (None: any moderate finite value), so
that the *reference* formula itself neither overflows nor underflows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import jax.numpy as jnp
import numpy as np

import nanguard.jax as ng

MASK = np.array([[True, False, True, True], [False, True, True, False], [True, True, False, True]])


@dataclass
class Spec:
    name: str
    safe: Callable
    textbook: Callable
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
    return jnp.sqrt(jnp.sum(jnp.square(x - jnp.mean(x, -1, keepdims=True)), -1) / (n - correction))


def _masked_exp(x):
    return jnp.where(MASK, jnp.exp(x), 0)


SPECS: List[Spec] = [
    Spec("softplus", ng.softplus, lambda x: jnp.log1p(jnp.exp(x)), [(3, 4)], lambda r: [_normal(r, (3, 4), 3)],
         [(-30, 30)]),
    Spec("softplus_beta", lambda x: ng.softplus(x, beta=2.0), lambda x: jnp.log1p(jnp.exp(2 * x)) / 2, [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-15, 15)]),
    Spec("logaddexp", ng.logaddexp, lambda a, b: jnp.log(jnp.exp(a) + jnp.exp(b)), [(3, 4), (4,)],
         lambda r: [_normal(r, (3, 4), 3), _normal(r, (4,), 3)], [(-30, 30), (-30, 30)]),
    Spec("logsumexp", lambda x: ng.logsumexp(x, axis=1), lambda x: jnp.log(jnp.sum(jnp.exp(x), 1)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("logsumexp_where", lambda x: ng.logsumexp(x, axis=-1, where=MASK),
         lambda x: jnp.log(jnp.sum(_masked_exp(x), -1)), [(3, 4)], lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("softmax", lambda x: ng.softmax(x, axis=0), lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x), 0), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("softmax_mask", lambda x: ng.softmax(x, axis=-1, mask=MASK),
         lambda x: _masked_exp(x) / jnp.sum(_masked_exp(x), -1, keepdims=True), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("log_softmax", ng.log_softmax, lambda x: x - jnp.log(jnp.sum(jnp.exp(x), -1, keepdims=True)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("log_softmax_where", lambda x: ng.log_softmax(x, where=MASK),
         lambda x: jnp.where(MASK, x - jnp.log(jnp.sum(_masked_exp(x), -1, keepdims=True)), 0), [(3, 4)],
         lambda r: [_normal(r, (3, 4), 3)], [(-30, 30)]),
    Spec("xlogy", ng.xlogy, lambda x, y: x * jnp.log(y), [(3, 4), (3, 4)],
         lambda r: [_normal(r, (3, 4)), _uniform(r, (3, 4), 0.5, 3)], [None, (1e-3, 1e3)]),
    Spec("entropy", ng.entropy, lambda p: -jnp.sum(p * jnp.log(p), -1), [(3, 4)], lambda r: [_probs(r, (3, 4))],
         [(1e-6, 1.0)]),
    Spec("cross_entropy_probs", ng.cross_entropy_probs, lambda t, q: -jnp.sum(t * jnp.log(q), -1),
         [(3, 4), (3, 4)], lambda r: [_probs(r, (3, 4)), _probs(r, (3, 4))], [(0.0, 1.0), (1e-6, 1.0)]),
    Spec("sqrt", ng.sqrt, jnp.sqrt, [(3, 4)], lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-6, 1e6)]),
    Spec("pow", lambda x: ng.pow(x, 1 / 3), lambda x: jnp.power(x, 1 / 3), [(3, 4)],
         lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-6, 1e6)]),
    Spec("pow_2.5", lambda x: ng.pow(x, 2.5), lambda x: jnp.power(x, 2.5), [(3, 4)],
         lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-6, 1e3)]),
    # norms: magnitudes bounded away from 0 and from huge values, so the textbook
    # sqrt(sum(x²)) itself neither underflows nor overflows
    Spec("norm", lambda x: ng.norm(x, axis=-1), lambda x: jnp.sqrt(jnp.sum(x * x, -1)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), shift=0.5)], [(0.01, 1e3)]),
    Spec("norm_all", ng.norm, lambda x: jnp.sqrt(jnp.sum(x * x)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), shift=0.5)], [(0.01, 1e3)]),
    Spec("normalize", ng.normalize, lambda x: x / jnp.sqrt(jnp.sum(x * x, -1, keepdims=True)), [(3, 4)],
         lambda r: [_normal(r, (3, 4), shift=0.5)], [(0.01, 1e3)]),
    Spec("cosine_similarity", ng.cosine_similarity,
         lambda a, b: jnp.sum(a * b, -1) / jnp.sqrt(jnp.sum(a * a, -1) * jnp.sum(b * b, -1)),
         [(3, 4), (3, 4)], lambda r: [_normal(r, (3, 4), shift=0.5), _normal(r, (3, 4), shift=0.5)],
         [(0.01, 1e3), (-1e3, -0.01)]),
    Spec("distance_matrix", lambda x, y: ng.distance_matrix(x, y),
         lambda x, y: jnp.sqrt(jnp.sum(jnp.square(x[:, None] - y[None]), -1)), [(3, 2), (4, 2)],
         lambda r: [_normal(r, (3, 2)), _normal(r, (4, 2), shift=3)], [(-1e3, -1.0), (1.0, 1e3)]),
    Spec("div", ng.div, lambda a, b: a / b, [(3, 4), (3, 4)],
         lambda r: [_normal(r, (3, 4)), _uniform(r, (3, 4), 0.5, 2) * np.sign(_normal(r, (3, 4)))],
         [None, (0.01, 100)]),
    Spec("masked_mean", lambda x: ng.masked_mean(x, MASK, axis=1),
         lambda x: jnp.sum(jnp.where(MASK, x, 0), 1) / jnp.sum(MASK, 1), [(3, 4)], lambda r: [_normal(r, (3, 4))],
         [None]),
    Spec("var", lambda x: ng.var(x, axis=-1), lambda x: jnp.square(_textbook_std(x)), [(3, 4)],
         lambda r: [_normal(r, (3, 4))], [None]),
    Spec("std", lambda x: ng.std(x, axis=-1), _textbook_std, [(3, 4)], lambda r: [_normal(r, (3, 4))], [None]),
    Spec("std_ddof0", lambda x: ng.std(x, axis=-1, ddof=0), lambda x: jnp.std(x, -1), [(3, 4)],
         lambda r: [_normal(r, (3, 4))], [None]),
    Spec("acos", ng.acos, jnp.arccos, [(3, 4)], lambda r: [_uniform(r, (3, 4), -0.9, 0.9)], [(-0.999, 0.999)]),
    Spec("asin", ng.asin, jnp.arcsin, [(3, 4)], lambda r: [_uniform(r, (3, 4), -0.9, 0.9)], [(-0.999, 0.999)]),
    Spec("safe_where", lambda x: ng.safe_where(x > 0, jnp.log, x), jnp.log, [(3, 4)],
         lambda r: [_uniform(r, (3, 4), 0.1, 4)], [(1e-3, 1e3)]),
]

BY_NAME = {spec.name: spec for spec in SPECS}
