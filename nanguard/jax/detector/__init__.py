"""Detect & locate for JAX: find the first primitive that made NaN/Inf, forward or backward,
at the user's line, and explain it.

``nanguard.jax.detect()`` is the context manager / decorator; ``Report`` is what it finds
(the same `nanguard.core.report.Report` as for torch).
"""

from nanguard.core.report import NonFiniteWarning, Report
from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.jax.detector.context import detect

__all__ = ["detect", "Report", "TensorSummary", "ScalarArg", "NonFiniteWarning"]
