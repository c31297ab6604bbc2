"""The gradient-explosion early warning: fires before the first non-finite gradient, names
where the growth started, stays quiet on healthy runs; and the plot."""

from __future__ import annotations

import math
import random
import sys
import warnings
from collections import OrderedDict

import pytest
import torch

import nanguard
from nanguard.torch.guard import HeadroomWarning
from nanguard.torch.guard.monitor import NormHistory
from nanguard.torch.guard.params import build_table


def deep_linear(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(OrderedDict(
        embed=torch.nn.Linear(8, 32), body=torch.nn.Linear(32, 32), head=torch.nn.Linear(32, 1)))


def regression(steps: int, head_lr_after: dict, monitor: nanguard.GradNormMonitor,
               autocast: torch.dtype | None = None):
    """Noisy linear regression; `head_lr_after` = {step: lr} changes the head's learning rate
    (a too-large one makes the run diverge geometrically until the gradients overflow).
    `autocast`: the forward under ``torch.autocast("cpu", dtype=autocast)``."""
    model = deep_linear()
    opt = torch.optim.SGD([
        {"params": list(model.embed.parameters()) + list(model.body.parameters()), "lr": 0.01},
        {"params": model.head.parameters(), "lr": 0.01}])
    guard = nanguard.GradGuard(opt, model=model, monitor=monitor, max_consecutive=None)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 1, generator=g)
    for t in range(steps):
        if t in head_lr_after:
            opt.param_groups[1]["lr"] = head_lr_after[t]
        x = torch.randn(64, 8, generator=g)
        y = x @ w + 0.1 * torch.randn(64, 1, generator=g)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            out = model(x)
        torch.nn.functional.mse_loss(out.float(), y).backward()
        guard.step()
    return guard


def test_warns_before_the_first_nonfinite_gradient_and_names_the_module():
    with pytest.warns(nanguard.GradientGrowthWarning) as caught:
        guard = regression(160, {100: 1.0}, nanguard.GradNormMonitor(window=50, factor=10))
    first_bad = guard.records.bad_steps[0]
    alert = guard.alerts[0]
    assert 101 < alert.step < first_bad  # after the learning rate changed, before inf
    assert alert.origin == "head" and alert.origin_step >= 101
    assert alert.ratio > 10 and {name for name, _ in alert.growing} == {"embed", "body", "head"}
    message = str(caught[0].message)
    assert "growth started in `head`" in message and "clipping only hides it" in message
    assert caught[0].message.alert is alert
    assert guard.records.growth_warnings == guard.alerts
    assert "gradient-growth warnings: 1" in guard.summary()


# the healthy runs, also with the float16/bfloat16 headroom watch on (issue 30)
PRECISIONS = [pytest.param(None, id="float32"), pytest.param(torch.float16, id="float16-headroom"),
              pytest.param(torch.bfloat16, id="bfloat16-headroom")]


@pytest.mark.parametrize("autocast", PRECISIONS)
def test_stays_quiet_on_a_healthy_noisy_run(autocast):
    with warnings.catch_warnings():
        warnings.simplefilter("error", nanguard.GradientGrowthWarning)
        warnings.simplefilter("error", HeadroomWarning)
        monitor = nanguard.GradNormMonitor(window=50, factor=10, headroom=autocast is not None)
        guard = regression(400, {}, monitor, autocast=autocast)
    assert guard.alerts == [] and guard.records.skipped == 0
    assert monitor.headroom_alerts == []
    if autocast is not None:   # the watch saw the low-precision outputs of every layer
        assert {k[:2] for k in monitor.headroom._series} >= {("activation", n) for n in MODULES}


