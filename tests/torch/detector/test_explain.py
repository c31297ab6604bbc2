"""Explanations say why with the counts that prove it; suggestions name the fix."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import nanguard
from nanguard.core.hazards import HAZARDS, suggestion
from tests.torch.detector import programs


def _report(fn, **kw):
    with nanguard.detect(mode="record", **kw) as d:
        fn()
    assert d.report is not None
    return d.report


@pytest.mark.parametrize("fn, kw, why, fix", [
    (programs.distance_matrix, {}, "10 of 100 inputs were exactly 0 (10 on the diagonal)",
     "nanguard.distance_matrix"),
    (programs.sqrt_of_negative, {}, "2 of 2 inputs are negative", "nanguard.sqrt"),
    (programs.log_of_zero, {}, "1 of 3 inputs are exactly 0", "nanguard.xlogy"),
    (programs.exp_overflow, {}, "1 of 2 inputs exceed 88.72", "nanguard.logsumexp"),
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
    (programs.pow_half_at_zero, {}, "1 of 2 bases were 0 (p = 0.5)", "nanguard.pow"),
    (programs.nan_data_into_model, {}, "already NaN when it reached this op", "Check the data"),
    (programs.module_backward, {}, "1 of 4 squared norms were exactly 0", "nanguard.norm(x, dim)"),
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


# ------------------------------------------------------------------------------------------
# The hazard is recognised from what the runtime knows (the op, its inputs' values, their
# autograd history), never from the words on the user's line.
def _said(fn, **kw):
    r = _report(fn, **kw)
    return r, [h.key for h in HAZARDS.values() if suggestion(h, **_FIELDS.get(h.key, {})) == r.suggestion]


_FIELDS = {"softmax_masked_row": {"fn": "nanguard.softmax"}}


def test_distance_matrix_known_by_its_zero_diagonal_not_by_its_name():
    def pairwise(points):
        a = (points * points).sum(-1)
        b = a[:, None] + a[None, :]
        c = 2 * points @ points.T
        return torch.sqrt(b - c)          # no "dist", "gram" or "-2*" on this line

    def run():
        p = torch.randn(6, 2, requires_grad=True)
        pairwise(p).sum().backward()

    torch.manual_seed(0)
    r, keys = _said(run)
    assert keys == ["distance_matrix"], (r.explanation, r.suggestion)
    assert "6 of 36 inputs were exactly 0 (6 on the diagonal)" in r.explanation


def test_distance_matrix_known_without_autograd_from_round_off_on_the_diagonal():
    def run():
        torch.manual_seed(0)
        x = torch.randn(50, 3) * 100
        sq = (x * x).sum(-1)
        m = sq[:, None] + sq[None, :] - 2 * x @ x.T
        assert float(m.diagonal().min()) < 0          # round-off made the diagonal negative
        torch.sqrt(m)

    r, keys = _said(run)
    assert keys == ["distance_matrix"] and "are round-off negatives" in r.explanation


def test_a_line_that_says_dist_is_not_taken_for_a_distance_matrix():
    def run():
        dist = torch.tensor([0.0, 4.0], requires_grad=True)
        torch.sqrt(dist).sum().backward()   # "dist" on the line, but a plain sqrt at 0

    r, keys = _said(run)
    assert keys == ["sqrt_zero"], r.suggestion
    assert "nanguard.distance_matrix" not in r.suggestion


@pytest.mark.parametrize("make, values, key", [
    (lambda x: F.softmax(x, -1), [-300.0, 300.0], "log_softmax"),
    (torch.sigmoid, [-300.0, 300.0], "log_sigmoid"),
    (lambda x: 1 - torch.sigmoid(x), [-300.0, 300.0], "log_one_minus_sigmoid"),
    (lambda x: torch.exp(x).sum(-1), [-300.0, -200.0], "logsumexp_overflow"),
    (lambda x: x.relu(), [-300.0, 300.0], "log_zero"),
])
def test_log_of_zero_is_named_by_the_op_that_made_the_zero(make, values, key):
    def run():
        x = torch.tensor([values], requires_grad=True)
        torch.log(make(x))

    r, keys = _said(run)
    assert keys == [key], (r.explanation, r.suggestion)


@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3)])  # nll_loss_forward and, per position, nll_loss2d
def test_cross_entropy_with_every_target_ignored_says_so(shape):
    """Library code divides by 0 kept targets: the report names the data's cause, not 'no hazard'."""
    logits = torch.randn(*shape, requires_grad=True)
    target = torch.full((shape[0],) + shape[2:], -100)
    with nanguard.detect(mode="record") as d:
        F.cross_entropy(logits, target).backward()
    r = d.report
    assert r is not None and r.phase == "forward"
    hazard = HAZARDS["loss_all_ignored"]
    assert r.explanation.endswith(hazard.why + "."), r.explanation
    assert "targets were ignored" in r.explanation
    assert r.suggestion == suggestion(hazard), r.suggestion


def test_cross_entropy_with_some_targets_kept_is_quiet():
    logits = torch.randn(4, 5, requires_grad=True)
    target = torch.tensor([-100, 2, -100, -100])
    with nanguard.detect(mode="record") as d:
        F.cross_entropy(logits, target).backward()
    assert d.report is None
