"""nanguard.jax under JAX's transformations: jit, vmap, grad, jacfwd, jacrev, hessian, at singular points."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.jax.ops.specs import SPECS, Spec

IDS = [s.name for s in SPECS]


def _singular(spec: Spec):
    """The regular inputs with singular points planted: zeros (zero vectors, 0·log 0) and ±1."""
    inputs = [a.copy() for a in spec.regular(np.random.default_rng(0))]
    first = inputs[0]
    if spec.name in ("acos", "asin"):
        first[0, :2] = [1.0, -1.0]
    elif spec.name == "distance_matrix":
        first[0] = inputs[1][0]  # a distance of exactly 0
    else:
        first[0] = 0.0
    return [jnp.asarray(a) for a in inputs]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jacfwd_equals_jacrev_and_is_finite(spec: Spec, x64) -> None:
    xs = _singular(spec)
    argnums = tuple(range(len(xs)))
    forward = jax.jacfwd(spec.safe, argnums)(*xs)
    reverse = jax.jacrev(spec.safe, argnums)(*xs)
    for f, r in zip(forward, reverse):
        assert np.all(np.isfinite(f))
        np.testing.assert_allclose(f, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_vmap_equals_a_python_loop(spec: Spec, x64) -> None:
    batch = [jnp.stack([x, x * 0.5]) for x in _singular(spec)]
    mapped = jax.vmap(spec.safe)(*batch)
    looped = jnp.stack([spec.safe(*[b[i] for b in batch]) for i in range(2)])
    np.testing.assert_allclose(mapped, looped, rtol=1e-12, atol=1e-12)
    # and the gradient of the mapped op, per example
    grads = jax.vmap(jax.grad(lambda *a: jnp.sum(spec.safe(*a))))(*batch)
    assert np.all(np.isfinite(grads))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jit_value_gradient_and_hessian_equal_eager(spec: Spec, x64) -> None:
    xs = _singular(spec)
    argnums = tuple(range(len(xs)))

    def loss(*inputs):
        out = spec.safe(*inputs)
        return jnp.sum(out * jnp.cos(out))  # depends on the value nonlinearly, so d(value) shows too

    def derivatives(*inputs):
        hessians = jax.hessian(loss, argnums)(*inputs)
        return [spec.safe(*inputs), *jax.grad(loss, argnums)(*inputs), *jax.tree_util.tree_leaves(hessians)]

    eager = derivatives(*xs)
    compiled = jax.jit(derivatives)(*xs)
    for e, c in zip(eager, compiled):
        assert np.all(np.isfinite(c))
        np.testing.assert_allclose(c, e, rtol=1e-9, atol=1e-9)
