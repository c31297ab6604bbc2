"""The safe ops' contract as data: one table for every backend.

Each :class:`Vector` names a safe op (by its catalogue name, the same in ``nanguard.torch``,
``nanguard.tf`` and ``nanguard.jax``), the inputs, the keyword arguments, the expected value
and the expected gradient of the loss ``sum(out * weights)``. With ``loss="finite"`` (the
singular points' default) the sum runs over the finite entries of ``out`` only (an op may
return -inf by convention; those entries carry no gradient); with ``loss="sum"`` it runs over
every entry, so that the gradient at a NaN or infinite output is exercised too. Every
expectation is written from the math, not from running an op.

A backend passes the contract when, for every vector and every dtype of its ``dtypes``
(:data:`DTYPES` unless the vector names fewer):

* the value matches ``value`` within :data:`TOLERANCE` for that dtype, in that dtype, or
  within ``ulps`` units in the last place of the reference for an accuracy row; an expected
  NaN must be NaN, an expected infinity that infinity;
* every gradient entry matches ``grads`` the same way (so it is finite where the expectation
  is);
* in :data:`SECOND_ORDER_DTYPES`, the gradient of a generic linear combination of the first
  derivatives (weights ``linspace(0.5, 1.5)``) is finite where the first derivatives are
  (unless the true one overflows: ``second_overflows``), and equals ``second`` where a vector
  gives it;
* where the backend reads subnormal numbers as 0 (flush-to-zero: TensorFlow and XLA on CPU),
  a vector with ``flushed`` expectations is judged by those instead: the op's convention at 0.

The singular points are :data:`VECTORS`; :mod:`nanguard.core.contract_rows` adds the NaN
policy, accuracy and range rows, and :data:`nanguard.core.contract_rows.ALL_VECTORS` is the
whole table.

Conventions of the data, so that it stays free of any framework:

* numbers are Python floats (``math.inf``, ``-math.inf`` and ``math.nan`` included) nested in
  lists; a nested list is a tensor of that shape;
* a string is a token for a number that depends on the dtype, read as arithmetic with
  ``ulp`` the dtype's machine epsilon: ``"1+2ulp"`` is 1 plus two epsilons, ``"-1-2ulp"``
  its negation (rounding errors just outside [-1, 1]); :func:`resolve` turns tokens into
  floats;
* keyword arguments use the numpy spelling ``axis``/``keepdims``; each backend renames them
  (torch: ``dim``/``keepdim``); a ``mask`` keyword is a nested list of booleans;
* ``safe_where`` takes functions, so its vectors name them from a small vocabulary
  (:data:`WHERE_CONDITIONS`, :data:`WHERE_FUNCTIONS`) that each backend implements.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from nanguard.core.dtypes import LIMITS
from nanguard.core.opspec import op_names

Nested = Union[float, str, Sequence["Nested"]]

DTYPES: Tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")
SECOND_ORDER_DTYPES: Tuple[str, ...] = ("float32", "float64")

# machine epsilon of each dtype: the spacing of floats just above 1 (`nanguard.core.dtypes`)
EPS: Dict[str, float] = {name: LIMITS[name].eps for name in DTYPES}

# bits of significand (the implicit bit included) and the smallest normal exponent of each dtype
PRECISION: Dict[str, Tuple[int, int]] = {
    "float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126), "float64": (53, -1022),
}

# (rtol, atol) for comparing a result computed in a dtype with the exact expectation
TOLERANCE: Dict[str, Tuple[float, float]] = {
    "float16": (4e-3, 2e-3),
    "bfloat16": (2e-2, 1e-2),
    "float32": (2e-6, 1e-6),
    "float64": (1e-12, 1e-12),
}

# safe_where's vocabulary: conditions on x and branch functions of x
WHERE_CONDITIONS: Dict[str, str] = {"nonzero": "x != 0", "positive": "x > 0"}
WHERE_FUNCTIONS: Dict[str, str] = {"reciprocal": "1 / x", "log": "log(x)", "identity": "x"}

_ULP_TOKEN = re.compile(r"^(-?)1([+-])(\d+)ulp$")


def resolve(data: Nested, dtype: str) -> Nested:
    """Replace every token in ``data`` by its float for ``dtype``; numbers pass through."""
    if isinstance(data, str):
        match = _ULP_TOKEN.match(data)
        if match is None or dtype not in EPS:
            raise ValueError(f"unknown token {data!r} for dtype {dtype!r}: expected e.g. '1+2ulp' or '-1-2ulp'")
        sign, direction, count = match.groups()
        one = -1.0 if sign else 1.0
        return one + (1 if direction == "+" else -1) * int(count) * EPS[dtype]
    if isinstance(data, (list, tuple)):
        return [resolve(item, dtype) for item in data]
    if isinstance(data, (int, float)):
        return float(data)
    raise TypeError(f"a contract value is a number, a token or a list of them, got {type(data).__name__}")


LOSSES: Tuple[str, ...] = ("finite", "sum")


def ulp(x: float, dtype: str) -> float:
    """The spacing of ``dtype``'s floats at ``|x|`` (at the smallest normal spacing below it)."""
    bits, emin = PRECISION[dtype]
    exponent = max(math.frexp(abs(x))[1] - 1, emin) if x != 0 and math.isfinite(x) else emin
    return math.ldexp(1.0, exponent - bits + 1)


