"""Policy "rollback": the last snapshot comes back bit for bit (parameters, buffers, Adam's
moments and step, the schedule's position, the scaler's scale, the RNGs), training goes on
from it, spikes trigger it, the learning rate backs off, the bad batch is quarantined, and
a run that keeps rolling back stops."""

from __future__ import annotations

import copy
import json
import math
import random
from collections import OrderedDict

import pytest
import torch

import nanguard
from guard_helpers import assert_bitwise, backward, batch, loss_of, make_model, nan, snapshot
from nanguard.core.guard_policy import DEFAULT_SNAPSHOT_EVERY, check_policy
from nanguard.core.guard_spike import MIN_HISTORY, SpikeWatch


def full_state(model, opt, sched=None, scaler=None) -> dict:
    """Everything a rollback restores, cloned, for a bitwise comparison."""
    state = dict(snapshot(model, opt), buffers=[b.clone() for b in model.buffers()],
                 torch_rng=torch.get_rng_state(), python_rng=random.getstate())
    if sched is not None:
        state["sched"] = copy.deepcopy(sched.state_dict())
    if scaler is not None:
        state["scale"] = scaler._scale.clone()
        state["tracker"] = scaler._growth_tracker.clone()
    return state


def bn_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(OrderedDict(
        embed=torch.nn.Linear(4, 8), norm=torch.nn.BatchNorm1d(8), head=torch.nn.Linear(8, 2)))


def nan_batch(seed: int):
    x, y = batch(seed)
    x[0, 0] = nan
    return x, y


def test_a_rollback_restores_the_snapshot_bit_for_bit():
    model = bn_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    guard = nanguard.GradGuard(opt, model=model, scaler=scaler, scheduler=sched,
                               policy="rollback", snapshot_every=3)
    expected = None
    for step in range(1, 7):  # snapshots before the updates of steps 1 and 4
        opt.zero_grad()
        x, y = batch(step)
        assert guard.backward(torch.nn.functional.mse_loss(model(x), y))
        random.random()  # the loop uses Python's RNG too
        torch.rand(3)
        if step == 4:  # what the snapshot of step 4 holds: the state before its update
            expected = full_state(model, opt, sched, scaler)
        assert guard.step() is True
        scaler.update()
    assert opt.state[model.embed.weight]["step"] == 6 and sched.last_epoch == 6
    assert scaler.get_scale() != expected["scale"].item()  # it grew since
    opt.zero_grad()
    x, y = nan_batch(7)
    assert guard.backward(torch.nn.functional.mse_loss(model(x), y)) is False
    assert guard.step() is False  # rolled back: steps 4, 5 and 6 are undone
    assert_bitwise(full_state(model, opt, sched, scaler), expected)
    assert opt.state[model.embed.weight]["step"] == 3 and sched.last_epoch == 3
    assert opt.param_groups[0]["lr"] == 5e-3  # the group's hyperparameters come back too
    (event,) = guard.records.events
    assert (event.step, event.kind, event.action, event.steps_undone) == (
        7, "loss", "rolled back", 3)
    assert event.lr_scale is None and guard.lr_scale == 1.0
    r = guard.records
    assert (r.steps, r.applied, r.rolled_back, r.steps_undone, r.skipped) == (7, 6, 1, 3, 0)
    assert "7 steps, 6 applied, 0 skipped, 0 zeroed, 1 rolled back" in guard.summary()
    assert ("rolled back 1 time, 3 applied steps undone: at step 7 (loss, 3 undone)"
            in guard.summary())
    scaler.update()
    opt.zero_grad()  # the schedule goes on from its restored position, no second-stepper error
    guard.backward(loss_of(model, 8))
    assert guard.step() is True and sched.last_epoch == 4


def test_a_nan_forward_pass_is_undone_in_batchnorm_too():
    model = bn_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback")
    guard.backward(torch.nn.functional.mse_loss(model(batch(0)[0]), batch(0)[1]))
    guard.step()
    x, y = nan_batch(1)
    opt.zero_grad()
    guard.backward(torch.nn.functional.mse_loss(model(x), y))
    assert torch.isnan(model.norm.running_mean).any()  # the forward pass poisoned it
    assert guard.step() is False
    assert guard.safe_to_save() is True
    assert guard.records.events[0].steps_undone == 1


def test_state_created_after_the_snapshot_is_removed():
    # the first snapshot is taken before the first update: Adam has no state yet
    model = make_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt, model=model, policy="rollback")
    before = snapshot(model, opt)
    backward(model, 0)
    assert guard.step() is True
    opt.zero_grad()
    backward(model, 1)
    model.head.bias.grad[0] = nan
    assert guard.step() is False
    assert opt.state_dict()["state"] == {}
    assert_bitwise(snapshot(model, opt), before)


