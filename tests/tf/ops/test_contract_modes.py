"""The shared contract table on nanguard.tf inside ``tf.function`` and under XLA.

``tests/contract`` runs it eagerly; here every vector runs again, traced into a graph and
compiled with ``jit_compile=True``, value, gradient and second derivative (the latter also
against the eager one: graph rewriting must not change the math).
"""

from __future__ import annotations

import pytest

from nanguard.core.contract_rows import ALL_VECTORS
from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, VECTORS, Vector
from tests.contract.checks import applies, check_second_derivative, check_value_and_grads

tf_backend = pytest.importorskip("tests.contract.backends.tf_backend")

MODES = ["function", "jit"]
IDS = [v.id for v in ALL_VECTORS]


@pytest.fixture(params=MODES)
def backend(request):
    return tf_backend.TensorFlowBackend(request.param)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_value_and_gradient_in_graph_modes(backend, vector: Vector, dtype: str) -> None:
    check_value_and_grads(backend, vector, dtype)


@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_second_derivative_in_graph_modes(backend, vector: Vector, dtype: str) -> None:
    applies(backend, vector, dtype)
    # against eager at the singular points; elsewhere (tiny inputs: terms of 1e50 cancelling to
    # 1e40) two evaluation orders need not round alike, and the finite check is the contract
    eager = tf_backend.TensorFlowBackend("eager").second_derivative(vector, dtype) if vector in VECTORS else None
    check_second_derivative(backend, vector, dtype, reference=eager)
