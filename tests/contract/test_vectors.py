"""The contract table itself: well-formed, covering every op, tokens resolved per dtype."""

from __future__ import annotations

import math

import pytest

from nanguard.core import contract_rows, vectors
from nanguard.core.contract_rows import ALL_VECTORS
from tests.contract.compare import shape_and_flat


def test_every_op_of_the_catalogue_has_a_vector_and_no_vector_names_an_unknown_op() -> None:
    assert {v.op for v in vectors.VECTORS} == set(vectors.OPS)
    assert {v.op for v in ALL_VECTORS} <= set(vectors.OPS)


def test_vector_ids_are_unique() -> None:
    ids = [v.id for v in ALL_VECTORS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("vector", ALL_VECTORS, ids=[v.id for v in ALL_VECTORS])
def test_each_vector_has_one_gradient_per_input_of_the_input_shape(vector) -> None:
    assert len(vector.grads) == len(vector.inputs)
    expectations = [(vector.value, vector.grads)]
    if vector.flushed is not None:
        expectations.append((vector.flushed.value, vector.flushed.grads))
    for value, grads in expectations:
        assert shape_and_flat(value)[0] == shape_and_flat(vector.value)[0]
        for x, g in zip(vector.inputs_for(vector.dtypes[-1]), grads):
            assert shape_and_flat(x)[0] == shape_and_flat(g)[0]
    if vector.second is not None:
        for x, s in zip(vector.inputs_for(vector.dtypes[-1]), vector.second):
            assert shape_and_flat(x)[0] == shape_and_flat(s)[0]


@pytest.mark.parametrize("vector", vectors.VECTORS, ids=[v.id for v in vectors.VECTORS])
def test_singular_points_have_finite_gradients(vector) -> None:
    assert all(math.isfinite(g) for grad in vector.grads for g in shape_and_flat(grad)[1])


@pytest.mark.parametrize("vector", contract_rows.NAN_VECTORS, ids=[v.id for v in contract_rows.NAN_VECTORS])
def test_nan_rows_hold_nan_and_see_every_output(vector) -> None:
    assert vector.loss == "sum"
    assert any(math.isnan(x) for x in vector.inputs_for("float32") for x in shape_and_flat(x)[1])
    assert any(math.isnan(x) for x in shape_and_flat(vector.value)[1])


def test_ulp_tokens_depend_on_the_dtype() -> None:
    assert vectors.resolve("1+2ulp", "float16") == 1 + 2 * 2.0**-10
    assert vectors.resolve("-1-2ulp", "bfloat16") == -(1 + 2 * 2.0**-7)
    assert vectors.resolve(["1-1ulp", 3.0], "float64") == [1 - 2.0**-52, 3.0]


def test_ulp_is_the_spacing_of_the_dtype() -> None:
    assert vectors.ulp(1.0, "float32") == 2.0**-23
    assert vectors.ulp(1.5, "float64") == 2.0**-52
    assert vectors.ulp(0.75, "float16") == 2.0**-11
    assert vectors.ulp(0.0, "float32") == 2.0**-149  # the subnormal spacing
    assert vectors.ulp(1e-40, "float32") == 2.0**-149


@pytest.mark.parametrize("token", ["2+1ulp", "1+ulp", "abc"])
def test_unknown_tokens_are_refused(token) -> None:
    with pytest.raises(ValueError, match="unknown token"):
        vectors.resolve(token, "float32")


def test_a_vector_with_an_unknown_loss_or_dtype_is_refused() -> None:
    with pytest.raises(ValueError, match="loss"):
        vectors.Vector("x", "sqrt", ([1.0],), [1.0], ([0.5],), loss="mean")
    with pytest.raises(ValueError, match="dtypes"):
        vectors.Vector("x", "sqrt", ([1.0],), [1.0], ([0.5],), dtypes=("float8",))


@pytest.mark.parametrize("vector", contract_rows.ACCURACY_VECTORS, ids=[v.id for v in contract_rows.ACCURACY_VECTORS])
def test_accuracy_references_are_exact_to_half_a_float64_ulp(vector) -> None:
    """The stored references against mpmath at 200 bits; inputs exact in every dtype of the row."""
    mpmath = pytest.importorskip("mpmath")
    import numpy as np

    mpmath.mp.prec = 200
    (xs,) = vector.inputs_for("float64")
    for dtype in vector.dtypes:
        assert [float(np.asarray(x, dtype)) for x in xs] == xs, f"{vector.id}: inputs not exact in {dtype}"
    if vector.op == "softplus":
        beta = mpmath.mpf(vector.kwargs.get("beta", 1.0))
        value = [mpmath.log1p(mpmath.exp(beta * x)) / beta for x in map(mpmath.mpf, xs)]
        grad = [1 / (1 + mpmath.exp(-beta * x)) for x in map(mpmath.mpf, xs)]
    else:
        exact = list(map(mpmath.mpf, xs))
        mean = sum(exact) / len(exact)
        var = sum((x - mean) ** 2 for x in exact) / (len(exact) - 1)
        if vector.op == "var":
            value, grad = var, [2 * (x - mean) / (len(exact) - 1) for x in exact]
        else:
            std = mpmath.sqrt(var)
            value, grad = std, [(x - mean) / ((len(exact) - 1) * std) for x in exact]
    for got, want in ((vector.value, value), (vector.grads[0], grad)):
        got_flat, want_flat = shape_and_flat(got)[1], [float(w) for w in (want if isinstance(want, list) else [want])]
        for g, w in zip(got_flat, want_flat):
            assert abs(g - w) <= 0.5 * vectors.ulp(w, "float64"), f"{vector.id}: stored {g!r}, mpmath {w!r}"
