"""The contract of ``nanguard.core.vectors`` on every installed backend, in every dtype.

For each vector of the whole table (singular points, NaN policy, accuracy, tiny, huge and
subnormal inputs): the value and the gradient of the vector's loss match the expectation
written from the math (the ``flushed`` one on a backend that reads subnormals as 0), the
second derivative is finite and matches where the vector gives it, and where a backend has
two backward paths (torch: a fast first-order one and a differentiable one) both give the
same numbers.
"""

from __future__ import annotations

import pytest

from nanguard.core.contract_rows import ALL_VECTORS
from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, Vector
from tests.contract.checks import applies, check_second_derivative, check_value_and_grads
from tests.contract.compare import assert_close

IDS = [v.id for v in ALL_VECTORS]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_value_and_gradient(backend, vector: Vector, dtype: str) -> None:
    check_value_and_grads(backend, vector, dtype)


@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_second_derivative(backend, vector: Vector, dtype: str) -> None:
    check_second_derivative(backend, vector, dtype)


@pytest.mark.parametrize("vector", ALL_VECTORS, ids=IDS)
def test_fast_and_differentiable_backward_agree(backend, vector: Vector) -> None:
    if not backend.two_backward_paths:
        pytest.skip(f"{backend.name} has one backward path")
    applies(backend, vector, "float64")
    _, fast = backend.value_and_grads(vector, "float64", create_graph=False)
    _, slow = backend.value_and_grads(vector, "float64", create_graph=True)
    for f, s in zip(fast, slow):
        assert_close(f, s, 1e-12, 1e-12, f"{vector.id}: fast vs differentiable backward")
