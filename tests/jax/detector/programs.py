"""Real JAX NaN bugs and their fixed versions. The line each bug must be reported at carries a
``# BUG`` comment; `line_of` finds it, so the tests name lines without counting them."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
from jax.scipy.special import xlogy


def line_of(fn, marker: str = "# BUG") -> int:
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, (fn.__name__, hits)
    return hits[0]


# ----------------------------------------------------------------- the double where
def double_where(x):
    return jnp.where(x > 0, jnp.sqrt(x), 0.0).sum()  # BUG


def double_where_fixed(x):
    safe = jnp.where(x > 0, x, 1.0)
    return jnp.where(x > 0, jnp.sqrt(safe), 0.0).sum()


# ------------------------------------------------------------------------ log of 0
def log_of_zero(p):
    return jnp.log(p).sum()  # BUG


def log_masked(p):
    return jnp.where(p > 0, jnp.log(p), 0.0).sum()  # BUG


def log_masked_fixed(p):
    return jnp.where(p > 0, jnp.log(jnp.where(p > 0, p, 1.0)), 0.0).sum()


# -------------------------------------------------------------------- xlogy at 0
def entropy_xlogy(p):
    return -xlogy(p, p).sum()  # BUG


def entropy_xlogy_fixed(p):
    kept = p > 0
    return -jnp.where(kept, p * jnp.log(jnp.where(kept, p, 1.0)), 0.0).sum()


# --------------------------------------------------------------------- exp overflow
def exp_overflow(x):
    return jnp.exp(x).sum()  # BUG


def softplus_by_hand(x):
    e = jnp.exp(x)  # BUG
    return jnp.where(jnp.isinf(e), x, jnp.log1p(e)).sum()


def softplus_fixed(x):
    return jax.nn.softplus(x).sum()


# ------------------------------------------------------------- norm of zero vector
def pair_norm(a, b):
    return jnp.linalg.norm(a - b, axis=-1).sum()  # BUG


def pair_norm_fixed(a, b):
    d = a - b
    sq = jnp.sum(d * d, axis=-1)
    return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0).sum()


# ------------------------------------------------------------ distance matrix diagonal
def gram_distances(x):
    sq = jnp.sum(x * x, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * x @ x.T
    return jnp.sqrt(jnp.maximum(d2, 0.0)).sum()  # BUG


def gram_distances_fixed(x):
    diff = x[:, None, :] - x[None, :, :]
    d2 = jnp.sum(diff * diff, axis=-1)
    far = d2 > 0
    return jnp.where(far, jnp.sqrt(jnp.where(far, d2, 1.0)), 0.0).sum()


# --------------------------------------------------------------- empty masked mean
def masked_mean(x, mask):
    return jnp.mean(x, axis=1, where=mask).sum()  # BUG


def masked_mean_fixed(x, mask):
    total = jnp.sum(jnp.where(mask, x, 0.0), axis=1)
    count = jnp.sum(mask, axis=1)
    return (total / jnp.maximum(count, 1)).sum()


# -------------------------------------------------------------- a deliberate −inf mask
def masked_attention(scores, mask, values):
    logits = jnp.where(mask, scores, -jnp.inf)
    weights = jax.nn.softmax(logits, axis=-1)
    return (weights @ values).sum()


def fully_masked_attention(scores, mask, values):
    logits = jnp.where(mask, scores, -jnp.inf)
    weights = jax.nn.softmax(logits, axis=-1)  # BUG
    return (weights @ values).sum()


# -------------------------------------------------------------------- loops
def scan_of_logs(xs):
    def body(carry, x):
        return carry + jnp.log(x), None  # BUG
    total, _ = jax.lax.scan(body, 0.0, xs)
    return total
