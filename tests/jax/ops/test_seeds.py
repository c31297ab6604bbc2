"""The seed stories' numbers, in JAX: the textbook code is NaN, nanguard.jax is not."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

import nanguard.jax as ng


def test_entropy_seed_003_numbers() -> None:
    p = jnp.array([0.1, 0.2, 0.0, 0.7])
    value, grad = jax.value_and_grad(ng.entropy)(p)
    assert abs(float(value) - 0.80181855) < 1e-7
    np.testing.assert_allclose(grad, [1.30258512, 0.60943794, 0.0, -0.64332503], rtol=1e-6, atol=1e-7)
    assert np.isnan(float(-jnp.sum(p * jnp.log(p)))), "the seed's NaN should reproduce with plain JAX"


def test_cross_entropy_seed_003_textbook_is_nan_and_safe_op_is_finite() -> None:
    labels = jnp.array([[0.0, 1.0, 0.0]])
    predicted = jnp.array([[0.0, 0.9, 0.1]])
    assert np.isnan(float(-jnp.sum(labels * jnp.log(predicted))))
    value, grad = jax.value_and_grad(lambda q: jnp.sum(ng.cross_entropy_probs(labels, q)))(predicted)
    np.testing.assert_allclose(value, -np.log(0.9), rtol=1e-6)
    np.testing.assert_allclose(grad, [[0.0, -1 / 0.9, 0.0]], rtol=1e-6)


def test_double_where_seed_004_gradient() -> None:
    x = jnp.array([-1.0, 0.0, 1.0])
    naive = jax.grad(lambda v: jnp.sum(jnp.where(v != 0, 1 / v, 0.0)))(x)
    assert np.isnan(naive[1])
    safe = jax.grad(lambda v: jnp.sum(ng.safe_where(v != 0, lambda u: 1 / u, v)))(x)
    assert safe.tolist() == [-1.0, 0.0, -1.0]


def test_log_softmax_instead_of_clipping_trains() -> None:
    logits = jnp.array([[30.0, -30.0, 0.0], [0.0, 0.0, 0.0]])
    labels = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])

    @jax.jit
    def step(z):
        loss, grad = jax.value_and_grad(lambda v: -jnp.sum(labels * ng.log_softmax(v, axis=-1)))(z)
        return z - 0.1 * grad, loss, grad

    for _ in range(20):
        logits, loss, grad = step(logits)
        assert np.all(np.isfinite(grad))
    assert np.isfinite(loss) and loss < 1.1


def test_distance_matrix_story_trains_in_jax() -> None:
    rng = np.random.default_rng(0)
    true = jnp.asarray(rng.standard_normal((10, 3)), jnp.float32)
    start = jnp.asarray(rng.standard_normal((10, 3)), jnp.float32)

    def gram_distances(x):  # the story's sqrt(|x|² + |y|² - 2 x·y): NaN gradient on the diagonal
        sq = jnp.sum(x * x, -1)
        return jnp.sqrt(sq[:, None] + sq[None, :] - 2 * x @ x.T)

    naive = jax.grad(lambda p: jnp.mean(jnp.square(gram_distances(p) - gram_distances(true))))(start)
    assert np.isnan(naive).any()
    target = ng.distance_matrix(true)
    optimizer = optax.adam(0.05)

    @jax.jit
    def step(pred, state):
        loss, grad = jax.value_and_grad(lambda p: jnp.mean(jnp.square(ng.distance_matrix(p) - target)))(pred)
        updates, state = optimizer.update(grad, state)
        return optax.apply_updates(pred, updates), state, loss

    pred, state = start, optimizer.init(start)
    for _ in range(300):
        pred, state, loss = step(pred, state)
    assert np.isfinite(loss) and loss < 0.05
