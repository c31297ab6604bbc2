"""The catalogue of NaN/Inf hazards: the one place their explanations and fixes are written.

Each entry (a frozen `Hazard`, see `nanguard.core.hazard`) says which ops it concerns, when
the value and the gradient are non-finite, why, the fix, the safe replacement per framework
and the lint codes that find it. ``nanguard lint`` words a finding with
``lint_message(HAZARDS[key], pattern)``; the runtime explainer words a report with
``explanation(HAZARDS[key], evidence)`` and ``suggestion(HAZARDS[key])``: one hazard, one
text. Evidence templates (``{zeros} of {numel} inputs were exactly 0``) are filled with
exact counts at run time. Nothing here imports a framework.

    >>> from nanguard.core.hazards import HAZARDS, for_code
    >>> HAZARDS["distance_matrix"].safe["torch"]
    'nanguard.distance_matrix'
    >>> [h.key for h in for_code("NG301")]
    ['distance_matrix']
"""

from __future__ import annotations

from typing import Dict, List

from nanguard.core import catalogue_compound, catalogue_elementwise
from nanguard.core.hazard import Hazard, explanation, lint_message, suggestion

HAZARDS: Dict[str, Hazard] = {}
for _h in catalogue_elementwise.ENTRIES + catalogue_compound.ENTRIES:
    assert _h.key not in HAZARDS, _h.key
    HAZARDS[_h.key] = _h


def hazard(key: str) -> Hazard:
    """The entry ``key``; KeyError names the known keys."""
    try:
        return HAZARDS[key]
    except KeyError:
        raise KeyError(f"no hazard {key!r}; known: {', '.join(sorted(HAZARDS))}") from None


def for_code(code: str) -> List[Hazard]:
    """The hazards a lint code finds (NG301 -> [distance_matrix])."""
    return [h for h in HAZARDS.values() if code in h.lint]


def for_op(op: str) -> List[Hazard]:
    """The hazards of an op base name (``sqrt`` -> sqrt_negative, sqrt_zero, distance_matrix, ...)."""
    return [h for h in HAZARDS.values() if op in h.ops]


__all__ = ["HAZARDS", "Hazard", "explanation", "for_code", "for_op", "hazard", "lint_message", "suggestion"]
