"""Detect & locate: find the first NaN/Inf, forward or backward, and explain it.

``nanguard.detect()`` is the context manager / decorator; ``Report`` is what it finds;
``nanguard run script.py`` (see `nanguard.detect.cli`) runs a whole program under it.
"""

from nanguard.core.report import NonFiniteWarning, Report
from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.torch.detector.context import detect
from nanguard.torch.detector.frames import Frame

__all__ = ["detect", "Report", "TensorSummary", "ScalarArg", "Frame", "NonFiniteWarning"]
