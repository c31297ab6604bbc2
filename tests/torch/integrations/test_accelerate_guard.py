"""accelerate: the guard counts optimizer steps (not micro-batches), checks before the clip,
and reports a skip the way accelerate reports an AMP overflow, so its scheduler holds."""

from __future__ import annotations

import pytest
import torch

accelerate = pytest.importorskip("accelerate")
from accelerate.state import AcceleratorState, GradientState  # noqa: E402

import nanguard  # noqa: E402
from nanguard.torch.integrations.accelerate import guard_accelerator  # noqa: E402
from integration_helpers import assert_bitwise, data, make_net, snapshot  # noqa: E402

ACCUM = 4


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    # accelerate keeps process-wide singletons; every test starts from a clean one
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def accelerated(scaler=None, policy="skip", **kw):
    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    if scaler is not None:
        accelerator.scaler = scaler  # a CPU GradScaler as the stand-in for CUDA fp16
    model = make_net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model, opt, sched = accelerator.prepare(model, opt, sched)
    guard = guard_accelerator(accelerator, opt, model=model, policy=policy, **kw)
    return accelerator, model, opt, sched, guard


def train(accelerator, model, opt, sched, plan, clip=None):
    """plan: windows of micro-batch kinds ("ok", "nan_loss", "nan_grad"). Returns, per
    window, the LR after it, whether accelerate says the step was skipped, and the params."""
    out = []
    seed = 0
    for window in plan:
        for kind in window:
            with accelerator.accumulate(model):
                x, y = data(seed, zero_row=(kind == "nan_grad"), nan_input=(kind == "nan_loss"))
                seed += 1
                accelerator.backward(loss_fn(model, x, y))
                if clip is not None and accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), clip)
                opt.step()
                sched.step()
                opt.zero_grad()
        out.append((opt.param_groups[0]["lr"], accelerator.optimizer_step_was_skipped,
                    snapshot(model, opt.optimizer)))
    return out


def reference(windows, first_seed_of):
    """Plain torch, no accelerate: the good windows only, each with its own seeds."""
    model = make_net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for w in windows:
        opt.zero_grad()
        for m in range(ACCUM):
            (loss_fn(model, *data(first_seed_of[w] + m)) / ACCUM).backward()
        opt.step()
        sched.step()
    return snapshot(model, opt)


def test_a_nan_micro_batch_skips_its_optimizer_step_and_the_schedule_holds():
    accelerator, model, opt, sched, guard = accelerated()
    plan = [["ok"] * 4, ["ok", "nan_loss", "ok", "ok"], ["ok"] * 4]
    out = train(accelerator, model, opt, sched, plan, clip=1.0)
    lrs = [lr for lr, _, _ in out]
    assert lrs == [5e-3, 5e-3, 2.5e-3]  # held on the skipped step, as after an AMP overflow
    assert [skipped for _, skipped, _ in out] == [False, True, False]
    assert_bitwise(out[1][2], out[0][2])  # parameters and Adam state untouched by the skip
    r = guard.records
    # optimizer steps, not micro-batches: 3 steps, 1 skipped (it used to be 12 and 4)
    assert (r.steps, r.applied, r.skipped, r.nonfinite_losses) == (3, 2, 1, 1)
    (event,) = r.events
    assert (event.step, event.micro_batches, event.window) == (2, (2,), 4)


def test_without_clip_the_run_equals_plain_torch_minus_the_bad_window():
    accelerator, model, opt, sched, guard = accelerated()
    plan = [["ok"] * 4, ["ok", "ok", "ok", "nan_loss"], ["ok"] * 4]
    out = train(accelerator, model, opt, sched, plan)
    assert_bitwise(out[2][2], reference([0, 2], {0: 0, 2: 8}))


def test_the_check_runs_before_the_clip_so_the_blame_and_zero_stay_local():
    # torch's clip_grad_norm_ multiplies every gradient by max_norm / NaN: checked after it,
    # every parameter looks bad and policy "zero" zeroes the whole model
    accelerator, model, opt, sched, guard = accelerated(policy="zero")
    plan = [["ok", "ok", "nan_grad", "ok"]]
    out = train(accelerator, model, opt, sched, plan, clip=1.0)
    (event,) = guard.records.events
    assert [p.name for p in event.params] == ["embed.weight"]
    assert event.action == "zeroed" and out[0][1] is False  # applied: the schedule moves
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert out[0][0] == 5e-3


