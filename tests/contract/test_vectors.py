"""The contract table itself: well-formed, covering every op, tokens resolved per dtype."""

from __future__ import annotations

import math

import pytest

from nanguard.core import vectors
from tests.contract.compare import shape_and_flat


def test_every_op_of_the_catalogue_has_a_vector_and_no_vector_names_an_unknown_op() -> None:
    used = {v.op for v in vectors.VECTORS}
    assert used == set(vectors.OPS)


def test_vector_ids_are_unique() -> None:
    ids = [v.id for v in vectors.VECTORS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("vector", vectors.VECTORS, ids=[v.id for v in vectors.VECTORS])
def test_each_vector_has_one_gradient_per_input_of_the_input_shape(vector) -> None:
    assert len(vector.grads) == len(vector.inputs)
    for x, g in zip(vector.inputs_for("float64"), vector.grads):
        assert shape_and_flat(x)[0] == shape_and_flat(g)[0]
    assert all(math.isfinite(g) for grad in vector.grads for g in shape_and_flat(grad)[1])


def test_ulp_tokens_depend_on_the_dtype() -> None:
    assert vectors.resolve("1+2ulp", "float16") == 1 + 2 * 2.0**-10
    assert vectors.resolve("-1-2ulp", "bfloat16") == -(1 + 2 * 2.0**-7)
    assert vectors.resolve(["1-1ulp", 3.0], "float64") == [1 - 2.0**-52, 3.0]


@pytest.mark.parametrize("token", ["2+1ulp", "1+ulp", "abc"])
def test_unknown_tokens_are_refused(token) -> None:
    with pytest.raises(ValueError, match="unknown token"):
        vectors.resolve(token, "float32")

