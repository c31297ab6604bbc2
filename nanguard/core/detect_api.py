"""What every backend's ``detect()`` object shows of itself: its options, its first report,
its ``repr``, and its reuse as a decorator.

Each backend's ``detect`` (``nanguard.detect``, ``nanguard.tf.detect``, ``nanguard.jax.detect``)
keeps its options and report in a session of its own (`DetectSession` is what this base
reads of it) and adds only how it enters and leaves; the read side is written once here, so
the three objects answer alike.
"""

from __future__ import annotations

import contextlib
from typing import ClassVar, FrozenSet, Optional, Protocol

from nanguard.core.options import check_name
from nanguard.core.report import Report


class DetectSession(Protocol):
    """The part of a backend's session that `DetectBase` reads."""

    report: Optional[Report]

    @property
    def check(self) -> FrozenSet[str]: ...

    @property
    def mode(self) -> str: ...

    @property
    def exhaustive(self) -> bool: ...

    def set_report(self, report: Optional[Report]) -> None: ...


class DetectBase(contextlib.ContextDecorator):
    """The options and the first report of a ``detect()``, read from its session. A subclass
    sets `API` (its public name, for ``repr`` and errors) and ``_session``."""

    API: ClassVar[str] = "nanguard.detect"
    _session: DetectSession

    @property
    def report(self) -> Optional[Report]:
        """The first finding (None while there is none); reset when a fresh use begins."""
        return self._session.report

    @report.setter
    def report(self, value: Optional[Report]) -> None:
        self._session.set_report(value)

    @property
    def check(self) -> FrozenSet[str]:
        return self._session.check

    @property
    def mode(self) -> str:
        return self._session.mode

    @property
    def exhaustive(self) -> bool:
        return self._session.exhaustive

    def __repr__(self) -> str:
        return (f"{self.API}(check={check_name(self.check)!r}, mode={self.mode!r}, exhaustive={self.exhaustive}, "
                f"found={self.report is not None})")

    def _recreate_cm(self) -> "DetectBase":
        # ContextDecorator re-uses this object for every call of a decorated function; the
        # backends keep what one call owns per thread (or per activation), so sharing it is safe
        return self


__all__ = ["DetectBase", "DetectSession"]