@pytest.mark.slow
@pytest.mark.parametrize("autocast", PRECISIONS)
def test_stays_quiet_on_a_healthy_transformer(autocast):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.1, batch_first=True)
    net = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                              torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    monitor = nanguard.GradNormMonitor(window=20, headroom=autocast is not None)
    guard = nanguard.GradGuard(opt, model=net, monitor=monitor)
    g = torch.Generator().manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nanguard.GradientGrowthWarning)
        warnings.simplefilter("error", HeadroomWarning)
        for _ in range(150):
            x = torch.randn(8, 6, 16, generator=g)
            opt.zero_grad()
            with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
                out = net(x)
            torch.nn.functional.mse_loss(out.float(), x[..., :1].sum(1, keepdim=True).expand(-1, 6, -1)).backward()
            assert guard.step()
    assert guard.alerts == [] and monitor.headroom_alerts == []
    if autocast is not None:
        assert any(k[0] == "gradient" for k in monitor.headroom._series)
    # per layer: self_attn (in_proj), self_attn.out_proj, linear1, linear2, norm1, norm2; + head
    assert len(guard.monitor.modules) == 2 * 6 + 1


# -- the origin, on controlled norm sequences ------------------------------------------
MODULES = ["embed", "body", "head"]  # registration order = forward order


def bound_monitor(**kw) -> nanguard.GradNormMonitor:
    model = deep_linear()
    monitor = nanguard.GradNormMonitor(**kw)
    monitor.bind(build_table(torch.optim.SGD(model.parameters(), lr=0.1),
                             {id(p): n for n, p in model.named_parameters()}, None, "test"))
    monitor.detach()  # no backward pass here: use the registration order
    return monitor


def feed(monitor, steps, onsets, rates, seed=0, noise=0.2):
    """Norms ~1 with ±20% noise; module m grows by rates[m] per step from onsets[m] on."""
    rng = random.Random(seed)
    alerts = []
    for t in range(1, steps + 1):
        norms = [(rng.uniform(1 - noise, 1 + noise) * (rates[m] ** max(0, t - onsets[m]) if m in onsets else 1.0))
                 for m in MODULES]
        alert = monitor.observe(t, norms, math.hypot(*norms), bad=False)
        if alert:
            alerts.append(alert)
    return alerts


def test_origin_is_the_module_that_took_off_first_even_if_others_grow_faster():
    monitor = bound_monitor(window=40, factor=10, warn=False)
    alerts = feed(monitor, 110, onsets={"body": 80, "head": 86, "embed": 86},
                  rates={"body": 1.25, "head": 1.6, "embed": 1.25})
    assert alerts[0].origin == "body" and 80 <= alerts[0].origin_step <= 84
    assert alerts[0].module == "head"  # the biggest growth is elsewhere
    assert "growth started in `body`" in alerts[0].message()


def test_simultaneous_takeoff_at_one_rate_names_the_module_nearest_the_loss():
    monitor = bound_monitor(window=40, factor=10, warn=False)
    # one explosion reaching every module in the same step, at the same rate (up to 5% noise)
    alerts = feed(monitor, 110, onsets={m: 80 for m in MODULES}, rates={m: 1.3 for m in MODULES},
                  noise=0.05)
    assert alerts[0].origin == "head"


def test_simultaneous_takeoff_names_the_module_whose_norm_compounds_fastest():
    """A recurrent `body` whose Jacobian product explodes through time grows faster than
    the `head` it feeds, from the same step: the instability is in `body`."""
    monitor = bound_monitor(window=40, factor=10, warn=False)
    alerts = feed(monitor, 110, onsets={"body": 80, "head": 80}, rates={"body": 1.5, "head": 1.15})
    assert alerts[0].origin == "body"


def test_a_norm_that_overflowed_while_the_gradients_are_finite_is_the_origin():
    """Finite float32 gradients of 1e25 have an L2 norm that overflows to inf: that module
    grew the most, even though its growth cannot be measured as a ratio."""
    monitor = bound_monitor(window=20, factor=10, warn=False)
    rng = random.Random(0)
    alert = None
    for t in range(1, 40):
        jump = t >= 30
        norms = [rng.uniform(0.9, 1.1),
                 (math.inf if t >= 31 else 50.0) if jump else rng.uniform(0.9, 1.1),
                 60.0 if jump else rng.uniform(0.9, 1.1)]
        alert = alert or monitor.observe(t, norms, 1.0, bad=False)
    assert alert.origin == "body"


class ReluRNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.RNN(4, 32, nonlinearity="relu", batch_first=True)
        self.head = torch.nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


@pytest.mark.slow
def test_an_rnn_exploding_through_time_is_blamed_on_the_recurrent_layer():
    """benchmarks/monitor_eval.py's `rnn` run (seed 2, W_hh = 0.5 I): SGD whose learning rate
    ramps from 1e-6 to 1e-3 until the recurrent matrix's spectral radius passes 1. Both
    modules' norms take off together; the recurrent one grows faster and is the origin
    (the previous rule named `head`, the module nearest the loss)."""
    torch.manual_seed(2)
    net = ReluRNN()
    with torch.no_grad():
        net.rnn.weight_hh_l0.copy_(0.5 * torch.eye(32) + 0.01 * torch.randn(32, 32))
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    guard = nanguard.GradGuard(opt, model=net, max_consecutive=None,
                               monitor=nanguard.GradNormMonitor(warn=False))
    g = torch.Generator().manual_seed(2)
    for t in range(340):
        opt.param_groups[0]["lr"] = 1e-6 * 1000 ** (t / 400)
        x = torch.rand(32, 40, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), x[:, :, 0].sum(1, keepdim=True)).backward()
        if not guard.step():
            break
    first_bad = guard.records.bad_steps[0]
    alert = guard.alerts[0]
    assert alert.step < first_bad and alert.module == "rnn" and alert.origin == "rnn"
    assert {name for name, _ in alert.growing} == {"rnn", "head"}


def test_climb_warns_on_a_geometric_rise_that_starts_below_an_early_peak():
    """Early training had norms of 100; the explosion starts from 1. The default test waits
    until the norm tops 100 (a new high); `climb=6` warns after six rises in a row."""
    default, climbing = bound_monitor(window=30, factor=10, warn=False), \
        bound_monitor(window=30, factor=10, climb=6, warn=False)
    rng = random.Random(0)
    first = {}
    for t in range(1, 140):
        scale = 100.0 if t <= 20 else (1.0 if t <= 100 else 1.3 ** (t - 100))
        norms = [scale * rng.uniform(0.9, 1.1) for _ in MODULES]
        for name, monitor in (("default", default), ("climb", climbing)):
            alert = monitor.observe(t, norms, scale, bad=False)
            if alert and name not in first:
                first[name] = alert
    assert first["climb"].reason == "climb" and 104 <= first["climb"].step <= 110
    assert "rising 6 steps in a row" in first["climb"].message()
    assert first["default"].step > 117 and first["default"].norm > 100  # 1.3^18 ≈ 112


def test_climb_stays_quiet_on_a_healthy_noisy_run():
    with warnings.catch_warnings():
        warnings.simplefilter("error", nanguard.GradientGrowthWarning)
        guard = regression(400, {}, nanguard.GradNormMonitor(window=50, factor=10, climb=6))
    assert guard.alerts == []


def test_nearest_the_loss_is_learned_from_the_backward_pass_not_the_registration_order():
    class Net(torch.nn.Module):  # head registered first, but it runs last
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(4, 1)
            self.body = torch.nn.Linear(4, 4)
            self.embed = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.head(self.body(self.embed(x)))

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    monitor = nanguard.GradNormMonitor(window=40, factor=10, warn=False)
    guard = nanguard.GradGuard(opt, model=net, monitor=monitor)
    net(torch.randn(3, 4)).sum().backward()
    guard.step()
    assert monitor._hooks == []  # learned once, then removed
    rng = random.Random(0)
    names = list(monitor.modules)  # head, body, embed
    alert = None
    for t in range(2, 110):
        norms = [rng.uniform(0.8, 1.2) * (1.3 ** max(0, t - 80)) for _ in names]
        alert = alert or monitor.observe(t, norms, 1.0, bad=False)
    assert alert.origin == "head"


