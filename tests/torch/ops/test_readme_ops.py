"""The README's words on safe ops that return a non-finite value run as written."""

from __future__ import annotations

import os
import re

import torch

import nanguard

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_readme_nonfinite_safe_op_examples_run_and_are_reported():
    """`nanguard.acos(...)` is NaN, `nanguard.xlogy(...)` a real −inf, both reported: as
    written in the README (Python numbers are refused, as by torch's own ops)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = " ".join(fh.read().split())
    claims = re.findall(r"`(nanguard\.\w+\([^`]*\))` is (NaN|a real −inf)", readme)
    assert len(claims) == 2, claims
    for expression, what in claims:
        with nanguard.detect(mode="record") as d:
            eval(expression, {"torch": torch, "nanguard": nanguard})   # noqa: S307 (README text)
        assert d.report is not None, expression
        assert d.report.what == {"NaN": "NaN", "a real −inf": "-Inf"}[what], expression
