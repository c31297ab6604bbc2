"""Findings made in DataLoader worker processes keep their report across the process boundary.

A DataLoader worker forked while detection is active runs ``__getitem__`` under the same
checks, so a NaN made there raises ``NonFiniteError`` in the worker. PyTorch sends worker
exceptions to the main process as a ``torch._utils.ExceptionWrapper``, which keeps only the
exception's type and formatted traceback and re-raises ``exc_type(message)``: the report is
lost and the main process's detection never hears of it (``nanguard run --json`` wrote
``"found": false``). While detection hooks are installed, the wrapper also keeps the report
(a `Report` pickles with it through the worker's queue) and, on the re-raise, hands it to the
main thread's active detection, which keeps it and raises as if it had found it there.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

_ATTRIBUTE = "nanguard_report"
_ORIGINAL: Optional[tuple] = None   # (ExceptionWrapper.__init__, ExceptionWrapper.reraise)


def _wrapper_class() -> Optional[type]:
    from nanguard.torch._compat import ExceptionWrapper
    return ExceptionWrapper   # None in a torch without it: worker exceptions cannot be followed


def _make_init(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, exc_info: Any = None, where: str = "in background") -> None:
        original(self, exc_info, where)
        from nanguard.core.report import Report
        from nanguard.errors import NonFiniteError
        value = (exc_info if exc_info is not None else sys.exc_info())[1]
        if isinstance(value, NonFiniteError) and isinstance(value.report, Report):
            setattr(self, _ATTRIBUTE, value.report)
    return __init__


def _make_reraise(original: Callable[[Any], None]) -> Callable[[Any], None]:
    def reraise(self: Any) -> None:
        report = self.__dict__.get(_ATTRIBUTE)
        if report is None:
            return original(self)
        from nanguard.errors import NonFiniteError
        report = report.with_notes(f"found {self.where}")
        adopt(report)
        raise NonFiniteError(report.format(), report) from None
    return reraise


def adopt(report: Any) -> None:
    """Give a finding made in another process to this thread's innermost active detection.

    It keeps the report (so ``detect().report`` and ``nanguard run --json`` have it) and, in
    ``raise`` mode, raises it. Without an active detection, or once it has a report, nothing
    happens here and the caller raises.
    """
    from nanguard.torch.detector._state import STATE
    if STATE.stack and STATE.replay is None:
        act = STATE.stack[-1]
        if not act.tripped:
            act.finish(report)


def install() -> None:
    global _ORIGINAL
    cls = _wrapper_class()
    if cls is None or _ORIGINAL is not None:
        return
    _ORIGINAL = (cls.__init__, cls.reraise)
    cls.__init__ = _make_init(cls.__init__)
    cls.reraise = _make_reraise(cls.reraise)


def uninstall() -> None:
    global _ORIGINAL
    cls = _wrapper_class()
    if cls is None or _ORIGINAL is None:
        return
    cls.__init__, cls.reraise = _ORIGINAL
    _ORIGINAL = None
