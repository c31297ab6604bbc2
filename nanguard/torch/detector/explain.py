"""Explanations and fixes: why this op made NaN/Inf here, in plain language, and what to use.

The rules live once in `nanguard.core.why`, keyed by the *forward* op's base name and the
phase; `probe.facts` hands them a finding's exact counts and, through `probe.TorchProbe`,
the tensors and their autograd history while at hand. The words come from the catalogue
alone: the report's explanation is the facts followed by the hazard's why, its suggestion
the hazard's fix, the same texts that ``nanguard lint`` prints for the same hazard.
"""

from __future__ import annotations

import torch

from nanguard.core import why
from nanguard.core.report import message
from nanguard.core.why import Said
from nanguard.torch.detector.evidence import Evidence
from nanguard.torch.detector.probe import facts


def diagnose(ev: Evidence) -> Said:
    """The hazard behind a finding, with its facts; ``unexplained`` when no rule applies."""
    return why.diagnose(facts(ev))


def words(said: Said, *extra: str) -> tuple[str, str]:
    """(explanation, suggestion) of a diagnosis, in the catalogue's words; ``extra`` names more
    evidence templates of the same hazard to state after the first."""
    return why.words(said, "torch", *extra)


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
