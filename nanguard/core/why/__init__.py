"""Why an op made NaN/Inf, and the fix: one registry of rules for every framework.

A backend reduces a finding to `Facts` (summaries, canonical op names, a `Probe` for what
summaries cannot say); `diagnose` picks the rule by phase and name and returns the `Said`
(a hazard of `nanguard.core.hazards` with the facts that prove it); `words` puts it in the
catalogue's words, the fix worded for the framework: the same texts ``nanguard lint`` prints.
"""

from __future__ import annotations

from typing import Optional, Tuple

from nanguard.core.hazards import HAZARDS, explanation, suggestion
from nanguard.core.why import backward as _backward  # noqa: F401  (fills BACKWARD)
from nanguard.core.why import presumed as _presumed  # noqa: F401  (fills PRESUMED)
from nanguard.core.why.facts import Facts, Probe, Said, counts, fmt
from nanguard.core.why.forward import diverged, nan_input, overflow
from nanguard.core.why.registry import BACKWARD, FORWARD, PRESUMED, Rule, rule

# diagnoses that only say "it overflowed" or nothing: huge inputs explain more
_GENERIC = frozenset({"overflow", "overflow_low_precision", "overflow_mixed_precision", "unexplained"})


def _by_rule(f: Facts) -> Optional[Said]:
    table = PRESUMED if not f.counted else BACKWARD if f.phase == "backward" else FORWARD
    for name in dict.fromkeys(f.names):
        found = table.get(name)
        f.op = name
        said = found(f) if found is not None else None
        if said is not None:
            return said
    return None


def diagnose(f: Facts) -> Said:
    """The hazard behind a finding, with its facts; ``unexplained`` when no rule applies."""
    if f.phase == "input":
        return nan_input(f)
    said = None
    try:
        said = _by_rule(f)
        if f.phase == "forward" and f.counted and (said is None or said.key in _GENERIC):
            # values grown past √max say more than "it overflowed": training diverged
            said = diverged(f) or said
        if said is None and f.phase == "forward":
            said = overflow(f)
    except Exception:  # noqa: BLE001  (an explanation must never hide the finding itself)
        said = None
    if said is None:
        fields = {"fn": f.fn, "what": f.what, "node": f.node or "?", "op": f.op_name}
        said = Said("unexplained", "backward" if f.phase == "backward" else "forward", fields)
    return said


def words(said: Said, framework: str, *extra: str) -> Tuple[str, str]:
    """(explanation, suggestion) of a diagnosis in the catalogue's words, the fix worded for
    ``framework``; ``extra`` names more evidence templates of the same hazard to state after
    the first (a name the hazard lacks states nothing)."""
    hazard = HAZARDS[said.key]
    facts = [hazard.evidence_text(name, **said.fields) for name in (said.evidence, *extra)
             if name and name in hazard.evidence]
    return explanation(hazard, "; ".join(facts), **said.fields), suggestion(hazard, framework, **said.fields)


__all__ = ["BACKWARD", "FORWARD", "PRESUMED", "Facts", "Probe", "Rule", "Said", "counts", "diagnose", "fmt",
           "rule", "words"]
