"""LR schedules hold on a skipped step (as optax, DeepSpeed and the HF Trainer do); LBFGS is
refused at construction."""

from __future__ import annotations

import pytest
import torch
from torch.optim.lr_scheduler import (ChainedScheduler, ExponentialLR, LambdaLR, OneCycleLR,
                                      ReduceLROnPlateau, StepLR)

import nanguard
from guard_helpers import backward, make_model, nan


def warmup(step: int) -> float:
    return min(1.0, (step + 1) / 4) * 0.9 ** step


def run(bad_steps, n_steps=10, policy="skip", make_sched=None):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    sched = (make_sched or (lambda o: LambdaLR(o, warmup)))(opt)
    guard = nanguard.GradGuard(opt, policy=policy, scheduler=sched)
    lrs = []
    for step in range(n_steps):
        opt.zero_grad()
        backward(model, step)
        if step in bad_steps:
            model.head.bias.grad[0] = nan
        guard.step()
        lrs.append(opt.param_groups[0]["lr"])
    return lrs, guard


def test_a_skipped_step_holds_the_schedule():
    lrs, guard = run({2, 3, 7})
    applied = 0
    expected = []
    for step in range(10):
        if step not in {2, 3, 7}:
            applied += 1
        expected.append(0.5 * warmup(applied))
    assert lrs == pytest.approx(expected, rel=1e-12)
    assert guard.records.skipped == 3


def test_a_zeroed_step_advances_the_schedule():
    lrs, _ = run({2}, policy="zero")
    assert lrs == pytest.approx([0.5 * warmup(s + 1) for s in range(10)], rel=1e-12)


def test_the_schedule_matches_optax_apply_if_finite():
    # optax's own recovery: apply_if_finite keeps the inner state (the schedule's count) on a
    # non-finite update. The guarded torch loop must give the same learning rates.
    optax = pytest.importorskip("optax")
    jnp = pytest.importorskip("jax.numpy")
    bad = {1, 4, 5}
    schedule = optax.exponential_decay(0.5, transition_steps=1, decay_rate=0.9)
    tx = optax.apply_if_finite(optax.inject_hyperparams(optax.sgd)(learning_rate=schedule), 100)
    params = jnp.zeros(2)
    state = tx.init(params)
    optax_lrs = []
    for step in range(8):
        grad = jnp.array([nan if step in bad else 1.0, 1.0])
        _, state = tx.update(grad, state, params)
        # the LR the *next* step will use, as torch's param_groups shows after sched.step()
        optax_lrs.append(float(schedule(state.inner_state.count)))
    torch_lrs, _ = run(bad, n_steps=8, make_sched=lambda o: ExponentialLR(o, 0.9))
    assert torch_lrs == pytest.approx(optax_lrs, rel=1e-6)


def test_a_skipped_accumulation_window_holds_the_schedule():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    guard = nanguard.GradGuard(opt, scheduler=StepLR(opt, step_size=1, gamma=0.5))
    guard.backward(torch.tensor(nan, requires_grad=True))
    assert guard.step() is False
    assert opt.param_groups[0]["lr"] == 1.0
    backward(model, 0)
    assert guard.step() is True
    assert opt.param_groups[0]["lr"] == 0.5


def test_several_and_chained_schedulers():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    chained = ChainedScheduler([StepLR(opt, 1, 0.5), ExponentialLR(opt, 0.5)])
    guard = nanguard.GradGuard(opt, scheduler=[chained])
    for bad in (False, True, False):
        opt.zero_grad()
        backward(model, 0)
        if bad:
            model.head.bias.grad[0] = nan
        guard.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.25 ** 2)


def test_stepping_the_scheduler_twice_is_caught():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = StepLR(opt, 1, 0.5)
    guard = nanguard.GradGuard(opt, scheduler=sched)
    backward(model, 0)
    guard.step()
    sched.step()  # the loop still calls it as well: the schedule would run at twice the speed
    backward(model, 1)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="stepped outside the guard"):
        guard.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_schedulers_the_guard_cannot_hold_are_refused():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    other = torch.optim.SGD(make_model(1).parameters(), lr=1.0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau.*validation metric"):
        nanguard.GradGuard(opt, scheduler=ReduceLROnPlateau(opt))
    with pytest.raises(ValueError, match="another optimizer"):
        nanguard.GradGuard(opt, scheduler=StepLR(other, 1))
    with pytest.raises(TypeError, match="LRScheduler"):
        nanguard.GradGuard(opt, scheduler=lambda step: 0.1)
    # OneCycleLR raises past its total steps: holding it on skips is what keeps it in range
    sched = OneCycleLR(opt, max_lr=1.0, total_steps=3)
    guard = nanguard.GradGuard(opt, scheduler=sched)
    for bad in (True, False, True, False, False):
        opt.zero_grad()
        backward(model, 0)
        if bad:
            model.head.bias.grad[0] = nan
        guard.step()
    assert guard.records.applied == 3 and sched.last_epoch == 3


def test_lbfgs_is_refused_at_construction():
    model = make_model()
    with pytest.raises(TypeError, match="LBFGS cannot be guarded.*closure"):
        nanguard.GradGuard(torch.optim.LBFGS(model.parameters()))


@pytest.mark.parametrize("guard_state", [True, False])
def test_resuming_the_usual_way_keeps_the_schedule_and_still_catches_a_second_stepper(
        tmp_path, guard_state):
    # construct model, optimizer, scheduler and guard, then load each from the checkpoint
    # (issue 31: the guard had recorded the schedule's position at construction)
    def build():
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        sched = LambdaLR(opt, warmup)
        return model, opt, sched, nanguard.GradGuard(opt, scheduler=sched)

    def train(model, opt, guard, steps):
        for step in steps:
            opt.zero_grad()
            backward(model, step)
            if step == 2:
                model.head.bias.grad[0] = nan
            guard.step()

    model, opt, sched, guard = build()
    train(model, opt, guard, range(4))
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                "guard": guard.state_dict()}, path)
    train(model, opt, guard, range(4, 7))
    expected = opt.param_groups[0]["lr"], [p.detach().clone() for p in model.parameters()]

    model, opt, sched, guard = build()
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    sched.load_state_dict(ckpt["sched"])
    if guard_state:
        guard.load_state_dict(ckpt["guard"])
    train(model, opt, guard, range(4, 7))
    assert opt.param_groups[0]["lr"] == expected[0] and sched.last_epoch == 6
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), expected[1]))

    sched.step()  # a real second stepper, after the resume, is still caught
    backward(model, 8)
    with pytest.raises(RuntimeError, match="stepped outside the guard"):
        guard.step()
