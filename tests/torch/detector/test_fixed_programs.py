"""Every catalogued bug, fixed the way its report says, runs clean under the detector.

A false alarm on the fixed program would send a user who followed the advice back to
square one; so each fix runs in both checking modes, and its values and gradients are
finite (the fix is real, not a silenced detector).
"""

from __future__ import annotations

import inspect

import pytest
import torch

import nanguard

from .programs import CATALOGUE, FIXED

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]
UNFIXABLE = {"inf_minus_inf", "nan_literal"}  # the program is its own bug: nothing to keep


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors(item)


def test_every_catalogued_bug_has_a_fixed_twin():
    assert set(FIXED) | UNFIXABLE >= {c.name for c in CATALOGUE}


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_program_is_quiet_and_finite(name, exhaustive):
    with nanguard.detect(exhaustive=exhaustive, mode="record") as d:
        result = FIXED[name]()
    assert d.report is None, d.report.format(color=False)
    values = list(_tensors(result)) or [torch.tensor(result)]
    for t in values:
        finite = torch.isfinite(t.detach().float()) | (t.detach() == float("-inf"))
        assert bool(finite.all()), (name, t)


# A safe op is one op to the detector: its repaired intermediates are not findings, but what
# it returns is judged like any op's result.
def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


class _RealSingularity(torch.nn.Module):
    def forward(self, x):
        return nanguard.xlogy(x, torch.zeros_like(x))   # x > 0 = y: -inf, a real singularity


class _EmptyLogSumExp(torch.nn.Module):
    def forward(self, x):
        keep = torch.zeros_like(x, dtype=torch.bool)
        return nanguard.logsumexp(x, dim=-1, mask=keep)  # log of an empty sum: -inf by convention


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_real_singularity_of_a_safe_op_is_reported_at_the_users_line(exhaustive):
    net = _RealSingularity()
    with nanguard.detect(exhaustive=exhaustive, mode="record", modules={"net": net}) as d:
        net(torch.ones(3))
    r = d.report
    assert r is not None and (r.phase, r.kind, r.op) == ("forward", "inf", "nanguard.xlogy")
    assert r.line == _line_of(_RealSingularity.forward, "nanguard.xlogy(") and r.module == "net"


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_safe_ops_convention_infinity_is_not_a_finding(exhaustive):
    net = _EmptyLogSumExp()
    x = torch.randn(2, 3, requires_grad=True)
    with nanguard.detect(exhaustive=exhaustive, mode="record", modules={"net": net}) as d:
        out = net(x)
        torch.where(torch.isinf(out), 0.0, out).sum().backward()
    assert d.report is None and bool((x.grad == 0).all())


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_nan_a_safe_op_returns_is_reported_as_that_op(exhaustive):
    x = torch.tensor([0.5, 1.5])                 # acos beyond 1 + rounding: NaN by contract
    with nanguard.detect(exhaustive=exhaustive, mode="record") as d:
        nanguard.acos(x)
    r = d.report
    assert r is not None and (r.phase, r.kind, r.op, r.torch_function) == (
        "forward", "nan", "nanguard.acos", "nanguard.acos")
    assert r.line == _line_of(test_a_nan_a_safe_op_returns_is_reported_as_that_op, "nanguard.acos(x)")


@pytest.mark.parametrize("exhaustive", MODES)
def test_nan_data_through_a_safe_op_is_an_input_finding(exhaustive):
    scores = torch.tensor([[1.0, float("nan")], [0.0, 1.0]])
    with nanguard.detect(exhaustive=exhaustive, mode="record") as d:
        nanguard.softmax(scores, dim=-1)
    assert d.report is not None and (d.report.phase, d.report.kind) == ("input", "nan")
