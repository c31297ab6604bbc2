"""The limits of the floating dtypes, by name: one table for every backend and message.

Backends name their dtypes alike (``"float16"``, ``"bfloat16"``, ``"float32"``,
``"float64"``: ``str(np.dtype)``, ``tf.DType.name``, ``str(torch.dtype)`` less ``torch.``), so
a finding's words and the rule's rounded extremes read the same numbers whatever the framework.

    >>> limits("float16").max
    65504.0
    >>> round(exp_limit("float32"), 2)
    88.72
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional


@dataclass(frozen=True)
class Limits:
    """``max``: the largest finite value; ``eps``: the gap from 1 to the next value; ``tiny``:
    the smallest positive normal value (subnormals lie below it)."""

    name: str
    max: float
    eps: float
    tiny: float

    @property
    def exp_max(self) -> float:
        """The largest x whose ``exp`` is finite."""
        return math.log(self.max)

    @property
    def max_text(self) -> str:
        """``max`` as a message quotes it (``65504``, ``3.40282e+38``)."""
        return f"{self.max:.6g}"


def _binary(name: str, mantissa: int, max_exp: int) -> Limits:
    """A binary format with ``mantissa`` stored bits and exponents up to ``max_exp``."""
    eps = 2.0 ** -mantissa
    return Limits(name, (2.0 - eps) * 2.0 ** max_exp, eps, 2.0 ** (1 - max_exp))


LIMITS: Dict[str, Limits] = {limit.name: limit for limit in (
    _binary("float16", 10, 15), _binary("bfloat16", 7, 127), _binary("float32", 23, 127),
    _binary("float64", 52, 1023))}
EXTREMES: FrozenSet[float] = frozenset(limit.max for limit in LIMITS.values())
DEFAULT = "float32"


def limits(dtype: str) -> Optional[Limits]:
    """The limits of the dtype named ``dtype`` (``torch.float16`` and ``float16`` alike), or
    None for a dtype outside the table (complex, integer, float8)."""
    return LIMITS.get(dtype.rsplit(".", 1)[-1])


def max_finite(dtype: str) -> Optional[float]:
    """The largest finite value of ``dtype``; None outside the table."""
    found = limits(dtype)
    return None if found is None else found.max


def exp_limit(dtype: str) -> float:
    """The largest x whose ``exp`` is finite in ``dtype`` (float32's outside the table)."""
    return (limits(dtype) or LIMITS[DEFAULT]).exp_max


def is_extreme(value: float, dtype: Optional[str] = None) -> bool:
    """Whether ``value`` is ``±max`` of ``dtype`` (of any dtype in the table when None): the
    ``finfo(dtype).min`` that masks write for "minus infinity"."""
    if dtype is None:
        return abs(value) in EXTREMES
    found = limits(dtype)
    return found is not None and abs(value) == found.max


# How far outside [-1, 1] the safe acos/asin take an input for a rounding error: a few ulps
# of 1 in its dtype (a cosine computed as a dot product of unit vectors lands there).
TRIG_ROUNDING_ULPS = 4


def trig_rounding_tolerance(dtype: str) -> float:
    """:data:`TRIG_ROUNDING_ULPS` epsilons of ``dtype`` (float32's outside the table)."""
    return TRIG_ROUNDING_ULPS * (limits(dtype) or LIMITS[DEFAULT]).eps


__all__ = ["DEFAULT", "EXTREMES", "LIMITS", "Limits", "TRIG_ROUNDING_ULPS", "exp_limit", "is_extreme", "limits",
           "max_finite", "trig_rounding_tolerance"]
