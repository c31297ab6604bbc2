"""GradGuard with torch.amp.GradScaler and with gradient clipping, and its cost per step:
one fused pass over the gradients, one host read."""

from __future__ import annotations

import pytest
import torch

import nanguard
from nanguard.torch.guard import check as guard_check
from nanguard.torch.guard import headroom as guard_headroom
from guard_helpers import (OPTIMIZERS, assert_bitwise, backward, inf, loss_of, make_model, nan,
                           snapshot)


def scaler() -> torch.amp.GradScaler:
    return torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)


def scaler_state(s: torch.amp.GradScaler):
    return s.get_scale(), s._get_growth_tracker()


BAD = {2, 3}  # steps whose scaled gradients overflow


def amp_run(opt_name: str, guarded: bool, unscale_first: bool = False, clip: float | None = None):
    """Five AMP steps; at steps 2 and 3 a gradient overflows. Either the reference loop
    (scaler.step / scaler.update) or the guarded one (guard.step / scaler.update)."""
    model = make_model()
    opt = OPTIMIZERS[opt_name](model.parameters())
    s = scaler()
    guard = nanguard.GradGuard(opt, model=model, scaler=s) if guarded else None
    decisions, scales = [], []
    for step in range(5):
        opt.zero_grad()
        s.scale(loss_of(model, step)).backward()
        if step in BAD:
            model.head.weight.grad[0, 0] = inf
        if guarded:
            if unscale_first:
                s.unscale_(opt)
            if clip is not None:
                guard.clip_grad_norm_(clip)
            decisions.append(guard.step())
        else:
            if unscale_first or clip is not None:
                s.unscale_(opt)
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            s.step(opt)
        s.update()
        scales.append(scaler_state(s))
    return model, opt, guard, decisions, scales


@pytest.mark.parametrize("opt_name", ["SGD-momentum-foreach", "Adam", "AdamW-foreach", "AdamW-fused"])
@pytest.mark.parametrize("unscale_first", [False, True], ids=["guard-unscales", "user-unscaled"])
def test_guarded_amp_loop_matches_the_scaler_loop_bitwise(opt_name, unscale_first):
    # Same parameters, optimizer state, scale and growth tracker after every step: no double
    # unscale, no double skip, and the scaler backs off exactly as it would on its own.
    ref_model, ref_opt, _, _, ref_scales = amp_run(opt_name, guarded=False, unscale_first=unscale_first)
    model, opt, guard, decisions, scales = amp_run(opt_name, guarded=True, unscale_first=unscale_first)
    assert decisions == [step not in BAD for step in range(5)]
    assert scales == ref_scales
    assert scales[2][0] == scales[1][0] / 2 and scales[3][0] == scales[2][0] / 2
    assert_bitwise(snapshot(model, opt), snapshot(ref_model, ref_opt))
    events = guard.records.events
    assert [e.step for e in events] == [3, 4]
    assert events[0].scale == ref_scales[1][0] and events[0].params[0].name == "head.weight"
    assert "GradScaler scale" in events[0].describe()


def test_guarded_clip_with_a_scaler_matches_unscale_then_clip():
    ref_model, ref_opt, _, _, ref_scales = amp_run("Adam", guarded=False, clip=0.5)
    model, opt, guard, decisions, scales = amp_run("Adam", guarded=True, clip=0.5)
    assert scales == ref_scales
    assert_bitwise(snapshot(model, opt), snapshot(ref_model, ref_opt))


def test_skip_with_a_scaler_leaves_everything_bitwise_and_backs_off_once():
    model = make_model()
    opt = torch.optim.AdamW(model.parameters())
    s = scaler()
    guard = nanguard.GradGuard(opt, scaler=s)
    s.scale(loss_of(model, 0)).backward()
    guard.step()
    s.update()
    opt.zero_grad()
    s.scale(loss_of(model, 1) * 1e36).backward()  # finite, but overflows once scaled
    before = snapshot(model, opt)
    scale = s.get_scale()
    assert guard.step() is False
    with pytest.raises(RuntimeError, match="already been called"):
        s.step(opt)  # the scaler knows this optimizer is done for the iteration
    s.update()
    assert s.get_scale() == scale / 2
    assert_bitwise(snapshot(model, opt), before)


