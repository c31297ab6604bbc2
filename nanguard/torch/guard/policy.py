"""What GradGuard does with a bad step, the torch side: the policies it offers, the monitor
argument and the event of a bad gradient step. The policies, their arguments, the decision
and the error message are framework-free, in :mod:`nanguard.core.guard_policy` (re-exported
here).
"""

from __future__ import annotations

import math
from typing import Any

from nanguard.core.guard_policy import (  # noqa: F401  (re-exported for the torch guard)
    DEFAULT_MAX_CONSECUTIVE,
    POLICIES,
    ROLLBACK,
    check_max_consecutive,
    check_max_events,
    check_policy,
    decide,
    raise_message,
)
from nanguard.core.guard_records import GRADIENTS, GuardEvent, ParamIssue
from nanguard.torch.guard.monitor import GradNormMonitor
from nanguard.torch.guard.params import ParamTable
from nanguard.torch.guard.verdict import Verdict

# GradGuard's policies: the shared ones, and "rollback" (its snapshot is torch's, `rollback.py`)
GUARD_POLICIES = POLICIES + (ROLLBACK,)


def check_monitor(monitor: object) -> GradNormMonitor | None:
    if monitor is True:
        return GradNormMonitor()
    if monitor is False or monitor is None:
        return None
    if not isinstance(monitor, GradNormMonitor):
        raise TypeError(f"nanguard.GradGuard: `monitor` must be a bool or a GradNormMonitor, "
                        f"got {type(monitor).__name__}")
    return monitor


def gradient_event(step: int, action: str, verdict: Verdict, table: ParamTable,
                   **extra: Any) -> GuardEvent:
    """The record of a bad gradient step: which parameters, how many NaN/Inf elements
    (`extra`: further fields of the event, a rollback's)."""
    issues: tuple[ParamIssue, ...] = ()
    if verdict.diagnosis is not None:
        issues = tuple(  # output side first: where it entered the backward pass
            ParamIssue(table.names[i], table.shapes[i], nan, inf, i)
            for i, (nan, inf) in sorted(verdict.diagnosis.counts.items(), reverse=True)
        )
    total = verdict.total_value
    return GuardEvent(step=step, kind=GRADIENTS, action=action, params=issues,
                      ranks=verdict.ranks, total_norm=None if math.isnan(total) else total,
                      scale=verdict.scale, **extra)
