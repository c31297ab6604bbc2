"""Detect & locate for TensorFlow: the first NaN/Inf, eager or compiled, forward or backward, and why.

``nanguard.tf.detect()`` is the context manager / decorator; ``Report`` is what it finds (the
same `nanguard.core.report.Report` as for torch); ``nanguard run script.py`` enters it for a
program that imports TensorFlow.
"""

from nanguard.core.report import NonFiniteWarning, Report
from nanguard.core.summary import TensorSummary
from nanguard.tf.detector.context import detect

__all__ = ["detect", "Report", "TensorSummary", "NonFiniteWarning"]
