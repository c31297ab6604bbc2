"""Bad input gets a clear error, raised before any computation."""

from __future__ import annotations

import pytest
import torch

import nanguard as ng

X = torch.rand(3, 4)
INT = torch.arange(12).reshape(3, 4)
MASK = torch.ones(3, 4, dtype=torch.bool)

UNARY = [
    ("softplus", lambda t: ng.softplus(t)),
    ("logsumexp", lambda t: ng.logsumexp(t, dim=1)),
    ("softmax", lambda t: ng.softmax(t, dim=1)),
    ("log_softmax", lambda t: ng.log_softmax(t, dim=1)),
    ("entropy", lambda t: ng.entropy(t)),
    ("sqrt", lambda t: ng.sqrt(t)),
    ("pow", lambda t: ng.pow(t, 0.5)),
    ("norm", lambda t: ng.norm(t)),
    ("normalize", lambda t: ng.normalize(t)),
    ("distance_matrix", lambda t: ng.distance_matrix(t)),
    ("std", lambda t: ng.std(t)),
    ("var", lambda t: ng.var(t)),
    ("acos", lambda t: ng.acos(t)),
    ("asin", lambda t: ng.asin(t)),
    ("masked_mean", lambda t: ng.masked_mean(t, MASK, dim=1)),
    ("safe_where", lambda t: ng.safe_where(MASK, torch.log, t)),
]


@pytest.mark.parametrize("name,call", UNARY, ids=[n for n, _ in UNARY])
def test_integer_tensor_is_a_type_error(name, call) -> None:
    with pytest.raises(TypeError, match=rf"nanguard\.{name}: .*floating-point.*int64"):
        call(INT)


@pytest.mark.parametrize("name,call", UNARY, ids=[n for n, _ in UNARY])
def test_non_tensor_is_a_type_error(name, call) -> None:
    with pytest.raises(TypeError, match=rf"nanguard\.{name}: .*torch\.Tensor"):
        call([[1.0, 2.0]])


@pytest.mark.parametrize(
    "call",
    [
        lambda: ng.xlogy(X, INT),
        lambda: ng.logaddexp(INT, X),
        lambda: ng.div(X, INT),
        lambda: ng.cross_entropy_probs(INT, X),
        lambda: ng.cosine_similarity(X, INT),
    ],
)
def test_binary_ops_refuse_integer_operands(call) -> None:
    with pytest.raises(TypeError, match="floating-point"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: ng.logsumexp(X, dim=2),
        lambda: ng.softmax(X, dim=-3),
        lambda: ng.log_softmax(X, dim=5),
        lambda: ng.entropy(X, dim=2),
        lambda: ng.norm(X, dim=(0, 2)),
        lambda: ng.std(X, dim=9),
        lambda: ng.var(X, dim=-3),
        lambda: ng.masked_mean(X, MASK, dim=4),
        lambda: ng.normalize(X, dim=2),
        lambda: ng.cross_entropy_probs(X, X, dim=3),
        lambda: ng.cosine_similarity(X, X, dim=2),
    ],
)
def test_out_of_range_dim_is_a_value_error(call) -> None:
    with pytest.raises(ValueError, match="out of range"):
        call()


@pytest.mark.parametrize("dim", [1.0, "1", None, True])
def test_softmax_dim_must_be_int(dim) -> None:
    with pytest.raises(TypeError, match="dim"):
        ng.softmax(X, dim=dim)


def test_repeated_dim_is_refused() -> None:
    with pytest.raises(ValueError, match="repeats"):
        ng.norm(X, dim=(1, -1))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: ng.softmax(X, dim=1, mask=m),
        lambda m: ng.log_softmax(X, dim=1, mask=m),
        lambda m: ng.logsumexp(X, dim=1, mask=m),
        lambda m: ng.masked_mean(X, m, dim=1),
    ],
)
def test_mask_shape_and_dtype_are_checked(call) -> None:
    with pytest.raises(ValueError, match=r"does not broadcast to the input's shape \(3, 4\)"):
        call(torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):
        call(torch.ones(2, 3, 4, dtype=torch.bool))  # would enlarge the result
    with pytest.raises(TypeError, match="bool tensor"):
        call(torch.ones(3, 4))


def test_shapes_that_do_not_broadcast() -> None:
    with pytest.raises(ValueError, match="do not broadcast"):
        ng.xlogy(torch.rand(3), torch.rand(4))
    with pytest.raises(ValueError, match="do not broadcast"):
        ng.div(torch.rand(3), torch.rand(2, 4))
    with pytest.raises(ValueError, match=r"\(5,\) \(`cond`\) and \(3,\) \(`x`\) do not broadcast"):
        ng.safe_where(torch.ones(5, dtype=torch.bool), torch.log, torch.rand(3))


def test_distance_matrix_shapes() -> None:
    with pytest.raises(ValueError, match="rows, features"):
        ng.distance_matrix(torch.rand(5))
    with pytest.raises(ValueError, match="same number of features"):
        ng.distance_matrix(torch.rand(5, 3), torch.rand(4, 2))
    with pytest.raises(ValueError, match="batch dimensions"):
        ng.distance_matrix(torch.rand(2, 5, 3), torch.rand(3, 4, 3))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: ng.softplus(X, beta=0.0), "beta.*> 0"),
        (lambda: ng.softplus(X, beta=-1), "beta.*> 0"),
        (lambda: ng.softplus(X, beta=float("nan")), "beta.*finite"),
        (lambda: ng.pow(X, 0.0), "exponent.*> 0"),
        (lambda: ng.pow(X, -0.5), "exponent.*> 0"),
        (lambda: ng.div(X, X, fill=float("inf")), "fill.*finite"),
        (lambda: ng.std(X, correction=-1), "correction"),
        (lambda: ng.var(X, correction=float("inf")), "correction"),
    ],
)
def test_argument_ranges(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: ng.softplus(X, beta="1"), "beta.*number"),
        (lambda: ng.pow(X, torch.tensor(0.5)), "exponent.*number"),
        (lambda: ng.div(X, X, fill=None), "fill.*number"),
        (lambda: ng.safe_where(X > 0, "log", X), "fn.*callable"),
        (lambda: ng.safe_where(X, torch.log, X), "cond.*bool"),
        (lambda: ng.safe_where(X > 0, lambda v: 1.0, X), "return a tensor"),
        (lambda: ng.safe_where(X > 0, torch.log, X, other="zero"), "other"),
        (lambda: ng.std(X, correction=True), "correction"),
    ],
)
def test_argument_types(call, match) -> None:
    with pytest.raises(TypeError, match=match):
        call()


def test_scalar_second_operand_is_accepted() -> None:
    assert ng.div(torch.tensor([1.0, 2.0]), 0.0).tolist() == [0.0, 0.0]
    assert ng.logaddexp(torch.tensor([0.0]), 0.0).item() == pytest.approx(0.6931471805599453)
    assert ng.xlogy(torch.tensor([0.0, 2.0]), 1.0).tolist() == [0.0, 0.0]
