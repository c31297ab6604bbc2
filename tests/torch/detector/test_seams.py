"""The detector's internal seams, each pinned by a test that fails if it regresses.

* one `Session` per ``detect()``, handed to what needs it (no reaching into private state);
* replays answer with a typed outcome, worded in one place (`outcome.replay_notes`);
* every suspension of the live mode is a scope undone on every way out, exceptions included;
* a report is built once, optimizer blame included, and never rewritten afterwards.
"""

from __future__ import annotations

import ast
import os

import pytest
import torch

import nanguard
from nanguard.core.location import Frame
from nanguard.core.report import Report
from nanguard.torch.detector._state import STATE, capture_rng
from nanguard.torch.detector.build import OptimizerContext, make_report
from nanguard.torch.detector.outcome import NotReplayable, NotReproduced, ReplayFailed, Reproduced, replay_notes
from nanguard.torch.detector.replay import replay_backward, replay_module_forward
from nanguard.torch.detector.session import Session
from tests.torch.detector import programs

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]
BOTH = frozenset({"nan", "inf"})
DETECTOR = os.path.dirname(os.path.abspath(nanguard.torch.detector.__file__))


class OnceThenRaise(torch.nn.Module):
    """log of a negative number; any later call (a replay) draws a random number and raises."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:
            torch.rand(3)                       # moves the RNG: the replay must put it back
            raise RuntimeError("only once")
        return torch.log(x - 10.0)


class Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("from the module")


def _activation():
    return STATE.stack[-1]


def _live_on_top(act) -> bool:
    n = torch._C._len_torch_dispatch_stack()
    return n > 0 and torch._C._get_dispatch_stack_at(n - 1) is act.live


def _assert_live(act) -> None:
    """The activation checks again: live mode on top, not idle, no replay, no scope left open."""
    assert _live_on_top(act) and not act.live.idle
    assert STATE.replay is None and STATE.watch
    assert STATE.depth == 0 and STATE.modules == [] and STATE.in_backward == 0 and STATE.in_optimizer == 0


# ------------------------------------------------------------------------- replay outcomes
def test_replay_of_a_module_answers_with_a_typed_outcome():
    torch.manual_seed(0)
    with nanguard.detect(mode="record") as d:
        act = _activation()
        x = torch.randn(3, 4)

        found = replay_module_forward(act, programs.LogLayer(), (x,), {}, capture_rng(), None)
        assert isinstance(found, Reproduced)
        assert (found.report.phase, found.report.op) == ("forward", "aten.log.default")
        assert replay_notes(found) == []
        _assert_live(act)

        clean = replay_module_forward(act, torch.nn.Linear(4, 4), (x,), {}, capture_rng(), None)
        assert isinstance(clean, NotReproduced)
        assert replay_notes(clean) == ["the replay did not reproduce the non-finite value"]
        _assert_live(act)

        module = OnceThenRaise()
        module.calls = 1                        # as if the original call had happened
        rng = torch.get_rng_state()
        failed = replay_module_forward(act, module, (x,), {}, capture_rng(), None)
        assert isinstance(failed, ReplayFailed) and failed.unit == "module"
        assert isinstance(failed.error, RuntimeError) and failed.error.__traceback__ is None   # keeps no frames
        assert replay_notes(failed) == ["replaying the module failed (RuntimeError: only once)"]
        assert torch.equal(torch.get_rng_state(), rng)
        _assert_live(act)

        torch.log(torch.zeros(1))               # still checking: the replays left nothing behind
    assert d.report.op == "aten.log.default"


def test_replay_of_a_backward_whose_loss_was_not_recorded_is_not_replayable():
    with nanguard.detect(mode="record"):
        act = _activation()
        with torch.no_grad():
            loss = torch.ones(())                # computed by no recorded call
        outcome = replay_backward(act, [], [loss], (), (), False, None)
        assert isinstance(outcome, NotReplayable)
        assert replay_notes(outcome) == [("the loss was not computed by recorded calls, so the backward could not "
                                          "be replayed")]
        _assert_live(act)


def test_a_module_whose_replay_fails_is_reported_with_the_failure():
    model = OnceThenRaise()
    with nanguard.detect(mode="record") as d:
        model(torch.ones(3))
    r = d.report
    assert (r.phase, r.kind, r.op, r.module) == ("forward", "nan", "OnceThenRaise.forward", "model")
    assert r.notes == ("replaying the module failed (RuntimeError: only once)",)
    assert r.how == "checked the module's output (the replay could not localise it further)"


# ------------------------------------------------------------------------- scoped suspensions
def test_an_exception_inside_a_suspended_block_restores_the_live_mode():
    with nanguard.detect(mode="record") as d:
        act = _activation()
        with pytest.raises(ValueError, match="inside"), act.suspended():
            assert not _live_on_top(act)
            raise ValueError("inside")
        _assert_live(act)
        torch.log(torch.zeros(1))               # top-level code: only the live mode sees it
    assert (d.report.phase, d.report.op) == ("forward", "aten.log.default")


def test_an_exception_inside_a_replay_scope_restores_everything():
    with nanguard.detect(mode="record") as d:
        act = _activation()
        with pytest.raises(KeyError), act.replaying():
            assert act.live.idle and not _live_on_top(act)
            raise KeyError("inside")
        _assert_live(act)
        torch.log(torch.zeros(1))
    assert d.report.op == "aten.log.default"


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_module_that_raises_restores_the_live_mode(exhaustive):
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        act = _activation()
        with pytest.raises(ValueError, match="from the module"):
            Raises()(torch.ones(2))
        _assert_live(act)
        torch.log(torch.zeros(1))
    assert d.report.op == "aten.log.default"


@pytest.mark.parametrize("exhaustive", MODES)
def test_an_optimizer_step_that_raises_is_closed_when_detection_ends(exhaustive):
    """The step's post hook never runs when the step raises; the detection's end closes it,
    so the thread is not left "inside an optimizer step" for every later detection."""
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure():
        raise ValueError("boom")

    with nanguard.detect(mode="record", exhaustive=exhaustive), pytest.raises(ValueError, match="boom"):
        opt.step(closure)
    assert STATE.in_optimizer == 0
    assert torch._C._len_torch_dispatch_stack() == 0
    with nanguard.detect(mode="record") as d:
        programs.module_forward()
    assert (d.report.phase, d.report.op, d.report.module) == ("forward", "aten.log.default", "net.bad")


# ------------------------------------------------------------------------- reports built once
def _adam_eps_zero(exhaustive: bool) -> Report:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=0.0)
    x = torch.randn(4, 3)
    x[:, 2] = 0.0
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for _ in range(2):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    return d.report


@pytest.mark.parametrize("exhaustive", MODES)
def test_reports_are_never_rewritten_after_they_are_built(exhaustive, monkeypatch):
    rewritten = []
    plain = Report.__setattr__

    def spy(self, name, value):
        if name in self.__dict__:               # set again after __init__ set it
            rewritten.append(name)
        plain(self, name, value)

    monkeypatch.setattr(Report, "__setattr__", spy)
    phases = set()
    for case in programs.CATALOGUE:
        with nanguard.detect(mode="record", check=case.check, exhaustive=exhaustive) as d:
            case.fn()
        assert d.report is not None, case.name
        phases.add(d.report.phase)
    r = _adam_eps_zero(exhaustive)
    assert (r.phase, r.op) == ("optimizer", "aten.addcdiv_.default" if exhaustive else "Adam.step")
    assert phases == {"forward", "backward", "input"}
    assert rewritten == []


def _nan_weight():
    w = torch.nn.Parameter(torch.tensor([1.0, float("nan")]))
    return w, torch.optim.SGD([w], lr=0.1)


def test_make_report_blames_the_last_optimizer_step_for_a_non_finite_parameter():
    w, opt = _nan_weight()
    use_at, step_at = Frame("/src/model.py", 3, "forward"), Frame("/src/train.py", 7, "train")
    ctx = OptimizerContext(check=BOTH, steps=2, last=opt, step_frame=step_at)
    with torch.no_grad():
        out = w * 2
    r = make_report(phase="input", kind="nan", op="aten.mul.Tensor", inputs=[("model.w", w)],
                    outputs=[("out", out)], frame=use_at, module="model", step=3, how="test", optimizer=ctx)
    first = "aten.mul.Tensor at /src/model.py:3 (module model)"
    assert (r.phase, r.kind, r.op, r.torch_function) == ("optimizer", "nan", "SGD.step", "torch.optim.SGD.step")
    assert (r.module, r.node, r.file, r.line, r.step) == (None, None, "/src/train.py", 7, 2)
    assert r.message == f"SGD.step (step 2) left NaN in model.w; first used by {first}"
    assert r.notes == (f"the parameter was first used by {first}",)
    assert "SGD.step" in r.explanation and r.inputs[0].name == "model.w" and r.how == "test"


def test_make_report_blames_through_a_replay_alias_and_only_when_asked():
    w, opt = _nan_weight()
    alias = w.detach()                          # a replay's stand-in for the parameter
    ctx = OptimizerContext(check=BOTH, steps=1, last=opt)
    args = {"phase": "forward", "kind": "nan", "op": "aten.mul.Tensor", "inputs": [("w", alias)], "outputs": []}
    assert make_report(**args, optimizer=ctx, aliases={id(alias): w}).phase == "optimizer"
    assert make_report(**args, optimizer=ctx).phase == "forward"          # not known as the parameter
    assert make_report(**args).phase == "forward"                         # no optimizer context
    quiet = make_report(**args, optimizer=OptimizerContext(check=frozenset({"inf"}), steps=1, last=opt),
                        aliases={id(alias): w})
    assert quiet.phase == "forward" and quiet.notes == ("w held nan after SGD.step (step 1)",)


# ------------------------------------------------------------------------- the session
def test_the_session_keeps_the_first_report_and_replaces_only_that_one():
    s = Session(check=BOTH, mode="record", exhaustive=False)
    a, b, c = (Report(phase="forward", kind="nan", op=op) for op in "abc")
    s.open()
    assert s.keep(a) and not s.keep(b) and s.report is a
    s.replace(b, c)
    assert s.report is a                        # b was never kept
    s.replace(a, c)
    assert s.report is c
    s.close()
    s.open()                                    # a fresh use forgets the previous report
    assert s.report is None
    s.close()


def test_the_session_parameter_cache_is_refreshed_every_64_backward_passes():
    s = Session(check=BOTH, mode="record", exhaustive=False)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    first = s.params_of(model)
    model.append(torch.nn.Linear(2, 2))
    for _ in range(63):
        s.count_backward()
    assert s.params_of(model) is first
    s.count_backward()
    assert len(s.params_of(model)) == 4


def test_detect_options_and_report_live_in_its_session():
    d = nanguard.detect(check="nan", mode="record")
    assert (d.check, d.mode, d.exhaustive) == (frozenset({"nan"}), "record", False)
    with d:
        torch.log(-torch.ones(1))
    assert d.report is not None and d.report.kind == "nan"
    d.report = None
    assert d.report is None


def test_no_detector_module_reads_the_private_state_of_another_object():
    """``det._params``, ``act._keep(...)``, ``self.act._lock``: what one object needs from
    another is public, or it is handed over (the session)."""
    owners = {"det", "act", "session", "activation", "replay", "live", "outer"}
    offences = []
    for name in sorted(os.listdir(DETECTOR)):
        if not name.endswith(".py") or name == "explain.py":
            continue
        with open(os.path.join(DETECTOR, name), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            owner = node.value
            owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) \
                else None
            if owner_name in owners:
                offences.append(f"{name}:{node.lineno}: {owner_name}.{node.attr}")
    assert offences == []
