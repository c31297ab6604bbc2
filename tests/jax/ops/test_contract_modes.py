"""The shared contract table on nanguard.jax under ``jit``, ``vmap`` and ``jax.hessian``.

``tests/contract`` runs it eagerly; here every vector runs again compiled, mapped over a
batch, and with its second derivatives taken from the full Hessian (and compared with the
eager ones).
"""

from __future__ import annotations

import pytest

from nanguard.core.contract_rows import ALL_VECTORS
from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, VECTORS, Vector
from tests.contract.backends import jax_backend
from tests.contract.checks import applies, check_second_derivative, check_value_and_grads

IDS = [v.id for v in ALL_VECTORS]
EAGER = jax_backend.JaxBackend("eager")


@pytest.fixture(params=["jit", "vmap"])
def backend(request):
    return jax_backend.JaxBackend(request.param)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_value_and_gradient_under_jit_and_vmap(backend, vector: Vector, dtype: str) -> None:
    check_value_and_grads(backend, vector, dtype)


@pytest.mark.parametrize("mode", ["jit", "vmap", "hessian"])
@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_second_derivative_under_each_transform_equals_eager(mode: str, vector: Vector, dtype: str) -> None:
    backend = jax_backend.JaxBackend(mode)
    applies(backend, vector, dtype)
    # against eager at the singular points; elsewhere (tiny inputs: terms of 1e50 cancelling to
    # 1e40) two evaluation orders need not round alike, and the finite check is the contract
    eager = EAGER.second_derivative(vector, dtype) if vector in VECTORS else None
    check_second_derivative(backend, vector, dtype, reference=eager)