def train(model, opt, guard, seeds):
    for seed in seeds:
        opt.zero_grad()
        guard.backward(loss_of(model, seed))
        guard.step()


@pytest.mark.parametrize("opt_name", ["Adam", "SGD-momentum"])
def test_training_goes_on_from_the_snapshot(opt_name):
    # Run A: 3 good steps, 3 more, a NaN gradient (rolled back to the snapshot before step 4),
    # then 4 good steps. Run B: the first 3 good steps, then the same 4: identical bits.
    make_opt = {"Adam": lambda p: torch.optim.Adam(p, lr=1e-2),
                "SGD-momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)}[opt_name]
    runs = []
    for bad in (True, False):
        model = make_model()
        opt = make_opt(model.parameters())
        guard = nanguard.GradGuard(opt, model=model, policy="rollback", snapshot_every=3)
        train(model, opt, guard, range(3))
        if bad:
            train(model, opt, guard, range(10, 13))
            opt.zero_grad()
            backward(model, 13)
            model.embed.weight.grad[1, 2] = nan
            assert guard.step() is False
            assert guard.records.events[-1].steps_undone == 3
        train(model, opt, guard, range(20, 24))
        runs.append(snapshot(model, opt))
    assert_bitwise(runs[0], runs[1])


def test_without_a_snapshot_yet_a_rollback_undoes_nothing():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", lr_backoff=0.5)
    before = snapshot(model, opt)
    assert guard.check_loss(loss_of(model, 0) * nan) is False
    assert_bitwise(snapshot(model, opt), before)
    (event,) = guard.records.events
    assert (event.action, event.steps_undone, event.lr_scale) == ("rolled back", 0, 0.5)
    assert event.step == 1 and not event.is_step  # check_loss's: no step outcome


def spike_run(spike, lr_backoff=None, bad=None, n=14, dump_dir=None, opt_lr=0.1):
    """SGD on make_model; `bad(step, x, y)` may change a batch (and return True to poison the
    gradients by 1e4 after the backward pass)."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=opt_lr)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", snapshot_every=4,
                               spike=spike, lr_backoff=lr_backoff, dump_dir=dump_dir)
    results = []
    for step in range(1, n + 1):
        opt.zero_grad()
        x, y = batch(step)
        boost = bad(step, x, y) if bad is not None else False
        ran = guard.backward(torch.nn.functional.mse_loss(model(x), y), batch=(x, y))
        if boost:
            for p in model.parameters():
                p.grad.mul_(1e4)
        results.append((ran, guard.step()))
    return model, opt, guard, results


def test_a_loss_spike_rolls_back_and_backs_the_learning_rate_off(tmp_path):
    def huge_targets(step, x, y):
        if step == 13:
            y.mul_(1e3)  # a bad batch: finite, a loss ~1e6 times the median

    model, opt, guard, results = spike_run(dict(loss=5.0, window=10), lr_backoff=0.5,
                                           bad=huge_targets, dump_dir=tmp_path)
    assert results[12] == (False, False)  # no backward pass, and the step rolled back
    assert all(r == (True, True) for i, r in enumerate(results) if i != 12)
    (event,) = guard.records.events
    assert (event.step, event.kind, event.action) == (13, "loss spike", "rolled back")
    assert event.loss > event.threshold > 0 and event.micro_batches == (1,) and event.window == 1
    assert event.steps_undone == 4  # back to the snapshot before step 9's update
    assert event.lr_scale == 0.5 and guard.lr_scale == 0.5 and guard.records.spikes == 1
    assert "loss spike" in event.describe() and "learning rate ×0.5" in event.describe()
    # quarantined: the batch is in dump_dir, and the records name the file
    (path,) = guard.records.dumps
    dumped = torch.load(path, weights_only=False)
    assert dumped["step"] == 13 and "loss spike" in dumped["what"]
    assert torch.equal(dumped["micro_batches"][1][1], batch(13)[1] * 1e3)
    assert opt.param_groups[0]["lr"] == 0.1  # the schedule's own value (see the next test)


def test_the_learning_rate_backoff_scales_every_update_after_the_rollback():
    def spike_at_6(step, x, y):
        if step == 6:
            y.mul_(1e3)

    model, opt, guard, _ = spike_run(dict(loss=3.0, window=3), lr_backoff=0.25, bad=spike_at_6,
                                     n=6)
    assert guard.records.rolled_back == 1 and guard.lr_scale == 0.25
    # the next update equals plain SGD with lr 0.1 x 0.25 on a copy of the restored model
    twin = copy.deepcopy(model)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.025)
    for m, o in ((model, opt), (twin, twin_opt)):
        o.zero_grad()
        backward(m, 7)
    assert guard.step() is True
    twin_opt.step()
    assert_bitwise(list(model.parameters()), list(twin.parameters()))
    assert opt.param_groups[0]["lr"] == 0.1


def test_a_gradient_norm_spike_rolls_back_to_the_snapshot():
    def boost_at_10(step, x, y):
        return step == 10

    model, opt, guard, results = spike_run(dict(grad_norm=10.0, window=5), bad=boost_at_10, n=10)
    assert results[9] == (True, False)
    (event,) = guard.records.events
    assert (event.kind, event.action, event.step, event.ranks) == ("gradient-norm spike",
                                                                   "rolled back", 10, (0,))
    assert event.total_norm > event.threshold and event.is_step
    assert event.steps_undone == 1  # snapshots before steps 1, 5 and 9: step 9 undone
    reference = make_model()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(1, 9):
        ref_opt.zero_grad()
        x, y = batch(step)
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
    assert_bitwise(list(model.parameters()), list(reference.parameters()))


def test_the_snapshot_is_taken_before_the_update_so_a_learning_rate_spike_is_undone():
    # the loop sets the learning rate of each step (as nanoGPT does); step 8's is 10000x too
    # large: finite gradients, nothing to see yet; step 9's loss spikes. The snapshot of step
    # 8 (taken before its update) is the good one.
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", snapshot_every=1,
                               spike=dict(loss=3.0, window=5))
    good = None
    for step in range(1, 11):
        opt.param_groups[0]["lr"] = 500.0 if step == 8 else 0.05
        opt.zero_grad()
        if step == 8:
            good = [p.detach().clone() for p in model.parameters()]
        ran = guard.backward(loss_of(model, step))
        assert guard.step() is (step != 9) and ran is (step != 9)  # step 9's loss spiked
        if step == 9:
            assert_bitwise([p.detach() for p in model.parameters()], good)
    assert guard.records.events[0].steps_undone == 1 and guard.records.rolled_back == 1


def test_check_loss_rolls_back_on_a_spike_and_names_the_limit():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", spike=dict(loss=4.0, window=3))
    for step in range(4):
        loss = loss_of(model, step)
        assert guard.check_loss(loss)
        opt.zero_grad()
        loss.backward()
        guard.step()
    assert guard.check_loss(loss_of(model, 5) * 100) is False
    event = guard.records.events[0]
    assert event.kind == "loss spike" and event.steps_undone == 4 and event.threshold > 0


def test_an_overflow_under_an_active_grad_scaler_is_skipped_not_rolled_back():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    guard = nanguard.GradGuard(opt, model=model, scaler=scaler, policy="rollback")
    for step in range(3):
        opt.zero_grad()
        guard.backward(loss_of(model, step))
        if step == 2:
            model.head.bias.grad[0] = float("inf")
        assert guard.step() is (step < 2)
        scaler.update()
    (event,) = guard.records.events
    assert event.action == "skipped" and guard.records.rolled_back == 0
    assert scaler.get_scale() == 512.0  # the scaler backed off as usual


def test_max_consecutive_stops_a_run_that_rolls_back_forever():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", max_consecutive=3)
    backward(model, 0)
    guard.step()
    for step in range(2):
        assert guard.check_loss(loss_of(model, step) * nan) is False
    with pytest.raises(nanguard.NonFiniteError, match="stopping instead of rolling back forever"):
        guard.check_loss(loss_of(model, 2) * nan)


def test_rollbacks_to_the_same_snapshot_count_as_one_streak():
    # good, bad, good, bad, good, bad: every rollback returns to the snapshot of step 1 and
    # undoes the good step between them, so the third one is the third bad step in a row
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", max_consecutive=3)
    with pytest.raises(nanguard.NonFiniteError, match="same snapshot") as error:
        for step in range(6):
            opt.zero_grad()
            backward(model, step)
            if step % 2:
                model.head.bias.grad[0] = nan
            guard.step()
    assert step == 5 and guard.records.rolled_back == 2 and guard.records.raised == 1
    assert "draw from a torch.Generator" in str(error.value)
    # a new snapshot starts a new streak: good, good, bad (back to the snapshot of the second
    # step; the first good step after it is the snapshot's own state, the second takes a new one)
    guard = nanguard.GradGuard(opt, model=model, policy="rollback", max_consecutive=2,
                               snapshot_every=1)
    for step in range(9):
        opt.zero_grad()
        backward(model, step)
        if step % 3 == 2:
            model.head.bias.grad[0] = nan
        guard.step()
    assert guard.records.rolled_back == 3 and guard.records.longest_run == 1


def test_state_dict_keeps_the_learning_rate_scale_and_the_spike_history():
    def spike_at_12(step, x, y):
        if step == 12:
            y.mul_(1e3)

    _, opt, guard, _ = spike_run(dict(loss=5.0, grad_norm=50.0, window=10), lr_backoff=0.5,
                                 bad=spike_at_12, n=13)
    state = guard.state_dict()
    assert state["lr_scale"] == 0.5 and state["rolled_back"] == 1 and state["spikes"] == 1
    assert [len(v) for v in state["spike_history"].values()] == [10, 10]  # loss, grad_norm
    fresh = nanguard.GradGuard(opt, policy="rollback",
                               spike=dict(loss=5.0, grad_norm=50.0, window=10))
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state and fresh.lr_scale == 0.5
    assert fresh._loss_spikes.limit() == guard._loss_spikes.limit() > 0
    with pytest.raises(ValueError, match="spike history"):
        fresh.load_state_dict(dict(state, spike_history={"loss": "bogus"}))
    json.dumps(state)  # plain data
    # a resume drops the snapshot of the state before it: a rollback now undoes nothing
    assert guard._rollback.snapshot is not None
    guard.load_state_dict(state)
    assert guard._rollback.snapshot is None
    assert guard.check_loss(torch.tensor(nan)) is False
    assert guard.records.events[-1].steps_undone == 0


def test_a_loss_that_can_be_negative_is_never_a_spike():
    watch = SpikeWatch(5.0, 10)
    for v in [-1.0] * 12:
        assert watch.judge([v]) == ([False], None)
    assert watch.judge([1e6]) == ([False], None)


def test_the_spike_test_waits_for_history_and_agrees_across_ranks():
    watch = SpikeWatch(5.0, 50)
    for k in range(MIN_HISTORY - 1):
        assert watch.judge([1.0, 2.0]) == ([False, False], None)
    assert watch.judge([100.0, 1.0]) == ([False, False], None)  # the 10th step is still history
    flags, limit = watch.judge([1.0, 100.0])  # median 1.5 over both ranks' values
    assert flags == [False, True] and limit == 7.5
    assert watch.judge([1.0, float("inf")])[0] == [False, True]
    assert watch.judge([float("nan"), 1.0])[0] == [False, False]


def test_rollback_arguments_are_checked_with_clear_errors():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, policy="rollback")
    assert guard.snapshot_every == DEFAULT_SNAPSHOT_EVERY
    with pytest.raises(ValueError,
                       match=r"unknown policy 'rolback'.*'skip', 'zero', 'raise', 'rollback'"):
        nanguard.GradGuard(opt, policy="rolback")
    with pytest.raises(ValueError, match="`snapshot_every` must be an int >= 1.*got 0"):
        nanguard.GradGuard(opt, policy="rollback", snapshot_every=0)
    for bad in (2.5, True, "10"):
        with pytest.raises(TypeError, match="`snapshot_every` must be an int >= 1"):
            nanguard.GradGuard(opt, policy="rollback", snapshot_every=bad)
    for name, value in (("snapshot_every", 10), ("spike", dict(loss=5.0)), ("lr_backoff", 0.5)):
        with pytest.raises(ValueError, match=f"`{name}` belongs to policy='rollback'.*'skip'"):
            nanguard.GradGuard(opt, **{name: value})
    for bad in (0, 0.0, 1.5, -0.5, math.nan, True, "half"):
        with pytest.raises(ValueError, match=r"`lr_backoff` must be a number in \(0, 1\]"):
            nanguard.GradGuard(opt, policy="rollback", lr_backoff=bad)
    assert nanguard.GradGuard(opt, policy="rollback", lr_backoff=1).records.lr_scale == 1.0
    with pytest.raises(ValueError, match="unknown `spike` key 'gradnorm'.*'loss' and 'grad_norm'"):
        nanguard.GradGuard(opt, policy="rollback", spike=dict(gradnorm=10.0))
    with pytest.raises(ValueError, match=r"spike\['loss'\] must be a finite number > 1"):
        nanguard.GradGuard(opt, policy="rollback", spike=dict(loss=0.5))
    with pytest.raises(ValueError, match=r"spike\['grad_norm'\] must be a finite number > 1"):
        nanguard.GradGuard(opt, policy="rollback", spike=dict(grad_norm=math.inf))
    with pytest.raises(ValueError, match="must give a factor for 'loss', 'grad_norm' or both"):
        nanguard.GradGuard(opt, policy="rollback", spike=dict(window=20))
    with pytest.raises(ValueError, match=r"spike\['window'\] must be an int >= 3"):
        nanguard.GradGuard(opt, policy="rollback", spike=dict(loss=5.0, window=2))
    with pytest.raises(TypeError, match="`spike` must be a dict such as"):
        nanguard.GradGuard(opt, policy="rollback", spike=5.0)
    with pytest.raises(ValueError, match="needs accumulation='skip_window'"):
        nanguard.GradGuard(opt, policy="rollback", accumulation="drop")
    with pytest.raises(ValueError, match="'rollback' is PyTorch's: nanguard.GradGuard in a loop you write, or its"):
        check_policy("rollback", "nanguard.GuardCallback")
