"""One table of singular points per op: inputs, expected value, expected gradient, all dtypes.

Each row is checked in float16, bfloat16, float32 and float64: the value and the gradient of
``sum(out * w)`` (finite outputs only) must match the expectation written here from the
math (not from running the op), and the second derivative must be finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Union

import pytest
import torch

import nanguard as ng
from tests.torch.ops.helpers import DTYPE_IDS, DTYPES, all_finite, assert_close, value_and_grads

INF = float("inf")
NAN = float("nan")
LN2 = math.log(2.0)
SIG1 = 1 / (1 + math.exp(-1))
R2 = 1 / math.sqrt(2)

Inputs = Union[Sequence, Callable[[torch.dtype], Sequence]]


@dataclass
class Row:
    id: str
    fn: Callable[..., torch.Tensor]
    inputs: List[Inputs]
    value: object
    grads: List[Optional[object]]
    weights: Optional[Sequence] = None
    differentiable: List[bool] = field(default_factory=list)


def one_plus_ulps(dtype: torch.dtype, k: int = 2) -> float:
    """A value k ulps above 1 in dtype: a rounding error outside [-1, 1]."""
    return float(torch.tensor(1.0, dtype=torch.float64) + k * torch.finfo(dtype).eps)


M_KEEP = torch.tensor([[True, True, False], [False, False, False]])

ROWS = [
    # softplus: no singular point, but the overflow region and the seed
    Row("softplus/seed", ng.softplus, [[0.0, 1.0, 100.0]], [LN2, 1.3132616875182228, 100.0], [[0.5, SIG1, 1.0]]),
    Row("softplus/large", ng.softplus, [[1e4, -1e4, -0.0]], [1e4, 0.0, LN2], [[1.0, 0.0, 0.5]]),
    Row("softplus/beta", lambda x: ng.softplus(x, beta=2.0), [[0.0, 50.0]], [LN2 / 2, 50.0], [[0.5, 1.0]]),
    # logaddexp: both -inf
    Row("logaddexp/-inf", ng.logaddexp, [[-INF, -INF, 0.0], [-INF, 0.0, 0.0]], [-INF, 0.0, LN2],
        [[0.0, 0.0, 0.5], [0.0, 1.0, 0.5]]),
    # logsumexp: an all -inf row, a masked row, NaN hidden by the mask
    Row("logsumexp/-inf-row", lambda x: ng.logsumexp(x, dim=1), [[[-INF, -INF, -INF], [0.0, -INF, 0.0]]],
        [-INF, LN2], [[[0.0, 0.0, 0.0], [0.5, 0.0, 0.5]]]),
    Row("logsumexp/mask", lambda x: ng.logsumexp(x, dim=1, mask=M_KEEP), [[[1.0, 2.0, NAN], [INF, 3.0, 4.0]]],
        [2.3132616875182228, -INF], [[[1 - SIG1, SIG1, 0.0], [0.0, 0.0, 0.0]]]),
    # softmax: masked and all -inf rows are zeros with zero gradient
    Row("softmax/-inf", lambda x: ng.softmax(x, dim=-1), [[[0.0, math.log(3.0), -INF], [-INF, -INF, -INF]]],
        [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]], [[[-0.1875, 0.1875, 0.0], [0.0, 0.0, 0.0]]],
        weights=[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]),
    Row("softmax/mask", lambda x: ng.softmax(x, dim=-1, mask=M_KEEP), [[[0.0, math.log(3.0), NAN], [1.0, 2.0, INF]]],
        [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]], [[[-0.1875, 0.1875, 0.0], [0.0, 0.0, 0.0]]],
        weights=[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]),
    # log_softmax: 0 placeholder at masked entries, -inf for -inf scores
    Row("log_softmax/mask", lambda x: ng.log_softmax(x, dim=-1, mask=M_KEEP),
        [[[0.0, math.log(3.0), 5.0], [1.0, 2.0, 3.0]]],
        [[-math.log(4.0), math.log(0.75), 0.0], [0.0, 0.0, 0.0]], [[[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]]]),
    Row("log_softmax/-inf", lambda x: ng.log_softmax(x, dim=-1), [[[0.0, math.log(3.0), -INF], [-INF, -INF, -INF]]],
        [[-math.log(4.0), math.log(0.75), -INF], [-INF, -INF, -INF]], [[[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]]]),
    # xlogy: 0 * log 0
    Row("xlogy/zeros", ng.xlogy, [[0.0, 0.0, 1.0, 2.0, -0.0], [0.0, 1.0, 1.0, math.e, math.e]],
        [0.0, 0.0, 0.0, 2.0, 0.0], [[0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 2 / math.e, 0.0]]),
    # entropy: the seed and degenerate distributions
    Row("entropy/seed", ng.entropy, [[0.1, 0.2, 0.0, 0.7]], -sum(p * math.log(p) for p in (0.1, 0.2, 0.7)),
        [[-(math.log(0.1) + 1), -(math.log(0.2) + 1), 0.0, -(math.log(0.7) + 1)]]),
    Row("entropy/one-hot", ng.entropy, [[[1.0, 0.0], [0.0, 0.0]]], [0.0, 0.0], [[[-1.0, 0.0], [0.0, 0.0]]]),
    Row("cross_entropy_probs/zeros", ng.cross_entropy_probs, [[0.0, 1.0, 0.0], [0.0, 0.9, 0.1]],
        -math.log(0.9), [[0.0, -math.log(0.9), -math.log(0.1)], [0.0, -1 / 0.9, 0.0]]),
    # sqrt and pow at 0 and for tiny negatives
    Row("sqrt/zero", ng.sqrt, [[0.0, -0.0, -1e-9, 4.0]], [0.0, 0.0, 0.0, 2.0], [[0.0, 0.0, 0.0, 0.25]]),
    Row("pow/cube-root", lambda x: ng.pow(x, 1 / 3), [[0.0, 8.0, -1.0]], [0.0, 2.0, 0.0], [[0.0, 1 / 12, 0.0]]),
    Row("pow/p>1", lambda x: ng.pow(x, 2.5), [[0.0, 4.0]], [0.0, 32.0], [[0.0, 20.0]]),
    # norms at the zero vector
    Row("norm/zero", lambda x: ng.norm(x, dim=-1), [[[0.0, 0.0], [3.0, 4.0]]], [0.0, 5.0], [[[0.0, 0.0], [0.6, 0.8]]]),
    Row("norm/all", ng.norm, [[0.0, -0.0, 0.0]], 0.0, [[0.0, 0.0, 0.0]]),
    Row("normalize/zero", ng.normalize, [[[0.0, 0.0], [3.0, 4.0]]], [[0.0, 0.0], [0.6, 0.8]],
        [[[0.0, 0.0], [-0.064, 0.048]]], weights=[[1.0, 2.0], [1.0, 2.0]]),
    Row("cosine_similarity/zero", ng.cosine_similarity, [[[0.0, 0.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]],
        [0.0, R2], [[[0.0, 0.0], [0.0, R2]], [[0.0, 0.0], [R2 / 2, -R2 / 2]]]),
    Row("distance_matrix/diagonal", ng.distance_matrix, [[[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]]],
        [[0.0, 5.0, 0.0], [5.0, 0.0, 5.0], [0.0, 5.0, 0.0]], [[[-1.2, -1.6], [2.4, 3.2], [-1.2, -1.6]]]),
    Row("distance_matrix/xy", ng.distance_matrix, [[[1.0, 1.0]], [[1.0, 1.0], [4.0, 5.0]]], [[0.0, 5.0]],
        [[[-0.6, -0.8]], [[0.0, 0.0], [0.6, 0.8]]]),
    # div and masked_mean: division by zero
    Row("div/zero", ng.div, [[1.0, 1.0, 0.0, -3.0], [2.0, 0.0, 0.0, -0.0]], [0.5, 0.0, 0.0, 0.0],
        [[0.5, 0.0, 0.0, 0.0], [-0.25, 0.0, 0.0, 0.0]]),
    Row("div/fill", lambda a, b: ng.div(a, b, fill=7.0), [[1.0, 1.0], [2.0, 0.0]], [0.5, 7.0],
        [[0.5, 0.0], [-0.25, 0.0]]),
    Row("masked_mean/empty", lambda x: ng.masked_mean(x, M_KEEP, dim=1), [[[1.0, 3.0, NAN], [5.0, 7.0, INF]]],
        [2.0, 0.0], [[[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]]),
    # std and var: constant slices and too few elements
    Row("std/constant", ng.std, [[2.0, 2.0, 2.0]], 0.0, [[0.0, 0.0, 0.0]]),
    Row("std/one", ng.std, [[5.0]], 0.0, [[0.0]]),
    Row("std/two", ng.std, [[1.0, 3.0]], math.sqrt(2.0), [[-R2, R2]]),
    Row("var/one", lambda x: ng.var(x, dim=0), [[5.0]], 0.0, [[0.0]]),
    Row("var/constant", ng.var, [[2.0, 2.0, 2.0]], 0.0, [[0.0, 0.0, 0.0]]),
    Row("var/rows", lambda x: ng.var(x, dim=1, correction=2), [[[1.0, 3.0], [4.0, 4.0]]], [0.0, 0.0],
        [[[0.0, 0.0], [0.0, 0.0]]]),
    # acos / asin at ±1 and a rounding error outside
    Row("acos/ends", ng.acos, [lambda dt: [1.0, -1.0, 0.0, one_plus_ulps(dt)]], [0.0, math.pi, math.pi / 2, 0.0],
        [[0.0, 0.0, -1.0, 0.0]]),
    Row("asin/ends", ng.asin, [lambda dt: [1.0, -1.0, 0.0, -one_plus_ulps(dt)]],
        [math.pi / 2, -math.pi / 2, 0.0, -math.pi / 2], [[0.0, 0.0, 1.0, 0.0]]),
    # safe_where: the seed's 1/x
    Row("safe_where/seed", lambda x: ng.safe_where(x != 0, lambda v: 1 / v, x), [[-1.0, 0.0, 1.0]],
        [-1.0, 0.0, 1.0], [[-1.0, 0.0, -1.0]]),
    Row("safe_where/log", lambda x: ng.safe_where(x > 0, torch.log, x, other=lambda v: v), [[0.0, -2.0, math.e]],
        [0.0, -2.0, 1.0], [[1.0, 1.0, 1 / math.e]]),
]


def _make_inputs(row: Row, dtype: torch.dtype) -> List[torch.Tensor]:
    tensors = []
    for spec in row.inputs:
        values = spec(dtype) if callable(spec) else spec
        tensors.append(torch.tensor(values, dtype=dtype).requires_grad_())
    return tensors


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_value_and_gradient_at_singular_points(row: Row, dtype: torch.dtype) -> None:
    inputs = _make_inputs(row, dtype)
    weights = None if row.weights is None else torch.tensor(row.weights)
    out, grads = value_and_grads(row.fn, inputs, weights)
    assert out.dtype == dtype
    assert_close(out, row.value, dtype, f"{row.id} value")
    for i, (grad, expected) in enumerate(zip(grads, row.grads)):
        assert all_finite([grad]), f"{row.id}: non-finite gradient for input {i}: {grad}"
        assert_close(grad, expected, dtype, f"{row.id} gradient of input {i}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_second_derivative_is_finite_at_singular_points(row: Row, dtype: torch.dtype) -> None:
    inputs = _make_inputs(row, dtype)
    weights = None if row.weights is None else torch.tensor(row.weights)
    _, grads = value_and_grads(row.fn, inputs, weights, create_graph=True)
    # differentiate a generic combination of the first derivatives once more
    second_loss = sum((g * torch.linspace(0.5, 1.5, g.numel(), dtype=dtype).reshape(g.shape)).sum()
                      for g in grads if g.requires_grad)
    if not isinstance(second_loss, torch.Tensor):
        pytest.skip("first derivative does not depend on the inputs")
    second = torch.autograd.grad(second_loss, inputs, allow_unused=True)
    second = [torch.zeros_like(t) if s is None else s for s, t in zip(second, inputs)]
    assert all_finite(second), f"{row.id}: non-finite second derivative {second}"


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_fast_and_differentiable_backward_agree(row: Row) -> None:
    """Each op has a fast first-order backward and a create_graph one: same numbers."""
    inputs = _make_inputs(row, torch.float64)
    weights = None if row.weights is None else torch.tensor(row.weights)
    _, fast = value_and_grads(row.fn, inputs, weights, create_graph=False)
    _, slow = value_and_grads(row.fn, inputs, weights, create_graph=True)
    for f, s in zip(fast, slow):
        torch.testing.assert_close(f, s.detach(), rtol=1e-12, atol=1e-12)
