"""Gradient accumulation: a step is an optimizer step. `guard.backward` checks each
micro-batch's loss; a bad one skips the whole window ("skip_window") or is left out ("drop"),
and the window is one event, one step number and one count toward max_consecutive."""

from __future__ import annotations

import pytest
import torch

import nanguard
from guard_helpers import assert_bitwise, batch, make_model, nan, snapshot

ACCUM = 4


def micro_loss(model: torch.nn.Module, seed: int, bad: bool = False) -> torch.Tensor:
    x, y = batch(seed)
    if bad:
        x = x.clone()
        x[3, 1] = nan  # one NaN row, as in a data set with a missing value
    return torch.nn.functional.mse_loss(model(x), y) / ACCUM


def run_guarded(windows, accumulation="skip_window", **kw):
    """windows: list of lists of (seed, bad). Returns model, optimizer, guard, decisions, ran."""
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model, accumulation=accumulation, **kw)
    decisions, ran = [], []
    for window in windows:
        opt.zero_grad()
        for seed, bad in window:
            ran.append(guard.backward(micro_loss(model, seed, bad)))
        decisions.append(guard.step())
    return model, opt, guard, decisions, ran


def run_reference(windows):
    """The same run by hand: only the given (good) micro-batches, a plain optimizer.step()."""
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for window in windows:
        if not window:
            continue
        opt.zero_grad()
        for seed in window:
            micro_loss(model, seed).backward()
        opt.step()
    return model, opt


def windows_with(bad_window: int, bad_micro: int, n: int = 3):
    return [[(10 * w + m, w == bad_window and m == bad_micro) for m in range(ACCUM)]
            for w in range(n)]


@pytest.mark.parametrize("bad_micro", [0, 1, ACCUM - 1])
def test_skip_window_skips_the_whole_step_and_the_next_window_starts_clean(bad_micro):
    # A NaN in the last micro-batch used to merge two windows in the `check_loss` + `continue`
    # idiom; with guard.backward the window closes at guard.step() whatever happened in it.
    windows = windows_with(1, bad_micro)
    model, opt, guard, decisions, ran = run_guarded(windows)
    assert decisions == [True, False, True]
    # the micro-batches after the bad one are not backpropagated: their step is skipped
    assert ran[ACCUM:2 * ACCUM] == [True] * bad_micro + [False] * (ACCUM - bad_micro)
    ref_model, ref_opt = run_reference([[10 * w + m for m in range(ACCUM)] for w in (0, 2)])
    assert_bitwise(snapshot(model, opt), snapshot(ref_model, ref_opt))
    r = guard.records
    assert (r.steps, r.applied, r.skipped, r.nonfinite_losses) == (3, 2, 1, 1)
    assert r.skipped_steps == [2] == r.bad_steps  # a bad step, though its gradients never were
    assert "non-finite gradients" not in guard.summary()
    (event,) = r.events
    assert (event.kind, event.action, event.step) == ("loss", "skipped", 2)
    assert event.micro_batches == (bad_micro + 1,) and event.window == ACCUM
    assert f"micro-batch {bad_micro + 1} of {ACCUM}, window skipped" in guard.summary()


def test_skip_window_leaves_parameters_and_optimizer_state_bitwise_unchanged():
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    guard = nanguard.GradGuard(opt, model=model)
    for seed in range(ACCUM):
        guard.backward(micro_loss(model, seed))
    assert guard.step() is True
    before = snapshot(model, opt)
    opt.zero_grad()
    for m in range(ACCUM):
        guard.backward(micro_loss(model, 100 + m, bad=(m == 2)))
    assert guard.step() is False
    assert_bitwise(snapshot(model, opt), before)


def test_drop_leaves_the_bad_micro_batch_out_and_applies_the_others():
    windows = windows_with(1, 2)
    model, opt, guard, decisions, ran = run_guarded(windows, accumulation="drop")
    assert decisions == [True, True, True]
    assert ran[ACCUM:2 * ACCUM] == [True, True, False, True]
    kept = [[10 * w + m for m in range(ACCUM) if not (w == 1 and m == 2)] for w in range(3)]
    ref_model, ref_opt = run_reference(kept)
    assert_bitwise(snapshot(model, opt), snapshot(ref_model, ref_opt))
    r = guard.records
    assert (r.steps, r.applied, r.skipped, r.dropped_micro_batches, r.consecutive) == (3, 3, 0, 1, 0)
    (event,) = r.events
    assert (event.action, event.micro_batches, event.window, event.step) == ("dropped", (3,), 4, 2)
    assert "micro-batch 3 of 4, left out, step applied" in guard.summary()


