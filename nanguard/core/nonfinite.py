"""The rule that says an op *made* a NaN/Inf, decided once from what a backend reads off its tensors.

* A NaN in an output while no input (tensor or Python scalar) holds NaN: the op created it,
  deliberate or not (NaN is never a useful value).
* A NaN in an output and in an input: it came from outside (``origin="input"``).
* An infinity in an output while every input is finite: the op created it (overflow, log 0,
  x/0). Infinities that flow in (a ``-inf`` mask) are deliberate and not reported; nor is an
  infinity made by rounding an input that holds its dtype's extreme of the same sign (the
  ``torch.finfo(dtype).min`` mask of float16 attention, where ``scores + min`` is ``-inf``).

The detector (which op to report), the audit (whether the traced run made a NaN/Inf, whether
a witness triggers one) and their replays all ask this one function. Nothing here imports a
framework: a backend computes the `Flags`.

    >>> made(Flags(out_nan=True, out_inf=False, in_nan=False, in_finite=False))
    Verdict(kind='nan', origin='created')
    >>> made(Flags(out_nan=False, out_inf=True, in_nan=False, in_finite=False)) is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, FrozenSet, Optional

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


def created(flags: Flags, check: AbstractSet[str] = BOTH) -> bool:
    """Whether the op itself made a NaN/Inf (`made` with origin ``"created"``)."""
    verdict = made(flags, check)
    return verdict is not None and verdict.origin == "created"


__all__ = ["BOTH", "INF", "NAN", "Flags", "Verdict", "created", "made", "rounded_extreme"]
