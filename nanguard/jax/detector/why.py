"""Which catalogued hazard made a JAX finding: the values the replay kept, adapted to the
shared rules of `nanguard.core.why`.

`Facts` is what the replay knows: the function the user called (``sqrt``, ``norm``,
``mean``: read off the line, or the primitive when the line is an operator), the primitive,
the operands and the functions upstream of the first operand. `JaxProbe` answers the rules'
questions from the host copies of the operands; the words are the catalogue's, worded for
JAX, the same texts ``nanguard lint`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np

from nanguard.core import why
from nanguard.core.summary import TensorSummary
from nanguard.core.why import Probe, Said

Arg = Tuple[TensorSummary, Optional[np.ndarray]]


@dataclass
class Facts:
    """What the replay knows: the phase and kind, the user's function and the primitive, the
    operands of the op that failed (``inputs``) and of the forward op (``forward_inputs``),
    Python-number operands, and what produced the forward op's first operand."""

    phase: str
    kind: str
    fn: str
    primitive: str
    inputs: List[Arg]
    forward_inputs: List[Arg]
    scalars: List[float]
    outputs: List[TensorSummary]
    producers: List[str] = field(default_factory=list)   # functions upstream of the first operand
    exponent: Optional[float] = None

    def args(self) -> List[Arg]:
        return self.forward_inputs if self.phase == "backward" and self.forward_inputs else self.inputs

    def first_value(self) -> Optional[np.ndarray]:
        args = self.args()
        return args[0][1] if args else None


# ----------------------------------------------------------------------- value facts
def diagonal_zeros(a: Optional[np.ndarray]) -> Optional[int]:
    """Entries ≤ 0 on the diagonal of a square matrix whose diagonal is ≈ 0 and whose
    off-diagonal is positive somewhere: a squared distance matrix."""
    if a is None or a.ndim < 2 or a.shape[-1] != a.shape[-2] or a.shape[-1] < 2 or a.dtype.kind != "f":
        return None
    if not np.isfinite(a).all():
        return None
    scale = float(np.abs(a).max())
    diag = np.diagonal(a, axis1=-2, axis2=-1)
    if scale <= 0 or float(np.abs(diag).max()) > 1e-3 * scale:
        return None
    off = ~np.eye(a.shape[-1], dtype=bool)
    if not (a[..., off] > 0).any():
        return None
    return int((diag <= 0).sum())


def rows_all_neginf(a: Optional[np.ndarray]) -> Optional[Tuple[int, int]]:
    if a is None or a.ndim == 0 or a.dtype.kind != "f":
        return None
    full = (a == -np.inf).all(axis=-1)
    return int(full.sum()), int(full.size)


def zero_vectors(a: Optional[np.ndarray]) -> Optional[Tuple[int, int]]:
    if a is None or a.size == 0:
        return None
    zero = (a == 0).all(axis=-1) if a.ndim > 1 else np.asarray([(a == 0).all()])
    return int(zero.sum()), int(zero.size)


def empty_groups(num: Optional[np.ndarray], den: Optional[np.ndarray]) -> bool:
    """``num / den`` is a mean of empty groups: ``den`` holds counts (whole numbers ≥ 0), 0
    where ``num`` is 0 too."""
    if num is None or den is None or den.dtype.kind != "f" or den.size == 0:
        return False
    if not np.isfinite(den).all() or (den < 0).any() or not (den == np.round(den)).all():
        return False
    empty = den == 0
    if not empty.any():
        return False
    try:
        return bool((empty & (num == 0)).any())
    except ValueError:
        return False



class JaxProbe(Probe):
    """The answers of `Probe` from the operands' host values and the producers of the first."""

    def __init__(self, f: Facts) -> None:
        self._f = f

    def root(self) -> Tuple[str, dict]:
        f = self._f
        on_diagonal = diagonal_zeros(f.first_value())
        if on_diagonal or "dot_general" in f.producers:
            return "distance_matrix", {"diagonal": on_diagonal or 0}
        if f.producers[:1] in (["reduce_sum"], ["integer_pow"], ["square"]) or f.fn in ("norm",):
            return "norm_zero", {}
        return "", {}

    def log_source(self) -> str:
        up = self._f.producers
        if any("softmax" in p for p in up[:2]):
            return "log_softmax"
        if up[:1] == ["logistic"] or "sigmoid" in up[:1]:
            return "log_sigmoid"
        if up[:1] == ["sub"] and "logistic" in up[1:3]:
            return "log_one_minus_sigmoid"
        if up[:1] == ["reduce_sum"] and "exp" in up[1:3]:
            return "logsumexp_overflow"
        return "log_zero"

    def above(self, limit: float) -> Optional[int]:
        a = self._f.first_value()
        return int((a > limit).sum()) if a is not None else None

    def masked_rows(self) -> Optional[Tuple[int, int]]:
        return rows_all_neginf(self._f.first_value())

    def zero_vectors(self) -> Optional[Tuple[int, int]]:
        return zero_vectors(self._f.first_value())

    def empty_groups(self) -> bool:
        args = self._f.args()
        return len(args) > 1 and empty_groups(args[0][1], args[-1][1])

    def reduced_count(self) -> Optional[int]:
        a = self._f.first_value()
        return int(a.shape[-1]) if a is not None and a.ndim else 1


def _facts(f: Facts) -> why.Facts:
    return why.Facts(phase=f.phase, kind=f.kind, names=(f.fn, f.primitive), framework="jax",
                     inputs=[s for s, _ in f.inputs], forward_inputs=[s for s, _ in f.forward_inputs],
                     scalars=list(f.scalars), outputs=f.outputs, exponent=f.exponent, probe=JaxProbe(f),
                     fn=f.fn, node=f.primitive, op_name=f.primitive)


def diagnose(f: Facts) -> Said:
    """The hazard behind a finding; ``unexplained`` when no rule applies."""
    return why.diagnose(_facts(f))


def words(said: Said) -> Tuple[str, str]:
    """(explanation, suggestion) in the catalogue's words, the fix worded for JAX."""
    return why.words(said, "jax")


__all__ = ["Facts", "JaxProbe", "Said", "diagnose", "words"]
