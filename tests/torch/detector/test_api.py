"""The public surface: options, modes, decorator use, nesting, the Report and its JSON."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

import nanguard
from nanguard.torch.detector import NonFiniteWarning, Report
from tests.torch.detector import programs
from tests.torch.detector.programs import line_of

HERE = os.path.abspath(__file__)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"check": "nans"}, ValueError, "check must be 'nan', 'inf', 'both' or 'all'"),
    ({"check": []}, ValueError, "check must name"),
    ({"check": 3}, TypeError, "check must be a string"),
    ({"mode": "stop"}, ValueError, "mode must be 'raise', 'warn' or 'record'"),
    ({"exhaustive": "yes"}, TypeError, "exhaustive must be True or False"),
    ({"modules": 3}, TypeError, "modules must be an nn.Module"),
    ({"modules": {"m": 3}}, TypeError, "must contain nn.Module"),
])
def test_bad_options_fail_early_with_clear_message(kwargs, error, words):
    with pytest.raises(error, match=words):
        nanguard.detect(**kwargs)


def test_warn_mode_warns_at_user_line_and_continues():
    with pytest.warns(NonFiniteWarning) as caught:
        with nanguard.detect(mode="warn") as d:
            y = torch.log(torch.zeros(2))
            after = torch.ones(1) * 3            # the program goes on
    assert after.item() == 3 and torch.isinf(y).all()
    assert len(caught) == 1
    assert caught[0].filename == HERE
    assert "forward of log" in str(caught[0].message)
    assert d.report is not None and d.report.op == "aten.log.default"


def test_warn_mode_backward_waits_for_the_forward_line():
    """Exhaustive mode finds a backward NaN live; the warning comes once the backward is over,
    with the forward line learnt from the replay."""
    with pytest.warns(NonFiniteWarning) as caught:
        with nanguard.detect(mode="warn", exhaustive=True) as d:
            programs.xlogy_at_zero()
    assert len(caught) == 1
    assert d.report.node == "XlogyBackward0" and d.report.line == line_of("xlogy_at_zero")
    assert f"programs.py:{line_of('xlogy_at_zero')}" in str(caught[0].message)


def test_record_mode_keeps_only_the_first_finding():
    with nanguard.detect(mode="record") as d:
        programs.log_of_negative()                # first: NaN in log
        programs.zero_over_zero()                 # second: not recorded
    assert d.report.op == "aten.log.default" and d.report.line == line_of("log_of_negative")


def test_decorator_form_raises_on_every_call():
    @nanguard.detect()
    def step():
        return torch.sqrt(torch.tensor([-1.0]))

    for _ in range(2):
        with pytest.raises(nanguard.NonFiniteError) as info:
            step()
        assert info.value.report.op == "aten.sqrt.default"


def test_decorated_clean_call_after_a_failing_one_has_no_report():
    d = nanguard.detect(mode="record")

    @d
    def f(x):
        return torch.log(x)

    f(torch.zeros(1))
    assert d.report is not None
    f(torch.ones(1))
    assert d.report is None                       # a fresh use starts clean


def test_nested_contexts_report_to_the_innermost():
    outer = nanguard.detect(mode="record")
    inner = nanguard.detect(mode="record", check="nan")
    with outer:
        with inner:
            torch.log(torch.zeros(1))             # -inf: inner checks NaN only
            torch.sqrt(torch.tensor([-1.0]))      # NaN: inner reports it
        torch.exp(torch.tensor([1000.0]))         # back in outer
    assert inner.report.op == "aten.sqrt.default"
    assert outer.report.op == "aten.exp.default"


def test_user_exceptions_propagate_unchanged_and_state_is_restored():
    with pytest.raises(KeyError, match="mine"):
        with nanguard.detect():
            torch.nn.Linear(2, 2)(torch.ones(2))
            raise KeyError("mine")
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        with nanguard.detect():
            torch.nn.Linear(2, 2)(torch.ones(3, 3))


def test_modules_argument_names_paths():
    torch.manual_seed(0)
    net = programs.Net()
    with nanguard.detect(mode="record", modules={"model": net}) as d:
        net(torch.randn(2, 4))
    assert d.report.module == "model.bad"


def test_report_fields_and_json():
    with nanguard.detect(mode="record") as d:
        programs.distance_matrix()
    r = d.report
    assert isinstance(r, Report)
    data = r.to_dict()
    required = {"found", "phase", "op", "file", "line", "code", "module", "message", "explanation",
                "suggestion", "inputs", "forward_file", "forward_line"}
    assert required <= data.keys()
    assert data["found"] is True
    text = json.dumps(data, allow_nan=False)          # valid JSON: no bare NaN/Infinity
    back = json.loads(text)
    assert back["line"] == line_of("distance_matrix")
    assert back["node"] == "SqrtBackward0" and back["forward_line"] == back["line"]
    summary = back["inputs"][0]
    for key in ("shape", "dtype", "device", "min", "max", "nan", "posinf", "neginf", "zeros", "first_bad_index"):
        assert key in summary
    out = back["outputs"][0]
    assert out["nan"] == 10 and out["first_bad_index"] == [0, 0]
    assert back["forward_inputs"][0]["zeros"] == 10
    assert r.to_json() == json.dumps(data, allow_nan=False)


def test_report_text_plain_and_coloured(monkeypatch):
    with nanguard.detect(mode="record") as d:
        programs.distance_matrix()
    plain = d.report.format(color=False)
    assert "\033[" not in plain
    assert plain.startswith("nanguard: first non-finite value (NaN) — backward of sqrt")
    assert f"{line_of('distance_matrix')} │ return torch.sqrt(" in plain
    assert "why sqrt's gradient is 1/(2·sqrt(x)); 10 of 100 inputs were exactly 0" in plain
    assert "fix nanguard.distance_matrix" in plain
    assert "of the training loop" not in plain      # stopped in the first backward: no loop seen yet
    assert "\033[1;31m" in d.report.format(color=True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\033[" not in str(d.report)


def test_inf_report_shows_sign_and_scalars():
    with nanguard.detect(mode="record") as d:
        torch.full((2,), 5.0).masked_fill(torch.tensor([True, False]), float("-inf")) * 0
    assert d.report is not None and d.report.kind == "nan"     # -inf * 0: the NaN is made here
    assert d.report.op == "aten.mul.Tensor"
    with nanguard.detect(mode="record") as d:
        torch.log(torch.zeros(3))
    assert d.report.what == "-Inf" and d.report.outputs[0].neginf == 3


def test_training_step_number():
    torch.manual_seed(0)
    w = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.5)
    with nanguard.detect(mode="record") as d:
        for step in range(5):
            opt.zero_grad()
            loss = torch.sqrt(w.sum() - 1.0)      # w shrinks; at step 3 the sqrt argument is negative
            loss.backward()
            opt.step()
    assert d.report.phase == "forward" and d.report.op == "aten.sqrt.default"
    assert d.report.step == 3
    assert "  step 3 of the training loop" in d.report.format(color=False)


@pytest.mark.parametrize("exhaustive", [False, True])
def test_a_program_with_no_loop_has_no_step(exhaustive):
    """One forward and one backward, no optimizer: not "step 1 of the training loop"."""
    w = torch.zeros(3, requires_grad=True)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        torch.sqrt(w).sum().backward()
    assert d.report is not None and d.report.phase == "backward" and d.report.step is None
    assert "training loop" not in d.report.format(color=False)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        torch.log(w)
    assert d.report is not None and d.report.step is None and "training loop" not in str(d.report)


@pytest.mark.parametrize("exhaustive", [False, True])
def test_tensors_without_readable_values_are_left_alone(exhaustive):
    """Meta, fake and nested tensors pass through detection without errors or findings."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with nanguard.detect(exhaustive=exhaustive) as d:
        torch.empty(3, device="meta") + 1
        lin = torch.nn.Linear(3, 3, device="meta")
        lin(torch.randn(2, 3, device="meta")).sum().backward()
        with FakeTensorMode():
            torch.nn.Linear(3, 1)(torch.randn(3) * 2).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # nested tensors warn that they are a prototype
            torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]) * 2
    assert d.report is None
