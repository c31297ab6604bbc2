"""Explanations and fixes: why this op made NaN/Inf here, in plain language, and what to use.

A rule (`why_forward`, `why_backward`), keyed by the *forward* op's base name and the phase,
reads the evidence (exact counts of the inputs, the tensors and their autograd history while
at hand) and names a hazard of the catalogue `nanguard.core.hazards` with the facts that
prove it. The words come from the catalogue alone: the report's explanation is the facts
followed by the hazard's why, its suggestion the hazard's fix, the same texts that
``nanguard lint`` prints for the same hazard.
"""

from __future__ import annotations

import torch

from nanguard.core.hazards import HAZARDS, explanation, suggestion
from nanguard.core.report import message
from nanguard.torch.detector.evidence import Evidence, Said
from nanguard.torch.detector.why_backward import BACKWARD
from nanguard.torch.detector.why_forward import FORWARD, diverged, nan_input, overflow

# diagnoses that only say "it overflowed" or nothing: huge inputs explain more
_GENERIC = frozenset({"overflow", "overflow_low_precision", "overflow_mixed_precision", "unexplained"})


def diagnose(ev: Evidence) -> Said:
    """The hazard behind a finding, with its facts; ``unexplained`` when no rule applies."""
    if ev.phase == "input":
        return nan_input(ev)
    table = BACKWARD if ev.phase == "backward" else FORWARD
    found = table.get(ev.base)
    said = None
    try:
        said = found(ev) if found is not None else None
        if ev.phase == "forward" and (said is None or said.key in _GENERIC):
            # values grown past √max say more than "it overflowed": training diverged
            said = diverged(ev) or said
        if said is None and ev.phase == "forward":
            said = overflow(ev)
    except Exception:  # noqa: BLE001  (an explanation must never hide the finding itself)
        said = None
    if said is None:
        fields = {"fn": ev.base, "what": ev.what, "node": ev.node or "?", "op": ev.op}
        said = Said("unexplained", "backward" if ev.phase == "backward" else "forward", fields)
    return said


def words(said: Said, *extra: str) -> tuple[str, str]:
    """(explanation, suggestion) of a diagnosis, in the catalogue's words; ``extra`` names more
    evidence templates of the same hazard to state after the first."""
    hazard = HAZARDS[said.key]
    facts = [hazard.evidence_text(name, **said.fields) for name in (said.evidence, *extra) if name]
    return explanation(hazard, "; ".join(facts), **said.fields), suggestion(hazard, **said.fields)


def explain(ev: Evidence) -> tuple[str, str]:
    """(explanation, suggestion) for a finding; never empty."""
    return words(diagnose(ev))


def optimizer_explanation(optimizer: torch.optim.Optimizer, kind: str) -> tuple[str, str]:
    group = optimizer.param_groups[0] if optimizer.param_groups else {}
    hp = ", ".join(f"{k}={group[k]}" for k in ("lr", "eps", "weight_decay") if k in group)
    said = Said("optimizer_step", "forward",
                {"optimizer": type(optimizer).__name__, "hp": hp, "what": "NaN" if kind == "nan" else "Inf"})
    return words(said, *(("eps0",) if "eps" in group and not group["eps"] else ()))


__all__ = ["Evidence", "Said", "diagnose", "explain", "message", "optimizer_explanation", "words"]
