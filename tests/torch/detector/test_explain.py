"""Explanations say why with the counts that prove it; suggestions name the fix."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import nanguard
from tests.torch.detector import programs


def _report(fn, **kw):
    with nanguard.detect(mode="record", **kw) as d:
        fn()
    assert d.report is not None
    return d.report


@pytest.mark.parametrize("fn, kw, why, fix", [
    (programs.distance_matrix, {}, "10 of 100 inputs were exactly 0", "nanguard.distance_matrix"),
    (programs.sqrt_of_negative, {}, "2 of 2 inputs are negative", "nanguard.sqrt"),
    (programs.log_of_zero, {}, "1 of 3 inputs are exactly 0", "nanguard.xlogy"),
    (programs.exp_overflow, {}, "1 of 2 inputs exceed it", "nanguard.logsumexp"),
    (programs.where_log1p_exp, {"check": "nan"}, "0·inf = NaN", "nanguard.softplus"),
    (programs.mean_over_empty_sequence, {}, "denominators are 0", "nanguard.masked_mean"),
    (programs.x_over_zero, {}, "2 of 2 denominators are 0", "nanguard.div"),
    (programs.cross_entropy_zero_prob, {"check": "nan"}, "0·log(0)", "nanguard.entropy"),
    (programs.fully_masked_softmax, {}, "every entry of 1 of 2 rows is −inf",
     "nanguard.softmax(x, dim, mask=mask)"),
    (programs.logsumexp_all_masked, {}, "on 1 of 2 rows", "nanguard.logsumexp"),
    (programs.xlogy_at_zero, {}, "x/y, which is 0/0", "nanguard.xlogy"),
    (programs.acos_out_of_range, {}, "defined on [−1, 1] only", "nanguard.acos"),
    (programs.float16_overflow, {}, "float16's largest finite value 65504", "torch.autocast"),
    (programs.float16_cast_overflow, {}, "float16's largest finite value 65504", "float32"),
    (programs.pow_half_at_zero, {}, "inf at x = 0 when p < 1 (p = 0.5)", "nanguard.pow"),
    (programs.nan_data_into_model, {}, "already NaN when it reached this op", "Check the data"),
    (programs.attention_fully_masked, {}, "every entry of", "nanguard.softmax"),
])
def test_explanation_and_fix(fn, kw, why, fix):
    r = _report(fn, **kw)
    assert why in r.explanation, r.explanation
    assert fix in r.suggestion, r.suggestion


def test_log_of_softmax_suggests_log_softmax():
    with nanguard.detect(mode="record") as d:
        logits = torch.tensor([[0.0, 200.0]])
        torch.log(F.softmax(logits, -1))
    assert "F.log_softmax" in d.report.suggestion


def test_unknown_op_gets_a_generic_but_honest_explanation():
    with nanguard.detect(mode="record") as d:
        torch.special.i0(torch.tensor([1000.0]))
    r = d.report
    assert r.op == "aten.special_i0.default" or r.op.startswith("aten.i0")
    assert "float32's largest finite value" in r.explanation or "produced Inf" in r.explanation