def test_one_warning_per_episode_and_none_on_skipped_steps():
    monitor = bound_monitor(window=20, factor=5, warn=False)
    alerts = feed(monitor, 60, onsets={"body": 25}, rates={"body": 1.3})
    assert len(alerts) == 2 and alerts[1].step - alerts[0].step > 20
    quiet = bound_monitor(window=20, factor=5, warn=False)
    for t in range(1, 40):
        assert quiet.observe(t, [1.0, 1e6 if t > 30 else 1.0, 1.0], 1.0, bad=True) is None


def test_quiet_when_a_converged_runs_tiny_norms_climb_back_below_their_old_scale():
    """The benchmark transformer memorising its batch: norms of ~1 fall to 1e-3, then
    Adam's noise lifts them 10-15x, to 1e-2: growth, but nowhere near an explosion."""
    monitor = bound_monitor(window=20, factor=10, warn=False)
    rng = random.Random(3)
    alerts = []
    for t in range(1, 160):
        scale = 1.0 if t < 40 else (1e-3 if t < 100 else 1.5e-2)
        alert = monitor.observe(t, [scale * rng.uniform(0.9, 1.1) for _ in MODULES], scale, bad=False)
        alerts += [alert] if alert else []
    assert alerts == []
    # the same climb that goes on past the old scale is an explosion
    for t in range(160, 200):
        scale = 1.5e-2 * 1.3 ** (t - 159)
        alert = monitor.observe(t, [scale * rng.uniform(0.9, 1.1) for _ in MODULES], scale, bad=False)
        alerts += [alert] if alert else []
    assert alerts and alerts[0].norm > 1.0


def test_threshold_fires_even_before_the_window_is_full():
    monitor = bound_monitor(window=50, factor=10, threshold=5.0, warn=False)
    alerts = feed(monitor, 30, onsets={"head": 10}, rates={"head": 1.2})
    assert alerts and alerts[0].reason == "threshold" and alerts[0].module == "head"
    assert alerts[0].norm > 5.0 and "crossed the threshold" in alerts[0].short()
    assert alerts[0].to_dict()["module"] == "head"


def test_depth_groups_parameters_into_coarser_modules():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    net = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False))
    guard = nanguard.GradGuard(torch.optim.SGD(net.parameters(), lr=0.1), model=net,
                               monitor=nanguard.GradNormMonitor(depth=3))
    assert guard.monitor.modules == ("0.layers.0", "0.layers.1", "0.layers.2")
    plain = nanguard.GradGuard(torch.optim.SGD(net.parameters(), lr=0.1), monitor=True)
    assert plain.monitor.modules == ("param_groups[0]",)


def test_module_norms_are_the_l2_norms_of_their_parameters():
    model = deep_linear()
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.0), model=model, monitor=True)
    model(torch.randn(5, 8)).pow(2).sum().backward()
    guard.step()
    steps, series = guard.monitor.history.series()
    for name in MODULES:
        module = getattr(model, name)
        expected = torch.cat([p.grad.flatten() for p in module.parameters()]).norm().item()
        assert series[name][0] == pytest.approx(expected, rel=1e-6)
    total = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert series["(total)"][0] == pytest.approx(total, rel=1e-6)


def test_history_is_bounded_and_keeps_spikes():
    h = NormHistory(["a"], capacity=16)
    for t in range(1, 1001):
        h.add(t, [1000.0 if t == 437 else 1.0], bad=t == 438)
    steps, series = h.series()
    assert len(steps) <= 17 and steps == sorted(steps) and steps[-1] == 1000
    assert max(series["a"]) == 1000.0  # merged rows keep the larger norm
    assert list(h.bad_steps) == [438]


