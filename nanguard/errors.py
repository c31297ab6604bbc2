"""The one exception type every pillar raises for a non-finite value."""

from __future__ import annotations

from typing import Any, Optional


class NonFiniteError(FloatingPointError):
    """A NaN or ±Inf was found where the program asked nanguard to stop.

    Subclasses ``FloatingPointError`` (as ``numpy.seterr(all="raise")`` does), so existing
    ``except FloatingPointError`` handlers keep working. ``report`` carries the structured
    finding (a detection ``Report`` or a guard summary), or None.
    """

    def __init__(self, message: str, report: Optional[Any] = None) -> None:
        super().__init__(message)
        self.report = report


class UnsupportedVersionError(RuntimeError):
    """The installed framework lacks a private API that one nanguard feature is built on.

    Raised when that feature is used, never at import, so the features that do not need the
    missing API keep working. The message names the feature, the first framework version
    known to have the API, and the installed version.
    """
