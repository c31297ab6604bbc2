"""What one thread's detection knows while it runs: the session, the backward op, the tape call.

`Session` holds a ``detect()``'s options and its first report. `Local` is per thread: the
active sessions (innermost last), the forward op whose gradient is being built (set by the
gradient-dispatch wrapper in `hooks`), where ``tape.gradient`` was called, the optimizer whose
update is running, and a busy flag so
the TensorFlow ops nanguard itself runs are never checked.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, List, Optional

from nanguard.core.location import Frame
from nanguard.core.report import NonFiniteWarning, Report
from nanguard.errors import NonFiniteError


@dataclass
class Session:
    """One ``detect()``: its options and the first finding (after which checking stops)."""

    check: frozenset
    mode: str
    exhaustive: bool
    report: Optional[Report] = None

    def set_report(self, report: Optional[Report]) -> None:
        self.report = report

    def deliver(self, report: Report) -> None:
        """Keep the first finding and act on it as ``mode`` says."""
        if self.report is not None:
            return
        self.report = report
        if self.mode == "raise":
            raise NonFiniteError(report.format(color=False), report)
        if self.mode == "warn":
            warnings.warn(report.format(color=False), NonFiniteWarning, stacklevel=4)


@dataclass
class Backward:
    """The forward op whose gradient function is running (eager) or being traced (graph)."""

    op: str
    frame: Optional[Frame]
    layer: Optional[str]
    inputs: List[Any] = field(default_factory=list)
    call: Optional[Frame] = None
    call_name: Optional[str] = None  # what the user called at ``call`` ("tape.gradient()", "model.fit()")


class Local(threading.local):
    def __init__(self) -> None:
        self.sessions: List[Session] = []
        self.backward: Optional[Backward] = None
        self.gradient_call: Optional[Frame] = None
        self.gradient_call_name: Optional[str] = None  # "tape.gradient()", or "model.fit()" when Keras took it
        self.optimizer: Any = None  # the optimizer whose update is being built or run
        self.busy = False

    @property
    def session(self) -> Optional[Session]:
        """The innermost active session that has not found anything yet."""
        for session in reversed(self.sessions):
            if session.report is None:
                return session
        return None


LOCAL = Local()

__all__ = ["Backward", "LOCAL", "Local", "Session"]
