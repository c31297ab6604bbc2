"""The shared singular-point table on nanguard.tf inside ``tf.function`` and under XLA.

``tests/contract`` runs it eagerly; here every vector runs again, traced into a graph and
compiled with ``jit_compile=True``, value, gradient and second derivative.
"""

from __future__ import annotations

import pytest

from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, TOLERANCE, VECTORS, Vector
from tests.contract.compare import all_finite, assert_close

tf_backend = pytest.importorskip("tests.contract.backends.tf_backend")

MODES = ["function", "jit"]
IDS = [v.id for v in VECTORS]


@pytest.fixture(params=MODES)
def backend(request):
    return tf_backend.TensorFlowBackend(request.param)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_value_and_gradient_in_graph_modes(backend, vector: Vector, dtype: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    assert backend.output_dtype(vector, dtype) == dtype
    value, grads = backend.value_and_grads(vector, dtype)
    assert_close(value, vector.value, rtol, atol, f"{backend.name} {vector.id} value ({dtype})")
    for i, (grad, expected) in enumerate(zip(grads, vector.grads)):
        assert all_finite(grad), f"{vector.id}: non-finite gradient for input {i}: {grad}"
        assert_close(grad, expected, rtol, atol, f"{backend.name} {vector.id} gradient of input {i} ({dtype})")


@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_second_derivative_in_graph_modes(backend, vector: Vector, dtype: str) -> None:
    second = backend.second_derivative(vector, dtype)
    if second is None:
        pytest.skip("first derivative does not depend on the inputs")
    assert all(all_finite(s) for s in second), f"{vector.id}: non-finite second derivative {second}"
    # the same numbers as eagerly: graph rewriting (grappler, XLA) must not change the math
    eager = tf_backend.TensorFlowBackend("eager").second_derivative(vector, dtype)
    rtol, atol = TOLERANCE[dtype]
    for s, e in zip(second, eager):
        assert_close(s, e, rtol * 10, atol * 10, f"{backend.name} {vector.id} second derivative vs eager")
