"""A jitted optax training loop: the bug is found at the step it first happens, at the user's
line, in the backward pass; the fixed loss trains quietly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import nanguard.jax as ngj
from nanguard.errors import NonFiniteError

optax = pytest.importorskip("optax")


def init(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (4, 8)) * 0.5, "w2": jax.random.normal(k2, (8, 3)) * 0.5}


def embed(params, x):
    return jnp.tanh(x @ params["w1"]) @ params["w2"]


def loss_buggy(params, x, y):
    z = embed(params, x)
    length = jnp.linalg.norm(z, axis=-1)  # BUG: a zero input row embeds to the zero vector
    return jnp.mean((length - y) ** 2)


def loss_fixed(params, x, y):
    z = embed(params, x)
    length = optax.safe_norm(z, 0.0, axis=-1)
    return jnp.mean((length - y) ** 2)


def batches(n_steps, zero_at):
    key = jax.random.PRNGKey(0)
    for step in range(1, n_steps + 1):
        key, sub = jax.random.split(key)
        x = jax.random.normal(sub, (16, 4))
        if step == zero_at:
            x = x.at[5].set(0.0)
        yield x, jnp.ones(16)


def train(loss, n_steps=6, zero_at=4):
    optimizer = optax.adam(1e-2)
    params = init(jax.random.PRNGKey(1))
    state = optimizer.init(params)

    @jax.jit
    def step(params, state, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    for x, y in batches(n_steps, zero_at):
        params, state, value = step(params, state, x, y)
    return params, value


def test_the_zero_vector_is_found_at_its_step_and_line():
    import inspect
    lines, start = inspect.getsourcelines(loss_buggy)
    line = start + next(i for i, text in enumerate(lines) if "# BUG" in text)
    with pytest.raises(NonFiniteError) as info:
        with ngj.detect():
            train(loss_buggy)
    report = info.value.report
    assert (report.file, report.line, report.phase) == (__file__, line, "backward")
    assert report.forward_op == "norm" and report.step == 4
    assert "optax.safe_norm" in report.suggestion and "zero" in report.explanation


def test_the_fixed_loss_trains_quietly():
    with ngj.detect(mode="record") as d:
        params, value = train(loss_fixed)
    assert d.report is None and bool(jnp.isfinite(value))
