"""What a replay answers: the typed outcome of re-running a unit under the op-level check.

Callers branch on the type; `replay_notes` is the one place that words an outcome for a
report the replay could not localise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Union

from nanguard.core.report import Report


@dataclass(frozen=True)
class Reproduced:
    """The replay found the op: ``report`` says where and why."""

    report: Report


@dataclass(frozen=True)
class NotReproduced:
    """The replay ran through without a finding (e.g. only deliberate infinities)."""


@dataclass(frozen=True)
class NotReplayable:
    """What would have to be re-run was not recorded; ``reason`` says what is missing."""

    reason: str


@dataclass(frozen=True)
class ReplayFailed:
    """Re-running ``unit`` (``"module"`` or ``"backward"``) raised ``error`` (the original
    call had succeeded, so this is nanguard's failure to report, not the program's)."""

    unit: str
    error: BaseException


ReplayResult = Union[Reproduced, NotReproduced, NotReplayable, ReplayFailed]


def replay_notes(result: ReplayResult) -> List[str]:
    """What a report that the replay could not localise says about the replay."""
    if isinstance(result, NotReproduced):
        return ["the replay did not reproduce the non-finite value"]
    if isinstance(result, NotReplayable):
        return [result.reason]
    if isinstance(result, ReplayFailed):
        return [f"replaying the {result.unit} failed ({type(result.error).__name__}: {result.error})"]
    return []