def test_max_consecutive_counts_optimizer_steps():
    accelerator, model, opt, sched, guard = accelerated(max_consecutive=3)
    with pytest.raises(nanguard.NonFiniteError, match="3 bad steps in a row"):
        train(accelerator, model, opt, sched, [["ok", "nan_grad", "ok", "ok"]] * 3)
    assert guard.records.steps == 3 and guard.records.skipped == 2


def test_with_a_grad_scaler_one_unscale_and_the_scale_backs_off():
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    accelerator, model, opt, sched, guard = accelerated(scaler=scaler)
    plan = [["ok"] * 4, ["ok", "nan_grad", "ok", "ok"], ["ok"] * 4]
    out = train(accelerator, model, opt, sched, plan, clip=1.0)  # used to raise RuntimeError
    assert [skipped for _, skipped, _ in out] == [False, True, False]
    assert [lr for lr, _, _ in out] == [5e-3, 5e-3, 2.5e-3]
    assert scaler.get_scale() == 2.0 ** 9  # backed off once, for the bad step
    assert_bitwise(out[1][2], out[0][2])
    assert guard.records.skipped == 1 and guard.records.events[0].scale == 2.0 ** 10


def test_arguments_are_checked():
    accelerator, model, opt, sched, guard = accelerated()
    with pytest.raises(TypeError, match="returned by accelerator.prepare"):
        guard_accelerator(accelerator, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="must be an accelerate.Accelerator"):
        guard_accelerator(object(), opt)
    accelerator.scaler = torch.amp.GradScaler("cpu")
    with pytest.raises(ValueError, match="policy 'zero' cannot be used with fp16"):
        guard_accelerator(accelerator, opt, policy="zero")


def test_end_training_prints_one_line(capsys):
    accelerator, model, opt, sched, guard = accelerated()
    train(accelerator, model, opt, sched, [["ok"] * ACCUM, ["ok", "nan_grad", "ok", "ok"]])
    accelerator.end_training()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("nanguard")]
    assert lines == ["nanguard GradGuard (policy 'skip'): 2 steps, 1 applied, 1 skipped, 0 zeroed; "
                     "non-finite gradients in embed.weight"]


def test_rollback_restores_the_snapshot_and_the_prepared_scheduler():
    # snapshots before the updates of windows 0 and 2 (every 2nd applied step); window 3's
    # NaN gradient brings back the state window 2 started from, the scheduler included
    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    model = make_net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model, opt, sched = accelerator.prepare(model, opt, sched)
    guard = guard_accelerator(accelerator, opt, model=model, policy="rollback",
                              snapshot_every=2, lr_backoff=0.5, scheduler=sched)
    ok, bad = ["ok"] * ACCUM, ["ok", "nan_grad", "ok", "ok"]
    out = train(accelerator, model, opt, sched, [ok, ok, ok, bad, ok])
    r = guard.records
    assert (r.steps, r.applied, r.rolled_back, r.steps_undone) == (5, 4, 1, 1)
    (event,) = r.events
    assert (event.step, event.action, event.steps_undone, event.lr_scale) == (
        4, "rolled back", 1, 0.5)
    assert [p.name for p in event.params] == ["embed.weight"]
    assert [skipped for _, skipped, _ in out] == [False, False, False, True, False]
    assert_bitwise(out[3][2], out[1][2])  # parameters, AdamW's moments and steps, its lr
    assert [lr for lr, _, _ in out] == pytest.approx([1e-2 * 0.5 ** k for k in (1, 2, 3, 2, 3)])
    # the scheduler's own position came back too (4 applied steps, 1 undone)
    assert sched.scheduler.last_epoch == 3 and sched.get_last_lr() == [out[-1][0]]
    assert guard.lr_scale == 0.5 and all(torch.isfinite(p).all() for p in model.parameters())


def test_rollback_arguments_are_checked():
    accelerator, model, opt, sched, guard = accelerated()
    with pytest.raises(ValueError, match="`scheduler` belongs to policy='rollback'"):
        guard_accelerator(accelerator, opt, scheduler=sched)
    with pytest.raises(ValueError, match="`lr_backoff` must be a number in"):
        guard_accelerator(accelerator, opt, policy="rollback", lr_backoff=2.0)