def test_zero_with_a_scaler_steps_and_still_backs_off():
    model, twin = make_model(), make_model()
    opt, twin_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    s = scaler()
    guard = nanguard.GradGuard(opt, policy="zero", scaler=s, model=model)
    s.scale(loss_of(model, 0)).backward()
    model.embed.bias.grad[3] = nan
    # the reference: unscaled gradients (the scale is a power of 2: exact), that element 0
    for p, q in zip(model.parameters(), twin.parameters()):
        q.grad = p.grad / s.get_scale()
    twin.embed.bias.grad[3] = 0.0
    twin_opt.step()
    scale = s.get_scale()
    assert guard.step() is True
    s.update()
    assert s.get_scale() == scale / 2  # the scaler still saw the non-finite gradient
    assert_bitwise(snapshot(model, opt), snapshot(twin, twin_opt))
    assert guard.records.zeroed == 1


def test_raise_with_a_scaler_explains_overflow():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = scaler()
    guard = nanguard.GradGuard(opt, policy="raise", scaler=s)
    s.scale(loss_of(model, 0) * 1e36).backward()
    with pytest.raises(nanguard.NonFiniteError, match="scale was 1024.*policy 'skip' lets the scaler"):
        guard.step()


def test_a_scaler_that_already_stepped_is_reported():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = scaler()
    guard = nanguard.GradGuard(opt, scaler=s)
    s.scale(loss_of(model, 0)).backward()
    s.step(opt)
    with pytest.raises(RuntimeError, match="call guard.step\\(\\) instead of scaler.step"):
        guard.step()


def test_a_disabled_scaler_is_a_plain_guard():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = torch.amp.GradScaler("cpu", enabled=False)
    guard = nanguard.GradGuard(opt, scaler=s)
    backward(model, 0)
    model.head.bias.grad[0] = nan
    assert guard.step() is False


# -- clipping --------------------------------------------------------------------------
def grads_of(model):
    return [p.grad.clone() for p in model.parameters()]


def test_torch_clip_poisons_every_gradient_the_guarded_clip_does_not():
    # the seed's story: one NaN element and clip_grad_norm_ turns every gradient into NaN
    plain, guarded = make_model(), make_model()
    for m in (plain, guarded):
        backward(m, 0)
        m.head.bias.grad[0] = nan
    torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
    assert all(torch.isnan(p.grad).all() for p in plain.parameters())

    opt = torch.optim.SGD(guarded.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=guarded)
    before_grads, before = grads_of(guarded), snapshot(guarded, opt)
    total = guard.clip_grad_norm_(1.0)
    assert torch.isnan(total)
    assert_bitwise(grads_of(guarded), before_grads)  # untouched
    assert guard.step() is False
    assert_bitwise(snapshot(guarded, opt), before)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, inf])
@pytest.mark.parametrize("max_norm", [0.05, 100.0])
def test_guarded_clip_equals_torch_clip_on_finite_gradients(norm_type, max_norm):
    a, b = make_model(), make_model()
    backward(a, 0)
    backward(b, 0)
    expected = torch.nn.utils.clip_grad_norm_(b.parameters(), max_norm, norm_type)
    guard = nanguard.GradGuard(torch.optim.SGD(a.parameters(), lr=0.1))
    total = guard.clip_grad_norm_(max_norm, norm_type)
    assert_bitwise(total, expected)
    assert_bitwise(grads_of(a), grads_of(b))


def test_guarded_clip_with_zero_policy_clips_the_rest_by_their_own_norm():
    a, b = make_model(), make_model()
    backward(a, 0)
    backward(b, 0)
    a.head.weight.grad[1, 1] = inf
    b.head.weight.grad[1, 1] = 0.0
    expected = torch.nn.utils.clip_grad_norm_(b.parameters(), 0.1)
    opt = torch.optim.SGD(a.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, policy="zero", model=a)
    total = guard.clip_grad_norm_(0.1)
    assert_bitwise(total, expected)
    assert_bitwise(grads_of(a), grads_of(b))
    assert guard.step() is True
    assert guard.records.zeroed == 1 and guard.records.events[0].params[0].inf == 1


def test_clip_arguments_are_checked():
    guard = nanguard.GradGuard(torch.optim.SGD(make_model().parameters(), lr=0.1))
    for bad in (0, -1.0, inf, nan):
        with pytest.raises(ValueError, match="max_norm"):
            guard.clip_grad_norm_(bad)
    with pytest.raises(TypeError, match="max_norm"):
        guard.clip_grad_norm_("1")
    with pytest.raises(ValueError, match="norm_type"):
        guard.clip_grad_norm_(1.0, norm_type=0)


