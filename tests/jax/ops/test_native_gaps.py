"""The measured gaps of native JAX, each beside nanguard.jax: the native op is NaN/inf, the safe one is not."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import entr
from jax.scipy.special import xlogy as native_xlogy

import nanguard.jax as ng

NEG_INF = -jnp.inf


def _finite(tree) -> bool:
    return all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(tree))


def test_xlogy_at_zero_zero() -> None:
    native = jax.grad(native_xlogy, (0, 1))(0.0, 0.0)
    assert not _finite(native)
    assert [float(g) for g in jax.grad(ng.xlogy, (0, 1))(jnp.array(0.0), jnp.array(0.0))] == [0.0, 0.0]


def test_entropy_gradient_at_zero() -> None:
    assert not _finite(jax.grad(lambda p: jnp.sum(entr(p)))(jnp.array([0.0, 0.5])))
    assert jax.grad(ng.entropy)(jnp.array([0.0, 0.5])).tolist()[0] == 0.0


def test_norm_of_zero_vector_and_overflow() -> None:
    assert not _finite(jax.grad(jnp.linalg.norm)(jnp.zeros(3)))
    assert jax.grad(ng.norm)(jnp.zeros(3)).tolist() == [0.0, 0.0, 0.0]
    assert np.isinf(jnp.linalg.norm(jnp.array([3e20, 4e20])))
    assert float(ng.norm(jnp.array([3e20, 4e20]))) == pytest.approx(5e20, rel=1e-6)


def test_sqrt_and_cube_root_gradients_at_zero() -> None:
    assert not _finite(jax.grad(jnp.sqrt)(0.0))
    assert float(jax.grad(ng.sqrt)(jnp.array(0.0))) == 0.0
    assert not _finite(jax.grad(lambda x: jnp.power(x, 1 / 3))(0.0))
    assert float(jax.grad(lambda x: ng.pow(x, 1 / 3))(jnp.array(0.0))) == 0.0


def test_softmax_of_an_all_minus_inf_row() -> None:
    row = jnp.full((3,), NEG_INF)
    assert not _finite(jax.nn.softmax(row))
    assert ng.softmax(row).tolist() == [0.0, 0.0, 0.0]
    assert jax.grad(lambda x: ng.softmax(x)[0])(row).tolist() == [0.0, 0.0, 0.0]


def test_log_softmax_where_placeholder() -> None:
    x, keep = jnp.array([2.0, 0.0, 5.0]), jnp.array([True, True, False])
    assert float(jax.nn.log_softmax(x, where=keep)[2]) == NEG_INF
    assert float(ng.log_softmax(x, where=keep)[2]) == 0.0  # the table's placeholder
    target = jnp.array([1.0, 0.0, 0.0])
    assert _finite(jax.grad(lambda v: -jnp.sum(target * ng.log_softmax(v, where=keep)))(x))


def test_logaddexp_of_two_minus_infs() -> None:
    assert not _finite(jax.grad(jnp.logaddexp, (0, 1))(NEG_INF, NEG_INF))
    grads = jax.grad(ng.logaddexp, (0, 1))(jnp.array(NEG_INF), jnp.array(NEG_INF))
    assert [float(g) for g in grads] == [0.0, 0.0]


def test_std_of_constant_and_single_element_slices() -> None:
    assert not _finite(jax.grad(jnp.std)(jnp.ones(3)))
    assert not _finite(jnp.std(jnp.ones(1), ddof=1))
    assert jax.grad(lambda x: ng.std(x, correction=0))(jnp.ones(3)).tolist() == [0.0, 0.0, 0.0]
    assert float(ng.std(jnp.ones(1), ddof=1)) == 0.0 and jax.grad(ng.std)(jnp.ones(1)).tolist() == [0.0]


def test_arccos_gradient_at_one() -> None:
    assert not _finite(jax.grad(jnp.arccos)(1.0))
    assert float(jax.grad(ng.acos)(jnp.array(1.0))) == 0.0


def test_mean_where_of_an_empty_row() -> None:
    x, keep = jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([[True, False], [False, False]])
    assert not _finite(jnp.mean(x, axis=1, where=keep))
    assert ng.masked_mean(x, where=keep, axis=1).tolist() == [1.0, 0.0]
    assert _finite(jax.grad(lambda v: jnp.sum(ng.masked_mean(v, keep, axis=1)))(x))


def test_cosine_similarity_at_a_zero_vector() -> None:
    def textbook(a, b):
        return jnp.sum(a * b) / (jnp.linalg.norm(a) * jnp.linalg.norm(b))

    zero, other = jnp.zeros(2), jnp.ones(2)
    assert not _finite(textbook(zero, other))
    assert float(ng.cosine_similarity(zero, other)) == 0.0
    assert _finite(jax.grad(ng.cosine_similarity, (0, 1))(zero, other))


def test_distance_matrix_diagonal() -> None:
    x = jnp.array([[0.0, 0.0], [3.0, 4.0]])
    native = jax.grad(lambda p: jnp.sum(jnp.linalg.norm(p[:, None] - p[None], axis=-1)))(x)
    assert not _finite(native)
    np.testing.assert_allclose(jax.grad(lambda p: jnp.sum(ng.distance_matrix(p)))(x), [[-1.2, -1.6], [1.2, 1.6]],
                               rtol=1e-6)
