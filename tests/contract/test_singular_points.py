"""The contract of ``nanguard.core.vectors`` on every installed backend, in every dtype.

For each vector: the value and the gradient of ``sum(out * w)`` (finite outputs only) match
the expectation written from the math, every gradient entry is finite, the second derivative
is finite, and where a backend has two backward paths (torch: a fast first-order one and a
differentiable one) both give the same numbers.
"""

from __future__ import annotations

import pytest

from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, TOLERANCE, VECTORS, Vector
from tests.contract.compare import all_finite, assert_close

IDS = [v.id for v in VECTORS]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_value_and_gradient_at_singular_points(backend, vector: Vector, dtype: str) -> None:
    if dtype not in backend.dtypes:
        pytest.skip(f"{backend.name} has no {dtype}")
    rtol, atol = TOLERANCE[dtype]
    assert backend.output_dtype(vector, dtype) == dtype
    value, grads = backend.value_and_grads(vector, dtype)
    assert_close(value, vector.value, rtol, atol, f"{backend.name} {vector.id} value ({dtype})")
    assert len(grads) == len(vector.grads)
    for i, (grad, expected) in enumerate(zip(grads, vector.grads)):
        assert all_finite(grad), f"{vector.id}: non-finite gradient for input {i}: {grad}"
        assert_close(grad, expected, rtol, atol, f"{backend.name} {vector.id} gradient of input {i} ({dtype})")


@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_second_derivative_is_finite_at_singular_points(backend, vector: Vector, dtype: str) -> None:
    second = backend.second_derivative(vector, dtype)
    if second is None:
        pytest.skip("first derivative does not depend on the inputs")
    assert all(all_finite(s) for s in second), f"{vector.id}: non-finite second derivative {second}"


@pytest.mark.parametrize("vector", VECTORS, ids=IDS)
def test_fast_and_differentiable_backward_agree(backend, vector: Vector) -> None:
    if not backend.two_backward_paths:
        pytest.skip(f"{backend.name} has one backward path")
    _, fast = backend.value_and_grads(vector, "float64", create_graph=False)
    _, slow = backend.value_and_grads(vector, "float64", create_graph=True)
    for f, s in zip(fast, slow):
        assert_close(f, s, 1e-12, 1e-12, f"{vector.id}: fast vs differentiable backward")