@dataclass(frozen=True)
class Flushed:
    """What a vector expects where subnormal numbers are read and written as 0."""

    value: Nested
    grads: Tuple[Nested, ...]


@dataclass(frozen=True)
class Vector:
    """One point of an op's contract: inputs, keyword arguments, expected value and gradients.

    ``loss`` is ``"finite"`` (sum over the finite outputs) or ``"sum"`` (every output);
    ``dtypes`` the dtypes the vector is judged in; ``ulps``, for an accuracy row, the
    tolerance in units in the last place of the (high-precision) expectation; ``second`` the
    expected second derivative (see the module docstring), when the vector pins it down;
    ``flushed`` the expectations on a backend that flushes subnormals to zero;
    ``second_overflows`` the dtypes in which the true second derivative is beyond the largest
    float (tiny inputs: sqrt's at 1e-30 is -2.5e44), where it is not judged.
    """

    id: str
    op: str
    inputs: Tuple[Nested, ...]
    value: Nested
    grads: Tuple[Nested, ...]
    kwargs: Mapping[str, object] = field(default_factory=dict)
    weights: Optional[Nested] = None
    loss: str = "finite"
    dtypes: Tuple[str, ...] = DTYPES
    ulps: Optional[float] = None
    second: Optional[Tuple[Nested, ...]] = None
    flushed: Optional[Flushed] = None
    second_overflows: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"{self.id}: loss must be one of {LOSSES}, got {self.loss!r}")
        unknown = set(self.dtypes) - set(DTYPES)
        if unknown:
            raise ValueError(f"{self.id}: unknown dtypes {sorted(unknown)}")

    def inputs_for(self, dtype: str) -> List[Nested]:
        """The inputs with every dtype-dependent token resolved for ``dtype``."""
        return [resolve(x, dtype) for x in self.inputs]

    def expected(self, flushes_subnormals: bool) -> Tuple[Nested, Tuple[Nested, ...]]:
        """(value, grads) for a backend that keeps subnormals, or one that flushes them."""
        if flushes_subnormals and self.flushed is not None:
            return self.flushed.value, self.flushed.grads
        return self.value, self.grads


INF = math.inf
NAN = math.nan
LN2 = math.log(2.0)
SIG1 = 1 / (1 + math.exp(-1))  # sigmoid(1)
R2 = 1 / math.sqrt(2)
PI = math.pi

M_KEEP = [[True, True, False], [False, False, False]]  # the second row is fully masked
W_ROWS = [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]  # non-uniform: a plain sum hides softmax's gradient


def _v(id: str, op: str, inputs: Sequence[Nested], value: Nested, grads: Sequence[Nested],
       weights: Optional[Nested] = None, *, loss: str = "finite", dtypes: Sequence[str] = DTYPES,
       ulps: Optional[float] = None, second: Optional[Sequence[Nested]] = None,
       flushed: Optional[Flushed] = None, second_overflows: Sequence[str] = (), **kwargs: object) -> Vector:
    return Vector(id, op, tuple(inputs), value, tuple(grads), kwargs, weights, loss, tuple(dtypes), ulps,
                  None if second is None else tuple(second), flushed, tuple(second_overflows))


