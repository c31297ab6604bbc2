"""One judge for the contract (``nanguard.core.vectors``), whatever runs it: backend and mode.

``tests/contract`` runs it eagerly on every installed backend; ``tests/tf/ops``,
``tests/jax/ops`` and ``tests/torch/ops`` run the same checks in their other execution modes.
"""

from __future__ import annotations

import math
from typing import Optional

import pytest

from nanguard.core.vectors import SECOND_ORDER_DTYPES, TOLERANCE, Vector
from tests.contract.compare import all_finite, assert_close, assert_within_ulps, shape_and_flat


def applies(backend, vector: Vector, dtype: str) -> None:
    """Skip a dtype the vector or the backend leaves out."""
    if dtype not in vector.dtypes:
        pytest.skip(f"{vector.id} is not judged in {dtype}")
    if dtype not in backend.dtypes:
        pytest.skip(f"{backend.name} has no {dtype}")


def compare(actual, expected, vector: Vector, dtype: str, what: str) -> None:
    if vector.ulps is not None:
        assert_within_ulps(actual, expected, vector.ulps, dtype, what)
    else:
        rtol, atol = TOLERANCE[dtype]
        assert_close(actual, expected, rtol, atol, what)


def check_value_and_grads(backend, vector: Vector, dtype: str) -> None:
    """Value and first derivatives match the vector's expectations for this backend."""
    applies(backend, vector, dtype)
    assert backend.output_dtype(vector, dtype) == dtype
    value, grads = backend.value_and_grads(vector, dtype)
    expected_value, expected_grads = vector.expected(backend.flushes_subnormals(dtype))
    compare(value, expected_value, vector, dtype, f"{backend.name} {vector.id} value ({dtype})")
    assert len(grads) == len(expected_grads)
    for i, (grad, expected) in enumerate(zip(grads, expected_grads)):
        compare(grad, expected, vector, dtype, f"{backend.name} {vector.id} gradient of input {i} ({dtype})")


def expects_finite_gradients(vector: Vector) -> bool:
    return all(all_finite(g) for g in vector.grads)


def check_second_derivative(backend, vector: Vector, dtype: str, reference: Optional[list] = None) -> None:
    """The second derivative is finite (where the first is), equals ``vector.second`` where given,
    and ``reference`` (the same derivative from another mode) where given."""
    assert dtype in SECOND_ORDER_DTYPES
    applies(backend, vector, dtype)
    if not expects_finite_gradients(vector):
        pytest.skip("NaN in: the second derivative is NaN too")
    if dtype in vector.second_overflows:
        pytest.skip(f"the true second derivative overflows {dtype}")
    second = backend.second_derivative(vector, dtype)
    if second is None:
        pytest.skip("first derivative does not depend on the inputs")
    assert all(all_finite(s) for s in second), f"{backend.name} {vector.id}: non-finite second derivative {second}"
    rtol, atol = TOLERANCE[dtype]
    # to the tolerance of the largest entry: a Hessian-vector product's rounding is relative
    # to its size (x·(1/n) for x/n: u₂ = 1 ± 1 ulp leaves 1e13 beside 5e19)
    if vector.second is not None and not (vector.flushed and backend.flushes_subnormals(dtype)):
        for i, (s, e) in enumerate(zip(second, vector.second)):
            assert_close(s, e, 0.0, atol + rtol * _largest(e),
                         f"{backend.name} {vector.id} second derivative of input {i} ({dtype})")
    if reference is not None:
        for s, e in zip(second, reference):
            # graph rewriting (grappler, XLA) must not change the math
            assert_close(s, e, 0.0, 10 * (atol + rtol * _largest(e)),
                         f"{backend.name} {vector.id} second derivative vs eager")


def _largest(data) -> float:
    return max((abs(v) for v in shape_and_flat(data)[1] if math.isfinite(v)), default=0.0)