def test_monitor_arguments_are_checked():
    for kw, err in [({"window": 4}, ValueError), ({"window": 8.0}, TypeError),
                    ({"factor": 1.0}, ValueError), ({"factor": "10"}, TypeError),
                    ({"threshold": 0}, ValueError), ({"threshold": "x"}, TypeError),
                    ({"history": 2}, ValueError), ({"depth": 0}, ValueError),
                    ({"warn": 1}, TypeError), ({"climb": 2}, ValueError),
                    ({"climb": 50}, ValueError), ({"climb": 6.0}, TypeError)]:
        with pytest.raises(err):
            nanguard.GradNormMonitor(**kw)


# -- plot ----------------------------------------------------------------------------------
def test_plot_draws_modules_total_skipped_steps_and_warnings(tmp_path):
    pytest.importorskip("matplotlib")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nanguard.GradientGrowthWarning)
        guard = regression(130, {100: 1.0}, nanguard.GradNormMonitor(window=50, factor=10))
    path = tmp_path / "gradnorms.png"
    fig = guard.plot(str(path), top=2)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert ax.get_yscale() == "log"
    assert "total" in labels and len([n for n in labels if n in MODULES]) == 2
    assert "non-finite step" in labels and "growth warning (from head)" in labels
    assert "top 2 of 3 modules" in ax.get_title()


def test_a_step_skipped_for_a_nan_loss_is_a_bad_step_and_the_plot_marks_it():
    pytest.importorskip("matplotlib")
    model = deep_linear()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    guard = nanguard.GradGuard(opt)
    for step in range(4):
        opt.zero_grad()
        loss = model(torch.randn(4, 8)).sum()
        guard.backward(loss * float("nan") if step == 1 else loss)
        guard.step()
    assert guard.records.bad_steps == [2] == guard.records.skipped_steps
    ax = guard.plot().axes[0]
    marks = [line.get_xdata()[0] for line in ax.get_lines() if line.get_color() == "tab:red"]
    assert marks == [2]
    assert "non-finite gradients" not in guard.summary()  # the loss was bad, not the gradients


def test_plot_without_a_monitor_draws_the_total(tmp_path):
    pytest.importorskip("matplotlib")
    model = deep_linear()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    guard = nanguard.GradGuard(opt)
    with pytest.raises(ValueError, match="nothing to draw"):
        guard.plot()
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        guard.step()
    labels = [line.get_label() for line in guard.plot().axes[0].get_lines()]
    assert labels == ["total"]


def test_plot_marks_overflowed_nan_and_zero_norms_on_the_edges_and_keeps_the_legend_out(tmp_path):
    pytest.importorskip("matplotlib")
    from nanguard.torch.guard.monitor import TOTAL
    from nanguard.torch.guard.plot import plot_history

    history = NormHistory(["body", "head", TOTAL], 64)
    inf = float("inf")
    for step in range(1, 21):
        body = 10.0 ** step if step < 15 else inf  # overflows float32 from step 15 on
        head = 0.0 if step in (3, 4) else 1.0  # a dead layer for two steps
        total = float("nan") if step == 18 else body + head
        history.add(step, [body, head, total], bad=step >= 15)
    fig = plot_history(history, [], path=str(tmp_path / "p.png"))
    ax = fig.axes[0]
    marks = {c.get_label(): c.get_offsets() for c in ax.collections}
    top_inf = marks["Inf norm (overflow), at the top"]
    assert list(top_inf[:, 0]) == list(range(15, 21)) and set(top_inf[:, 1]) == {1.0}
    assert list(marks["zero norm, at the bottom"][:, 0]) == [3, 4]
    assert list(marks["NaN norm, at the top"][:, 0]) == [18]
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # beside the data, never over it


def test_plot_without_matplotlib_says_how_to_install_it(monkeypatch):
    guard = nanguard.GradGuard(torch.optim.SGD(deep_linear().parameters(), lr=0.1))
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like
    with pytest.raises(ImportError, match=r"optional extra.*pip install nanguard\[plot\]"):
        guard.plot("x.png")
