"""The rule that says an op *made* a NaN/Inf, decided once from what a backend reads off its tensors.

* A NaN in an output while no input (tensor or Python scalar) holds NaN: the op created it,
  deliberate or not (NaN is never a useful value).
* A NaN in an output and in an input: it came from outside (``origin="input"``).
* An infinity in an output while every input is finite: the op created it (overflow, log 0,
  x/0). Infinities that flow in (a ``-inf`` mask) are deliberate and not reported; nor is an
  infinity made by rounding an input that holds its dtype's extreme of the same sign (the
  ``torch.finfo(dtype).min`` mask of float16 attention, where ``scores + min`` is ``-inf``).

The detector (which op to report), the audit (whether the traced run made a NaN/Inf, whether
a witness triggers one) and their replays all ask this one function; checks compiled into a
graph (TensorFlow's in-graph checks, JAX's exhaustive mode) ask `made_masks`, the same rule
over the graph's own booleans. Nothing here imports a framework: a backend computes the flags.

    >>> made(Flags(out_nan=True, out_inf=False, in_nan=False, in_finite=False))
    Verdict(kind='nan', origin='created')
    >>> made(Flags(out_nan=False, out_inf=True, in_nan=False, in_finite=False)) is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, FrozenSet, Generic, Optional, Tuple, TypeVar

NAN, INF = "nan", "inf"
BOTH: FrozenSet[str] = frozenset({NAN, INF})


@dataclass(frozen=True)
class Flags:
    """What the values of one op show: NaN/Inf among its outputs, NaN among its inputs, whether
    every input is finite, and whether each infinity of the outputs is an input's dtype extreme
    rounded (see the module docstring and `rounded_extreme`).

    An adapter that cannot see where an op's values come from (TensorFlow's constants, fills
    and ``tf.data`` batches have no floating input) passes ``in_finite=False``: their
    infinities come from outside, as a ``-inf`` argument's do."""

    out_nan: bool
    out_inf: bool
    in_nan: bool
    in_finite: bool
    rounded_extreme: bool = False


@dataclass(frozen=True)
class Verdict:
    """``kind``: ``"nan"`` or ``"inf"``; ``origin``: ``"created"`` (the op made it) or ``"input"``
    (a NaN that arrived from outside the checked code)."""

    kind: str
    origin: str


def made(flags: Flags, check: AbstractSet[str] = BOTH) -> Optional[Verdict]:
    """The verdict on one op whose outputs are known, or None when it made nothing to report."""
    if flags.out_nan and NAN in check:
        return Verdict(NAN, "input" if flags.in_nan else "created")
    if flags.out_inf and INF in check and flags.in_finite and not flags.rounded_extreme:
        return Verdict(INF, "created")
    return None


def rounded_extreme(out_pos: bool, out_neg: bool, in_pos: bool, in_neg: bool) -> bool:
    """`Flags.rounded_extreme` from signs: whether the outputs hold an infinity (``+inf``:
    ``out_pos``, ``-inf``: ``out_neg``) and each sign of it has an input holding its dtype's
    extreme of that sign (``+max``: ``in_pos``, ``-max``: ``in_neg``; `nanguard.core.dtypes`).

        >>> rounded_extreme(out_pos=False, out_neg=True, in_pos=False, in_neg=True)
        True
        >>> rounded_extreme(out_pos=True, out_neg=True, in_pos=False, in_neg=True)
        False
    """
    return (out_pos or out_neg) and (in_pos or not out_pos) and (in_neg or not out_neg)


B = TypeVar("B")


@dataclass(frozen=True)
class Logic(Generic[B]):
    """A backend's booleans for `made_masks`: Python's (`PYTHON`), or the tensors a compiled
    check computes with (``tf.logical_and``, ``jnp`` operators), which Python's ``and`` cannot
    combine."""

    and_: Callable[[B, B], B]
    not_: Callable[[B], B]
    false: Callable[[], B]


PYTHON: Logic[bool] = Logic(and_=lambda a, b: a and b, not_=lambda a: not a, false=lambda: False)


def made_masks(out_nan: B, out_inf: B, in_nan: B, in_finite: B, logic: Logic[B],
               check: AbstractSet[str] = BOTH) -> Tuple[B, B]:
    """(the op made NaN, the op made ±Inf): `made` with origin ``"created"``, as ``logic``'s
    booleans, for checks compiled into a graph, where the values are never seen by Python (a
    rounded extreme is not looked for there). A NaN made wins over an Inf made, as in `made`.

        >>> made_masks(True, False, False, True, PYTHON)
        (True, False)
        >>> made_masks(False, True, False, False, PYTHON)
        (False, False)
    """
    if NAN not in check:
        return logic.false(), logic.and_(out_inf, in_finite) if INF in check else logic.false()
    nan = logic.and_(out_nan, logic.not_(in_nan))
    inf = logic.and_(logic.and_(out_inf, in_finite), logic.not_(out_nan)) if INF in check else logic.false()
    return nan, inf


def created(flags: Flags, check: AbstractSet[str] = BOTH) -> bool:
    """Whether the op itself made a NaN/Inf (`made` with origin ``"created"``)."""
    verdict = made(flags, check)
    return verdict is not None and verdict.origin == "created"


__all__ = ["BOTH", "INF", "NAN", "PYTHON", "Flags", "Logic", "Verdict", "created", "made", "made_masks",
           "rounded_extreme"]