# -- cost --------------------------------------------------------------------------------
class Counter:
    """Counts torch._foreach_norm launches and host reads of tensor values."""

    READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy")

    def __init__(self, monkeypatch):
        self.norms = 0
        self.reads = 0
        self.paused = False
        real_norm = torch._foreach_norm

        def norm(*a, **k):
            self.norms += not self.paused
            return real_norm(*a, **k)

        # where the guard looks it up (nanguard.torch._compat binds it once)
        for module in (guard_check, guard_headroom):
            monkeypatch.setattr(module, "foreach_norm", norm)
        for name in self.READS:
            real = getattr(torch.Tensor, name)

            def read(t, *a, _real=real, **k):
                self.reads += not self.paused
                return _real(t, *a, **k)

            monkeypatch.setattr(torch.Tensor, name, read)

    def pause_during(self, optimizer):
        real_step = optimizer.step

        def step(*a, **k):  # the optimizer's own reads (Adam's step counter) are not ours
            self.paused = True
            try:
                return real_step(*a, **k)
            finally:
                self.paused = False

        optimizer.step = step


@pytest.mark.parametrize("monitor", [False, True])
@pytest.mark.parametrize("clip", [False, True])
def test_a_finite_step_costs_one_fused_check_and_one_host_read(monkeypatch, monitor, clip):
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor)
    backward(model, 0)
    counter = Counter(monkeypatch)
    counter.pause_during(opt)
    if clip:
        guard.clip_grad_norm_(1.0)
    assert guard.step() is True
    assert (counter.norms, counter.reads) == (1, 1)


def test_with_a_scaler_the_scalers_check_is_the_only_pass(monkeypatch):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    s = scaler()
    guard = nanguard.GradGuard(opt, scaler=s)
    s.scale(loss_of(model, 0)).backward()
    calls = []
    real = torch._amp_foreach_non_finite_check_and_unscale_
    monkeypatch.setattr(torch, "_amp_foreach_non_finite_check_and_unscale_",
                        lambda *a: calls.append(1) or real(*a))
    counter = Counter(monkeypatch)
    counter.pause_during(opt)
    assert guard.step() is True
    assert (len(calls), counter.norms, counter.reads) == (1, 0, 1)


def test_a_clip_check_is_not_reused_for_different_gradients():
    # clip() on a bad step, no step(), then a fresh finite backward: step() must re-check
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt)
    backward(model, 0)
    model.head.bias.grad[0] = nan
    assert torch.isnan(guard.clip_grad_norm_(1.0))
    opt.zero_grad()
    backward(model, 1)
    assert guard.step() is True
    # and the reverse: a finite clip, then a NaN appears in place before step()
    opt.zero_grad()
    backward(model, 2)
    guard.clip_grad_norm_(1.0)
    model.embed.weight.grad[0, 0] = inf
    assert guard.step() is False


def test_guarded_clip_is_torchs_bit_for_bit_when_the_optimizer_orders_parameters_differently():
    # as HF Trainer builds AdamW: weights decay, biases and norms do not, so the optimizer
    # lists the parameters in another order than model.parameters(); the total norm is a sum
    # and its rounding depends on the order (issue 31: 28 of 200 steps 1 ulp off)
    def build():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.LayerNorm(64),
                                    torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                    torch.nn.LayerNorm(64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 4))
        decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() > 1]
        rest = [p for n, p in model.named_parameters() if not (n.endswith("weight") and p.dim() > 1)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}], lr=1e-3)
        return model, opt

    (ref, ref_opt), (model, opt) = build(), build()
    guard = nanguard.GradGuard(opt, model=model)
    g = torch.Generator().manual_seed(1)
    for step in range(200):
        x, y = torch.randn(32, 16, generator=g), torch.randn(32, 4, generator=g)
        for m, o in ((ref, ref_opt), (model, opt)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
        expected = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        total = guard.clip_grad_norm_(0.5)
        assert_bitwise(total, expected, f"step {step}")
        ref_opt.step()
        assert guard.step()
        assert_bitwise(snapshot(model, opt), snapshot(ref, ref_opt), f"step {step}")
