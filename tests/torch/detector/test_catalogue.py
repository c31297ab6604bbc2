"""Every kind of NaN/Inf in the catalogue is reported at the exact line, phase, op and node."""

from __future__ import annotations

import linecache

import pytest
import torch

import nanguard
from tests.torch.detector import programs
from tests.torch.detector.programs import CATALOGUE, STORY_CASES, line_of

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("case", CATALOGUE + STORY_CASES, ids=lambda c: c.name)
def test_reports_exact_location(case, exhaustive):
    with nanguard.detect(mode="record", check=case.check, exhaustive=exhaustive) as d:
        case.fn()
    r = d.report
    assert r is not None, f"{case.name}: nothing reported"
    assert (r.phase, r.kind, r.op, r.node, r.module) == (case.phase, case.kind, case.op, case.node, case.module)
    assert (r.file, r.line) == (case.file, case.line)   # the programs file, or a seed story's own file
    assert r.code == linecache.getline(case.file, case.line).strip()
    if case.phase == "backward":
        # The line of a backward finding is the forward line that created the failing node.
        assert (r.forward_file, r.forward_line) == (r.file, r.line)
        assert r.call_file == case.file and r.call_line is not None
    assert r.explanation and r.suggestion and r.message
    assert r.outputs and any(not s.finite for s in r.outputs)


@pytest.mark.parametrize("exhaustive", MODES)
def test_raise_mode_raises_floating_point_error_with_report(exhaustive):
    with pytest.raises(FloatingPointError) as info:
        with nanguard.detect(exhaustive=exhaustive):
            programs.distance_matrix()
    err = info.value
    assert isinstance(err, nanguard.NonFiniteError)
    assert err.report.phase == "backward" and err.report.line == line_of("distance_matrix")
    assert "backward of sqrt" in str(err)


@pytest.mark.parametrize("exhaustive", MODES)
def test_first_finding_in_program_order_wins(exhaustive):
    # A forward overflow (the exp) comes before the NaN it causes in the backward.
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        programs.where_log1p_exp()
    assert (d.report.phase, d.report.op, d.report.kind) == ("forward", "aten.exp.default", "inf")
    assert d.report.line == line_of("where_log1p_exp")


@pytest.mark.parametrize("exhaustive", MODES)
def test_created_not_downstream_symptom(exhaustive):
    """The NaN made in `bad` flows through `head` and the loss; `bad` is blamed."""
    torch.manual_seed(0)
    net = programs.Net()
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        loss = net(torch.randn(3, 4)).pow(2).mean()
        loss.backward()
    assert d.report.module == "net.bad" and d.report.line == line_of("module_forward")


@pytest.mark.parametrize("exhaustive", MODES)
def test_check_filters_kind(exhaustive):
    with nanguard.detect(mode="record", check="inf", exhaustive=exhaustive) as d:
        programs.zero_over_zero()        # NaN only
    assert d.report is None
    with nanguard.detect(mode="record", check="nan", exhaustive=exhaustive) as d:
        programs.log_of_zero()           # -inf only
    assert d.report is None
    with nanguard.detect(mode="record", check=["nan", "inf"], exhaustive=exhaustive) as d:
        programs.log_of_zero()
    assert d.report is not None and d.report.kind == "inf"


def test_backward_blames_source_not_loss():
    """detect_anomaly blames the loss; nanguard blames the sqrt that made the NaN."""
    with nanguard.detect(mode="record") as d:
        programs.distance_matrix()
    assert d.report.node == "SqrtBackward0"
    assert d.report.forward_op == "aten.sqrt.default"
    assert d.report.forward_inputs[0].zeros == 10        # the diagonal
    assert d.report.step is None                         # at the first backward: no loop seen yet
