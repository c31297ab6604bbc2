"""The shared singular-point table on nanguard.jax under ``jit``, ``vmap`` and ``jax.hessian``.

``tests/contract`` runs it eagerly; here every vector runs again compiled, mapped over a
batch, and with its second derivatives taken from the full Hessian.
"""

from __future__ import annotations

import pytest

from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, TOLERANCE, VECTORS, Vector
from tests.contract.backends import jax_backend
from tests.contract.compare import all_finite, assert_close

IDS = [v.id for v in VECTORS]
EAGER = jax_backend.JaxBackend("eager")


@pytest.fixture(params=["jit", "vmap"])
def backend(request):
    return jax_backend.JaxBackend(request.param)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_value_and_gradient_under_jit_and_vmap(backend, vector: Vector, dtype: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    assert backend.output_dtype(vector, dtype) == dtype
    value, grads = backend.value_and_grads(vector, dtype)
    assert_close(value, vector.value, rtol, atol, f"{backend.name} {vector.id} value ({dtype})")
    for i, (grad, expected) in enumerate(zip(grads, vector.grads)):
        assert all_finite(grad), f"{vector.id}: non-finite gradient for input {i}: {grad}"
        assert_close(grad, expected, rtol, atol, f"{backend.name} {vector.id} gradient of input {i} ({dtype})")


@pytest.mark.parametrize("mode", ["jit", "vmap", "hessian"])
@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_second_derivative_under_each_transform_equals_eager(mode: str, vector: Vector, dtype: str) -> None:
    second = jax_backend.JaxBackend(mode).second_derivative(vector, dtype)
    assert all(all_finite(s) for s in second), f"{vector.id}: non-finite second derivative {second}"
    eager = EAGER.second_derivative(vector, dtype)
    rtol, atol = TOLERANCE[dtype]
    for s, e in zip(second, eager):
        assert_close(s, e, rtol * 10, atol * 10, f"jax-{mode} {vector.id} second derivative vs eager")
