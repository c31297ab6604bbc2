"""What an explanation rule reads: a finding's facts, framework-free, and the `Said` it returns.

Every backend reduces a finding to `Facts`: the phase and kind, the canonical names of the
op (``sqrt``, ``div``, ``log_softmax``: the lower-case names torch and JAX use, TensorFlow's
``RealDiv`` normalised to ``div`` by its adapter), the exact summaries of the tensors, and a
`Probe` that answers what summaries cannot say (the producer of a value, where its zeros
lie). The rules in `forward`, `backward` and `presumed` are written once over these; a
backend only adapts, so the same values get the same words in every framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from nanguard.core.summary import TensorSummary

_FLOATING = ("float", "bfloat", "complex")


@dataclass(frozen=True)
class Said:
    """What a rule concluded: the catalogue ``key`` of the hazard, the name of the hazard's
    evidence template that states the facts (``""`` for none), and the fields that fill it
    and the hazard's own templates."""

    key: str
    evidence: str = ""
    fields: Dict[str, Any] = field(default_factory=dict)


class Probe:
    """What a backend can tell beyond the summaries, asked lazily (only the rule that needs
    a fact pays for it). This base answers "not known" throughout: a backend that keeps no
    values (TensorFlow's graph checks) uses it as is, the others override what they can see."""

    def root(self) -> Tuple[str, Dict[str, Any]]:
        """The hazard of a root (sqrt, ``** 0.5``) of the first argument at 0 or below:
        ``"distance_matrix"`` (with ``{"diagonal": n}``), ``"norm_zero"``, or ``""``."""
        return "", {}

    def log_source(self) -> str:
        """The hazard of a log of exact zeros, by what made them (``log_softmax``...)."""
        return "log_zero"

    def above(self, limit: float) -> Optional[int]:
        """How many entries of the first argument exceed ``limit``."""
        return None

    def masked_rows(self) -> Optional[Tuple[int, int]]:
        """(rows of the first argument that are all −inf, number of rows)."""
        return None

    def zero_vectors(self) -> Optional[Tuple[int, int]]:
        """(vectors of the first argument that are exactly 0, number of vectors)."""
        return None

    def empty_groups(self) -> bool:
        """Whether ``args[0] / args[-1]`` is a mean over groups some of which are empty."""
        return False

    def log_factor(self, index: int) -> bool:
        """Whether input ``index`` was made by a log (a log-probability), by its history."""
        return False

    def reduced_count(self) -> Optional[int]:
        """How many entries a reduction (std, var) reduces over."""
        return None


@dataclass
class Facts:
    """A finding as the rules read it. ``names``: the canonical names to look rules up by,
    most specific first (JAX: the function the user called, then the primitive); ``op``: the
    one being tried (set by `nanguard.core.why.diagnose`). ``fn``, ``node`` and ``op_name``
    word an unexplained finding. ``counted=False``: the values were not read, the op's name
    decides (`presumed`). ``mixed``: the program runs under mixed precision."""

    phase: str
    kind: str
    names: Tuple[str, ...]
    framework: str
    inputs: List[TensorSummary]
    forward_inputs: List[TensorSummary] = field(default_factory=list)
    scalars: List[float] = field(default_factory=list)
    outputs: List[TensorSummary] = field(default_factory=list)
    exponent: Optional[float] = None
    mixed: bool = False
    counted: bool = True
    probe: Probe = field(default_factory=Probe)
    fn: str = ""
    node: str = ""
    op_name: str = ""
    op: str = ""

    @property
    def what(self) -> str:
        return "NaN" if self.kind == "nan" else "Inf"

    def args(self) -> List[TensorSummary]:
        """The forward op's inputs: those of the op itself for a forward finding."""
        return self.forward_inputs if self.phase == "backward" and self.forward_inputs else self.inputs

    def first(self) -> Optional[TensorSummary]:
        """The first floating argument of the forward op."""
        return next((s for s in self.args() if s.dtype.startswith(_FLOATING)), None)

    def dtype(self) -> str:
        if self.outputs:
            return self.outputs[0].dtype
        s = self.first()
        return s.dtype if s is not None else "float32"


def fmt(v: Optional[float]) -> str:
    return "?" if v is None else f"{v:.4g}"


def counts(s: Optional[TensorSummary]) -> Dict[str, Any]:
    """The template fields every summary offers: ``{zeros} of {numel}`` and friends."""
    if s is None:
        return {k: "?" for k in ("zeros", "numel", "negative", "min", "max", "posinf", "neginf", "nan")}
    return {"zeros": s.zeros, "numel": s.numel, "negative": s.negative, "min": fmt(s.min), "max": fmt(s.max),
            "posinf": s.posinf, "neginf": s.neginf, "nan": s.nan, "name": s.name}


def peak(s: Optional[TensorSummary]) -> Optional[float]:
    """The largest magnitude ``s`` reaches; None when its range is unknown."""
    if s is None or s.min is None:
        return None
    return max(abs(s.min), abs(s.max or 0))


__all__ = ["Facts", "Probe", "Said", "counts", "fmt", "peak"]