VECTORS: Tuple[Vector, ...] = (
    # softplus: no singular point, but the overflow region and the seed
    _v("softplus/seed", "softplus", [[0.0, 1.0, 100.0]], [LN2, 1.3132616875182228, 100.0], [[0.5, SIG1, 1.0]]),
    _v("softplus/large", "softplus", [[1e4, -1e4, -0.0]], [1e4, 0.0, LN2], [[1.0, 0.0, 0.5]]),
    _v("softplus/beta", "softplus", [[0.0, 50.0]], [LN2 / 2, 50.0], [[0.5, 1.0]], beta=2.0),
    # logaddexp: both -inf
    _v("logaddexp/-inf", "logaddexp", [[-INF, -INF, 0.0], [-INF, 0.0, 0.0]], [-INF, 0.0, LN2],
       [[0.0, 0.0, 0.5], [0.0, 1.0, 0.5]]),
    # logaddexp(+inf, +inf) = +inf, gradient 1/2 each: the limit along a = b, as at every finite a = b
    _v("logaddexp/+inf", "logaddexp", [[INF, INF, 0.0, -INF], [INF, 0.0, INF, INF]], [INF, INF, INF, INF],
       [[0.5, 1.0, 0.0, 0.0], [0.5, 0.0, 1.0, 1.0]], loss="sum"),
    # ... and at a finite a = b the second derivative is sigma'(0) = 1/4 (broadcast: the
    # check's weights differ between the pairs; s = sigma(5) sigma(-5))
    _v("logaddexp/second", "logaddexp", [[[0.0], [0.0]], [0.0, 5.0]],
       [[LN2, 5.006715348489118], [LN2, 5.006715348489118]], [[[0.5066928509242848], [0.5066928509242848]],
       [1.0, 1.9866142981514303]], second=[[[-0.006648056670790155], [0.25]], [-0.25, 0.006648056670790155]]),
    # logsumexp: an all -inf row, a masked row, NaN hidden by the mask
    _v("logsumexp/-inf-row", "logsumexp", [[[-INF, -INF, -INF], [0.0, -INF, 0.0]]], [-INF, LN2],
       [[[0.0, 0.0, 0.0], [0.5, 0.0, 0.5]]], axis=1),
    _v("logsumexp/mask", "logsumexp", [[[1.0, 2.0, NAN], [INF, 3.0, 4.0]]], [2.3132616875182228, -INF],
       [[[1 - SIG1, SIG1, 0.0], [0.0, 0.0, 0.0]]], axis=1, mask=M_KEEP),
    # softmax: masked and all -inf rows are zeros with zero gradient
    _v("softmax/-inf", "softmax", [[[0.0, math.log(3.0), -INF], [-INF, -INF, -INF]]],
       [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]], [[[-0.1875, 0.1875, 0.0], [0.0, 0.0, 0.0]]], weights=W_ROWS, axis=-1),
    _v("softmax/mask", "softmax", [[[0.0, math.log(3.0), NAN], [1.0, 2.0, INF]]],
       [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]], [[[-0.1875, 0.1875, 0.0], [0.0, 0.0, 0.0]]], weights=W_ROWS,
       axis=-1, mask=M_KEEP),
    # log_softmax: 0 placeholder at masked entries, -inf for -inf scores
    _v("log_softmax/mask", "log_softmax", [[[0.0, math.log(3.0), 5.0], [1.0, 2.0, 3.0]]],
       [[-math.log(4.0), math.log(0.75), 0.0], [0.0, 0.0, 0.0]], [[[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]]],
       axis=-1, mask=M_KEEP),
    _v("log_softmax/-inf", "log_softmax", [[[0.0, math.log(3.0), -INF], [-INF, -INF, -INF]]],
       [[-math.log(4.0), math.log(0.75), -INF], [-INF, -INF, -INF]], [[[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]]], axis=-1),
    # xlogy: 0 * log 0
    _v("xlogy/zeros", "xlogy", [[0.0, 0.0, 1.0, 2.0, -0.0], [0.0, 1.0, 1.0, math.e, math.e]],
       [0.0, 0.0, 0.0, 2.0, 0.0], [[0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 2 / math.e, 0.0]]),
    # second derivatives: the mixed one at x = y = 0 is 0 by the convention (∂x = 0 there), 1/y elsewhere
    _v("xlogy/second", "xlogy", [[0.0, 0.0], [0.0, 2.0]], [0.0, 0.0], [[0.0, LN2], [0.0, 0.0]],
       second=[[0.0, 0.75], [0.0, 0.75]]),
    # entropy: the seed and degenerate distributions
    _v("entropy/seed", "entropy", [[0.1, 0.2, 0.0, 0.7]], -sum(p * math.log(p) for p in (0.1, 0.2, 0.7)),
       [[-(math.log(0.1) + 1), -(math.log(0.2) + 1), 0.0, -(math.log(0.7) + 1)]]),
    _v("entropy/one-hot", "entropy", [[[1.0, 0.0], [0.0, 0.0]]], [0.0, 0.0], [[[-1.0, 0.0], [0.0, 0.0]]]),
    _v("cross_entropy_probs/zeros", "cross_entropy_probs", [[0.0, 1.0, 0.0], [0.0, 0.9, 0.1]], -math.log(0.9),
       [[0.0, -math.log(0.9), -math.log(0.1)], [0.0, -1 / 0.9, 0.0]]),
    # sqrt and pow at 0 and for tiny negatives
    _v("sqrt/zero", "sqrt", [[0.0, -0.0, -1e-9, 4.0]], [0.0, 0.0, 0.0, 2.0], [[0.0, 0.0, 0.0, 0.25]]),
    _v("pow/cube-root", "pow", [[0.0, 8.0, -1.0]], [0.0, 2.0, 0.0], [[0.0, 1 / 12, 0.0]], exponent=1 / 3),
    _v("pow/p>1", "pow", [[0.0, 4.0]], [0.0, 32.0], [[0.0, 20.0]], exponent=2.5),
    # norms at the zero vector
    _v("norm/zero", "norm", [[[0.0, 0.0], [3.0, 4.0]]], [0.0, 5.0], [[[0.0, 0.0], [0.6, 0.8]]], axis=-1),
    _v("norm/all", "norm", [[0.0, -0.0, 0.0]], 0.0, [[0.0, 0.0, 0.0]]),
    _v("normalize/zero", "normalize", [[[0.0, 0.0], [3.0, 4.0]]], [[0.0, 0.0], [0.6, 0.8]],
       [[[0.0, 0.0], [-0.064, 0.048]]], weights=[[1.0, 2.0], [1.0, 2.0]]),
    _v("cosine_similarity/zero", "cosine_similarity", [[[0.0, 0.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]],
       [0.0, R2], [[[0.0, 0.0], [0.0, R2]], [[0.0, 0.0], [R2 / 2, -R2 / 2]]]),
    _v("distance_matrix/diagonal", "distance_matrix", [[[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]]],
       [[0.0, 5.0, 0.0], [5.0, 0.0, 5.0], [0.0, 5.0, 0.0]], [[[-1.2, -1.6], [2.4, 3.2], [-1.2, -1.6]]]),
    _v("distance_matrix/xy", "distance_matrix", [[[1.0, 1.0]], [[1.0, 1.0], [4.0, 5.0]]], [[0.0, 5.0]],
       [[[-0.6, -0.8]], [[0.0, 0.0], [0.6, 0.8]]]),
    # div and masked_mean: division by zero
    _v("div/zero", "div", [[1.0, 1.0, 0.0, -3.0], [2.0, 0.0, 0.0, -0.0]], [0.5, 0.0, 0.0, 0.0],
       [[0.5, 0.0, 0.0, 0.0], [-0.25, 0.0, 0.0, 0.0]]),
    _v("div/fill", "div", [[1.0, 1.0], [2.0, 0.0]], [0.5, 7.0], [[0.5, 0.0], [-0.25, 0.0]], fill=7.0),
    _v("masked_mean/empty", "masked_mean", [[[1.0, 3.0, NAN], [5.0, 7.0, INF]]], [2.0, 0.0],
       [[[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]], axis=1, mask=M_KEEP),
    # std and var: constant slices and too few elements
    _v("std/constant", "std", [[2.0, 2.0, 2.0]], 0.0, [[0.0, 0.0, 0.0]]),
    _v("std/one", "std", [[5.0]], 0.0, [[0.0]]),
    _v("std/two", "std", [[1.0, 3.0]], math.sqrt(2.0), [[-R2, R2]]),
    _v("var/one", "var", [[5.0]], 0.0, [[0.0]], axis=0),
    _v("var/constant", "var", [[2.0, 2.0, 2.0]], 0.0, [[0.0, 0.0, 0.0]]),
    _v("var/rows", "var", [[[1.0, 3.0], [4.0, 4.0]]], [0.0, 0.0], [[[0.0, 0.0], [0.0, 0.0]]], axis=1, correction=2),
    # acos / asin at ±1 and a rounding error outside
    _v("acos/ends", "acos", [[1.0, -1.0, 0.0, "1+2ulp"]], [0.0, PI, PI / 2, 0.0], [[0.0, 0.0, -1.0, 0.0]]),
    _v("asin/ends", "asin", [[1.0, -1.0, 0.0, "-1-2ulp"]], [PI / 2, -PI / 2, 0.0, -PI / 2], [[0.0, 0.0, 1.0, 0.0]]),
    # safe_where: the seed's 1/x, and a log whose other branch is x itself
    _v("safe_where/seed", "safe_where", [[-1.0, 0.0, 1.0]], [-1.0, 0.0, 1.0], [[-1.0, 0.0, -1.0]],
       where="nonzero", fn="reciprocal"),
    _v("safe_where/log", "safe_where", [[0.0, -2.0, math.e]], [0.0, -2.0, 1.0], [[1.0, 1.0, 1 / math.e]],
       where="positive", fn="log", other="identity"),
)

# every op of the catalogue, in the order of the README's table (the op specification's list)
OPS: Tuple[str, ...] = op_names()
