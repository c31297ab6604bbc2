"""The `make demo` section: the shipped NaN example fails under `nanguard run`, the fix passes."""

from __future__ import annotations

import io
import os
import runpy
import sys

import pytest
import torch

import nanguard
from nanguard.demo import Show

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "examples")


@pytest.mark.slow
def test_demo_section_runs_the_real_example():
    from nanguard.demo import detect as section
    out = io.StringIO()
    section.run(Show(out))
    text = out.getvalue()
    assert "nanguard: first non-finite value (NaN) — backward of sqrt" in text
    assert "exit status 1: backward of torch.sqrt (aten.div.Tensor, node SqrtBackward0) at distance_matrix_nan.py:" in text
    assert "✓ exit status 0" in text and "step 5: loss" in text
    assert "detect() stayed quiet" in text


def test_examples_in_process():
    """The same two scripts, in this process: the buggy one is caught at the sqrt line, the fixed
    one trains with finite losses."""
    sys.path.insert(0, EXAMPLES)
    try:
        buggy = runpy.run_path(os.path.join(EXAMPLES, "distance_matrix_nan.py"))
        with nanguard.detect(mode="record") as d:
            buggy["main"](steps=2)
        assert d.report.node == "SqrtBackward0" and d.report.function == "compute_distance_matrix"
        assert "nanguard.distance_matrix" in d.report.suggestion
        fixed = runpy.run_path(os.path.join(EXAMPLES, "distance_matrix_fixed.py"))
        with nanguard.detect() as d:
            final = fixed["main"](steps=5)
        assert d.report is None and torch.isfinite(torch.tensor(final))
    finally:
        sys.path.remove(EXAMPLES)
