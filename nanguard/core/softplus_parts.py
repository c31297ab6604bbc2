"""Constants of the accurate ``softplus(x, beta)`` of ``nanguard.tf`` and ``nanguard.jax``, framework-free.

``softplus(x, beta) = log1p(exp(beta * x)) / beta`` loses accuracy in two places that the
textbook formula cannot see (``nanguard.torch`` repairs the same ones):

* the product ``beta * x`` is rounded, and exp turns that rounding into a relative error of
  up to ``|beta * x| / 2`` ulps (91 ulps in float32 at ``beta=0.3``, 391 in float64);
* for ``beta < 1`` the tail's ``exp(beta * x)`` is subnormal, or 0, before ``1 / beta``
  lifts it back into the normal range.

The backends therefore compute ``beta * x = hi + lo`` exactly (Dekker's two-product, with
the constants below) and the tail as ``exp(hi - log(beta))`` with ``log(beta)`` in two parts.
Everything here is plain Python: rounding to float32 goes through :mod:`struct`.

The branches, with t = fl(b x) (b: beta in the dtype), lo = b x - t + (beta - b) x
exactly, e = exp(-|t|) and s = sigmoid(t):

* t > HUGE: x (gradient 1), also where t overflows;
* tail, t < TAIL: exp(t - log beta) (1 + lo + the two-sum's error - log beta's low part),
  gradient exp(t) (1 + lo);
* otherwise (max(t, 0) + log1p(e) + lo s) / beta, gradient s + lo s (1 - s).

Every branch is computed on inputs that keep it finite where it is not taken (t = ±inf
replaced, the tail's t capped), so the native derivative of the gradient, the second
derivative, has no 0 * inf.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, TypeVar, cast


def round_to(value: float, dtype: str) -> float:
    """``value`` rounded to the nearest ``dtype`` number ("float32" or "float64")."""
    if dtype == "float64":
        return float(value)
    rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    return rounded


# Dekker's splitting constants: 2**ceil(p/2) + 1 for a p-bit significand
SPLITTER = {"float32": 4097.0, "float64": 134217729.0}
# beyond beta * x = HUGE, log1p(exp(-beta * x)) / beta is below half an ulp of x: the value is x
HUGE = {"float32": 20.0, "float64": 37.0}
# below beta * x = -TAIL, log1p(e) = e to within 0.15 ulp (e = exp(beta * x) < 2**-25 / 2**-54)
TAIL = {"float32": -18.0, "float64": -38.0}
# the largest finite number of each dtype
LARGEST = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
# ln 2 in two parts (fdlibm's): e * _LN2_HI is exact for |e| < 2**11
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10


@dataclass(frozen=True)
class BetaParts:
    """The constants of ``softplus(x, beta)`` in one compute dtype.

    ``b`` is beta rounded to the dtype and ``b_rest = beta - b`` (exact in float64);
    ``b_hi + b_lo = b`` is its Dekker split; ``log_hi + log_lo = log(beta)`` to about 2**-100
    relative (math.log alone is off by up to half a float64 ulp, which exp turns into 10 ulps
    of the float64 tail); ``inverse_rest = (beta - b) / beta`` corrects a division by ``b``
    into one by beta; ``big`` is where ``|x| * splitter`` would overflow (such x are split
    scaled by 2**-64, exactly).
    """

    b: float
    b_rest: float
    b_hi: float
    b_lo: float
    splitter: float
    log_hi: float
    log_lo: float
    inverse_rest: float
    big: float
    huge: float
    tail: float


def beta_parts(beta: float, dtype: str) -> BetaParts:
    """The constants for ``beta`` (finite, > 0) in ``dtype`` ("float32" or "float64")."""
    b = round_to(beta, dtype)
    split = SPLITTER[dtype]
    b_split = round_to(b * split, dtype)
    b_hi = round_to(b_split - round_to(b_split - b, dtype), dtype)
    m, e = math.frexp(beta)
    exact = e * _LN2_HI
    rest = math.log(m) + e * _LN2_LO
    log_hi = round_to(exact + rest, dtype)
    return BetaParts(b=b, b_rest=beta - b, b_hi=b_hi, b_lo=b - b_hi, splitter=split, log_hi=log_hi,
                     log_lo=(exact - log_hi) + rest, inverse_rest=(beta - b) / beta,
                     big=LARGEST[dtype] / (4 * split), huge=HUGE[dtype], tail=TAIL[dtype])


def product_is_exact(beta: float) -> bool:
    """True for a power of two >= 1: ``beta * x`` is exact, and ``exp(beta * x) / beta`` is
    no more subnormal than ``exp(beta * x)``; the plain formula is accurate."""
    return math.frexp(beta)[0] == 0.5 and beta >= 1


_T = TypeVar("_T")


def product_low(xs: _T, p: BetaParts) -> _T:
    """The rounding error of ``xs * p.b``, exactly (Dekker's two-product with ``p``'s split of
    b), for ``|xs|`` below ``p.big``. Only ``+``, ``-`` and ``*`` with Python floats: it runs
    the same on a TensorFlow tensor, a JAX array or a float."""
    t: Any = xs
    c = t * p.splitter
    x_hi = c - (c - t)
    x_lo = t - x_hi
    return cast(_T, ((x_hi * p.b_hi - t * p.b) + x_hi * p.b_lo + x_lo * p.b_hi) + x_lo * p.b_lo)