def test_drop_skips_a_window_whose_every_micro_batch_was_bad():
    windows = [[(m, False) for m in range(ACCUM)], [(10 + m, True) for m in range(ACCUM)]]
    model, opt, guard, decisions, ran = run_guarded(windows, accumulation="drop")
    assert decisions == [True, False]
    ref_model, ref_opt = run_reference([list(range(ACCUM))])
    assert_bitwise(snapshot(model, opt), snapshot(ref_model, ref_opt))
    (event,) = guard.records.events
    assert event.action == "skipped" and event.micro_batches == (1, 2, 3, 4)
    assert guard.records.nonfinite_losses == 4 and guard.records.skipped == 1


@pytest.mark.parametrize("accumulation", ["skip_window", "drop"])
def test_max_consecutive_counts_optimizer_steps_not_micro_batches(accumulation):
    # every micro-batch bad: with 4 micro-batches per window, max_consecutive=3 must allow
    # two bad windows and stop at the third, not at the third micro-batch
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, max_consecutive=3, accumulation=accumulation)
    for window in range(2):
        for m in range(ACCUM):
            assert guard.backward(micro_loss(model, m, bad=True)) is False
        assert guard.step() is False
    for m in range(ACCUM):
        guard.backward(micro_loss(model, m, bad=True))
    with pytest.raises(nanguard.NonFiniteError, match="3 bad steps in a row"):
        guard.step()
    r = guard.records
    assert (r.steps, r.skipped, r.raised) == (3, 2, 1)
    assert r.steps == r.applied + r.skipped + r.zeroed + r.raised


def test_a_bad_gradient_in_a_window_with_finite_losses_is_an_ordinary_bad_step():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, accumulation="drop")
    for m in range(ACCUM):
        guard.backward(micro_loss(model, m))
    model.head.weight.grad[0, 0] = nan
    assert guard.step() is False
    (event,) = guard.records.events
    assert event.kind == "gradients" and event.params[0].name == "head.weight"


def test_policy_raise_raises_at_the_bad_micro_batch_and_the_next_window_is_fresh():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, policy="raise")
    guard.backward(micro_loss(model, 0))
    with pytest.raises(nanguard.NonFiniteError, match="non-finite loss"):
        guard.backward(micro_loss(model, 1, bad=True))
    opt.zero_grad()
    for m in range(ACCUM):
        assert guard.backward(micro_loss(model, 20 + m)) is True
    assert guard.step() is True
    r = guard.records
    assert (r.steps, r.applied, r.nonfinite_losses) == (1, 1, 1)


def test_backward_passes_arguments_to_loss_backward_and_checks_its_input():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt)
    loss = micro_loss(model, 0)
    guard.backward(loss, retain_graph=True)
    loss.backward()  # possible only because the graph was retained
    with pytest.raises(TypeError, match="`loss` must be a torch.Tensor"):
        guard.backward(1.0)
    with pytest.raises(ValueError, match="unknown accumulation 'mean'"):
        nanguard.GradGuard(opt, accumulation="mean")


@pytest.mark.parametrize("bad_micro", [0, 2])
def test_skip_window_with_a_grad_scaler_keeps_update_working(bad_micro):
    # GradScaler's update() asserts that an inf check was recorded; a skipped window (even one
    # whose first micro-batch was bad, so nothing was ever unscaled) must keep it working, and
    # a NaN loss is not an overflow: the scale does not back off.
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    guard = nanguard.GradGuard(opt, scaler=scaler)
    before = snapshot(model, opt)
    for m in range(ACCUM):
        guard.backward(micro_loss(model, m, bad=(m == bad_micro)))
    assert guard.step() is False
    scaler.update()
    assert scaler.get_scale() == 1024.0
    assert_bitwise(snapshot(model, opt), before)
    opt.zero_grad()
    for m in range(ACCUM):
        assert guard.backward(micro_loss(model, 10 + m)) is True
    assert guard.step() is True
    scaler.update()
    ref = make_model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for m in range(ACCUM):
        (micro_loss(ref, 10 + m) * 1024.0).backward()
    for p in ref.parameters():
        p.grad /= 1024.0
    ref_opt.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
