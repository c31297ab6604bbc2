"""GradGuard policies: skip is bitwise invisible, zero touches only non-finite elements,
raise names the parameters, and max_consecutive stops a run that never recovers."""

from __future__ import annotations

import copy
from collections import OrderedDict

import pytest
import torch

import nanguard
from guard_helpers import (CORE, OPTIMIZERS, assert_bitwise, backward, batch, inf, make_model,
                           nan, snapshot)


def poison(model: torch.nn.Module, name: str, index, value: float = nan) -> None:
    dict(model.named_parameters())[name].grad[index] = value


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_skip_is_as_if_the_bad_step_never_happened(opt_name):
    # Run A: 3 good steps, a bad one (skipped), 2 good. Run B: the same without the bad one.
    # Parameters and the whole optimizer state must agree bit for bit, also right after the skip.
    model_a, model_b = make_model(), make_model()
    opt_a, opt_b = OPTIMIZERS[opt_name](model_a.parameters()), OPTIMIZERS[opt_name](model_b.parameters())
    guard = nanguard.GradGuard(opt_a, model=model_a)
    for seed in range(3):
        for model, opt in ((model_a, opt_a), (model_b, opt_b)):
            opt.zero_grad()
            backward(model, seed)
        assert guard.step() is True
        opt_b.step()
    before = snapshot(model_a, opt_a)
    opt_a.zero_grad()
    backward(model_a, 99)
    poison(model_a, "head.weight", (1, 3))
    assert guard.step() is False
    assert_bitwise(snapshot(model_a, opt_a), before)
    for seed in (3, 4):
        for model, opt in ((model_a, opt_a), (model_b, opt_b)):
            opt.zero_grad()
            backward(model, seed)
        assert guard.step() is True
        opt_b.step()
    assert_bitwise(snapshot(model_a, opt_a), snapshot(model_b, opt_b))
    assert guard.records.steps == 6 and guard.records.applied == 5 and guard.records.skipped == 1


def test_skip_on_the_first_step_creates_no_optimizer_state():
    model = make_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt)
    backward(model, 0)
    poison(model, "embed.bias", 0, inf)
    before = [p.detach().clone() for p in model.parameters()]
    assert guard.step() is False
    assert opt.state_dict()["state"] == {}
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_skip_leaves_the_gradients_for_inspection():
    model = make_model()
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1))
    backward(model, 0)
    poison(model, "head.bias", 1)
    guard.step()
    assert torch.isnan(model.head.bias.grad[1])


@pytest.mark.parametrize("opt_name", CORE)
def test_zero_replaces_only_the_nonfinite_elements(opt_name):
    # Reference: the same gradients with exactly those elements set to 0 by hand, then step.
    model_a, model_b = make_model(), make_model()
    opt_a, opt_b = OPTIMIZERS[opt_name](model_a.parameters()), OPTIMIZERS[opt_name](model_b.parameters())
    guard = nanguard.GradGuard(opt_a, policy="zero", model=model_a)
    for seed in range(4):
        for model, opt in ((model_a, opt_a), (model_b, opt_b)):
            opt.zero_grad()
            backward(model, seed)
        if seed == 2:
            poison(model_a, "head.weight", (0, 1), nan)
            poison(model_a, "head.weight", (1, 5), -inf)
            poison(model_a, "embed.bias", 7, inf)
            model_b.head.weight.grad[0, 1] = 0.0
            model_b.head.weight.grad[1, 5] = 0.0
            model_b.embed.bias.grad[7] = 0.0
        assert guard.step() is True
        opt_b.step()
    assert_bitwise(snapshot(model_a, opt_a), snapshot(model_b, opt_b))
    r = guard.records
    assert (r.steps, r.applied, r.zeroed, r.skipped) == (4, 3, 1, 0)
    (event,) = r.events
    assert event.step == 3 and event.action == "zeroed"
    counts = {p.name: (p.nan, p.inf) for p in event.params}
    assert counts == {"embed.bias": (0, 1), "head.weight": (1, 1)}


def test_zero_keeps_the_bits_of_finite_gradient_elements():
    model = make_model()
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.0), policy="zero")
    backward(model, 0)
    grad = model.head.weight.grad
    grad[0, 0] = -0.0  # a signed zero must survive
    expected = grad.clone()
    expected[1, 2] = 0.0
    grad[1, 2] = nan
    guard.step()
    assert_bitwise(grad, expected)


def test_raise_names_the_parameters_and_updates_nothing():
    model = make_model()
    opt = torch.optim.AdamW(model.parameters())
    guard = nanguard.GradGuard(opt, policy="raise", model=model)
    backward(model, 0)
    guard.step()
    opt.zero_grad()
    backward(model, 1)
    poison(model, "head.weight", (0, 0))
    poison(model, "head.weight", (1, 1), inf)
    before = snapshot(model, opt)
    with pytest.raises(nanguard.NonFiniteError) as info:
        guard.step()
    assert isinstance(info.value, FloatingPointError)
    message = str(info.value)
    assert "step 2" in message and "head.weight" in message and "1 NaN, 1 Inf of 16" in message
    assert "embed" not in message
    event = info.value.report
    assert event.action == "raised" and [p.name for p in event.params] == ["head.weight"]
    assert event.to_dict()["params"][0]["numel"] == 16
    assert_bitwise(snapshot(model, opt), before)


@pytest.mark.parametrize("policy", ["skip", "zero"])
def test_max_consecutive_raises_with_the_summary_instead_of_looping_forever(policy):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, policy=policy, max_consecutive=3, model=model)
    outcomes = []
    for seed in range(2):  # two bad, then a good one resets the streak
        opt.zero_grad()
        backward(model, seed)
        poison(model, "embed.weight", (0, 0))
        outcomes.append(guard.step())
    opt.zero_grad()
    backward(model, 5)
    assert guard.step() is True
    for seed in range(2):
        opt.zero_grad()
        backward(model, seed)
        poison(model, "embed.weight", (0, 0))
        outcomes.append(guard.step())
    assert outcomes == [policy == "zero"] * 4
    opt.zero_grad()
    backward(model, 9)
    poison(model, "embed.weight", (0, 0))
    before = snapshot(model, opt)
    with pytest.raises(nanguard.NonFiniteError) as info:
        guard.step()
    message = str(info.value)
    assert "3 bad steps in a row (max_consecutive=3)" in message
    assert "nanguard GradGuard" in message and "embed.weight" in message  # the summary
    assert_bitwise(snapshot(model, opt), before)  # the limit-reaching step is not applied
    assert guard.records.longest_run == 3 and guard.records.raised == 1


def test_max_consecutive_none_skips_forever():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, max_consecutive=None)
    for seed in range(40):
        opt.zero_grad()
        backward(model, seed)
        poison(model, "head.bias", 0)
        assert guard.step() is False
    assert guard.records.skipped == 40


def test_check_loss_lets_the_loop_skip_backward_and_counts_toward_the_limit():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, max_consecutive=3, model=model)
    x, y = batch(0)
    assert guard.check_loss(torch.nn.functional.mse_loss(model(x), y)) is True
    x[3, 1] = nan
    loss = torch.nn.functional.mse_loss(model(x), y)
    assert guard.check_loss(loss) is False
    assert guard.check_loss(torch.tensor([1.0, inf])) is False  # any shape
    (first, second) = guard.records.events
    assert first.kind == "loss" and first.step == 1 and first.loss != first.loss
    assert second.loss is None
    assert guard.records.nonfinite_losses == 2 and guard.records.steps == 0
    with pytest.raises(nanguard.NonFiniteError, match="3 bad steps in a row"):
        guard.check_loss(loss)


def test_check_loss_with_policy_raise_raises_at_once():
    guard = nanguard.GradGuard(torch.optim.SGD(make_model().parameters(), lr=0.1), policy="raise")
    with pytest.raises(nanguard.NonFiniteError, match="non-finite loss"):
        guard.check_loss(torch.tensor(inf))


def test_a_good_step_resets_the_streak_but_a_finite_loss_does_not():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, max_consecutive=2)
    assert guard.check_loss(torch.tensor(nan)) is False
    assert guard.check_loss(torch.tensor(1.0)) is True
    with pytest.raises(nanguard.NonFiniteError):
        guard.check_loss(torch.tensor(nan))


def test_gradient_accumulation_skips_the_whole_accumulated_step():
    # 3 micro-batches per step; one NaN micro-batch poisons the accumulated gradient, the
    # step is skipped, and the run equals one that never saw that step.
    model_a, model_b = make_model(), make_model()
    opt_a, opt_b = torch.optim.AdamW(model_a.parameters()), torch.optim.AdamW(model_b.parameters())
    guard = nanguard.GradGuard(opt_a, model=model_a)
    decisions = []
    for step in range(4):
        opt_a.zero_grad()
        for micro in range(3):
            backward(model_a, 10 * step + micro, scale=1 / 3)
            if step == 1 and micro == 1:
                poison(model_a, "embed.weight", (2, 2))
        decisions.append(guard.step())
        if step != 1:
            opt_b.zero_grad()
            for micro in range(3):
                backward(model_b, 10 * step + micro, scale=1 / 3)
            opt_b.step()
    assert decisions == [True, False, True, True]
    assert_bitwise(snapshot(model_a, opt_a), snapshot(model_b, opt_b))


def test_param_groups_and_names():
    model = make_model()
    opt = torch.optim.SGD([{"params": model.embed.parameters(), "lr": 0.1},
                           {"params": model.head.parameters(), "lr": 0.01}])
    named = nanguard.GradGuard(opt, model=model)
    anonymous = nanguard.GradGuard(opt)
    backward(model, 0)
    poison(model, "head.bias", 1)
    assert named.step() is False and anonymous.step() is False
    assert [p.name for p in named.records.events[0].params] == ["head.bias"]
    assert [p.name for p in anonymous.records.events[0].params] == ["param_groups[1][1]"]


def test_names_follow_the_model_into_a_transformer():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                                     batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.head = torch.nn.Linear(16, 1)

        def forward(self, x):
            return self.head(self.encoder(x))

    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.AdamW(net.parameters())
    guard = nanguard.GradGuard(opt, model=net)
    net(torch.randn(2, 5, 16)).sum().backward()
    net.encoder.layers[3].linear1.weight.grad[4, :3] = nan
    assert guard.step() is False
    summary = guard.summary()
    assert "encoder.layers.3.linear1.weight" in summary and "32×16" in summary
    row = [line for line in summary.splitlines() if "linear1.weight" in line][0]
    assert row.split()[2:] == ["3", "0", "1", "1", "1"]  # NaN, Inf, bad steps, first, last


def test_named_parameters_and_wrappers_give_the_same_names():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for source in (model.named_parameters(), torch.nn.DataParallel(model)):
        guard = nanguard.GradGuard(opt, model=source)
        assert guard._table.names == ("embed.weight", "embed.bias", "head.weight", "head.bias")


def test_a_param_group_added_later_is_guarded_and_named():
    model = make_model()
    opt = torch.optim.SGD(model.embed.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model)
    opt.add_param_group({"params": model.head.parameters()})
    backward(model, 0)
    poison(model, "head.weight", (0, 0))
    assert guard.step() is False
    assert guard.records.events[0].params[0].name == "head.weight"


def test_a_finite_gradient_whose_norm_overflows_is_still_applied():
    # |g| = 1e30: every element finite, but the float32 sum of squares overflows to inf.
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-40)
    guard = nanguard.GradGuard(opt)
    backward(model, 0)
    model.head.weight.grad.fill_(1e30)
    assert guard.step() is True
    assert guard.records.skipped == 0 and not guard.records.events


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_gradients_are_checked_in_float32(dtype):
    # 4096 elements of 300: finite in float16, but the float16 sum of squares (3.7e8) is not
    p = torch.nn.Parameter(torch.zeros(4096, dtype=dtype))
    guard = nanguard.GradGuard(torch.optim.SGD([p], lr=1e-6))
    p.grad = torch.full_like(p, 300.0)
    assert guard.step() is True
    p.grad[7] = nan
    assert guard.step() is False
    assert guard.records.events[0].params[0].nan == 1


def test_sparse_gradients():
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters())
    guard = nanguard.GradGuard(opt, model=emb)
    emb(torch.tensor([1, 4])).sum().backward()
    assert guard.step() is True
    opt.zero_grad()
    (emb(torch.tensor([2, 5])) * torch.tensor([[1.0, nan, 1.0], [1.0, 1.0, 1.0]])).sum().backward()
    before = snapshot(emb, opt)
    assert guard.step() is False
    assert_bitwise(snapshot(emb, opt), before)
    assert guard.records.events[0].params[0].name == "weight"


def test_parameters_without_gradients_are_ignored():
    model = make_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt)
    assert guard.step() is True  # no gradients at all
    model.head(torch.randn(2, 8)).sum().backward()  # embed gets none
    assert guard.step() is True


def test_records_summary_and_state_dict():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, max_events=2)
    for seed in range(6):
        opt.zero_grad()
        backward(model, seed)
        if seed in (1, 2, 4):
            poison(model, "head.bias", 0)
        guard.step()
    r = guard.records
    assert (r.steps, r.applied, r.skipped, r.longest_run, r.consecutive) == (6, 3, 3, 2, 0)
    assert r.bad_steps == [3, 5]  # the event list is bounded to the newest 2
    assert r.params["head.bias"].steps == 3 and r.params["head.bias"].first == 2  # totals are not
    summary = guard.summary()
    assert "6 steps, 3 applied, 3 skipped, 0 zeroed" in summary
    assert "longest run of bad steps: 2 (raises at 25)" in summary
    d = r.to_dict()
    assert d["skipped"] == 3 and d["events"][-1]["step"] == 5
    state = guard.state_dict()
    fresh = nanguard.GradGuard(opt, model=model)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
    with pytest.raises(ValueError, match="unexpected entry"):
        fresh.load_state_dict({"bogus": 1})
    assert "skipped=3" in repr(guard)


def test_extra_step_arguments_are_forwarded_and_closures_refused():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt)
    with pytest.raises(TypeError, match="closure"):
        guard.step(lambda: 0.0)
    with pytest.raises(TypeError, match="LBFGS"):
        guard.step(closure=lambda: 0.0)


def test_bad_arguments_fail_early_with_clear_errors():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"unknown policy 'skipp'.*'skip', 'zero', 'raise'"):
        nanguard.GradGuard(opt, policy="skipp")
    with pytest.raises(TypeError, match="must be a torch.optim.Optimizer, got Sequential.*model="):
        nanguard.GradGuard(model)
    with pytest.raises(TypeError, match="got generator.*build an optimizer"):
        nanguard.GradGuard(model.parameters())
    with pytest.raises(ValueError, match="max_consecutive.*>= 1"):
        nanguard.GradGuard(opt, max_consecutive=0)
    with pytest.raises(TypeError, match="max_consecutive"):
        nanguard.GradGuard(opt, max_consecutive=2.5)
    with pytest.raises(ValueError, match="does not own parameter 0 of param group 0"):
        nanguard.GradGuard(opt, model=make_model())
    with pytest.raises(ValueError, match=r"parameter 2 of param group 0 \(shape \[2, 8\]\)"):
        nanguard.GradGuard(opt, model=model.embed)  # owns embed, not head
    with pytest.raises(TypeError, match="must be a torch.nn.Module or an iterable"):
        nanguard.GradGuard(opt, model="model")
    with pytest.raises(TypeError, match="yield \\(name, tensor\\) pairs"):
        nanguard.GradGuard(opt, model=list(model.parameters()))
    with pytest.raises(TypeError, match="torch.amp.GradScaler"):
        nanguard.GradGuard(opt, scaler=object())
    with pytest.raises(TypeError, match="GradNormMonitor"):
        nanguard.GradGuard(opt, monitor="yes")
    with pytest.raises(TypeError, match="distributed"):
        nanguard.GradGuard(opt, distributed="auto")
    with pytest.raises(ValueError, match="max_events"):
        nanguard.GradGuard(opt, max_events=0)
    guard = nanguard.GradGuard(opt)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        guard.check_loss(1.0)
    with pytest.raises(RuntimeError, match="not initialised"):
        nanguard.GradGuard(opt, distributed=True).step()


def test_the_model_can_change_without_rebuilding_the_guard():
    # deep-copied optimizer state is irrelevant: the guard reads param_groups each step
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model)
    clone = copy.deepcopy(model)
    opt.param_groups[0]["params"] = list(clone.parameters())
    with pytest.raises(ValueError, match="does not own"):
        guard.step()  # the named model no longer owns what the optimizer trains


def test_the_summary_lists_from_the_output_side_where_the_nan_entered_backward():
    # a NaN enters the backward pass at l1's output: l1 and l0 get NaN gradients, l2 and l3
    # do not. The table starts at l1, not at l0 (registration order) or alphabetically.
    torch.manual_seed(0)
    layers = OrderedDict()
    for k in range(4):
        layers[f"l{k}"] = torch.nn.Linear(6, 6)
        layers[f"act{k}"] = torch.nn.Tanh()
    model = torch.nn.Sequential(layers)

    def poison_grad(module, inputs, output):
        output.register_hook(lambda g: g.index_put((torch.tensor(0), torch.tensor(2)), torch.tensor(nan)))

    model.l1.register_forward_hook(poison_grad)
    guard = nanguard.GradGuard(torch.optim.SGD(model.parameters(), lr=0.1), model=model)
    model(torch.randn(3, 6)).sum().backward()
    assert guard.step() is False
    assert [p.name for p in guard.records.events[0].params] == ["l1.bias", "l1.weight", "l0.bias", "l0.weight"]
    summary = guard.summary()
    assert "4 of 8 parameters had non-finite gradients (output side first)" in summary
    rows = summary.splitlines()[-4:]
    assert [r.split()[0] for r in rows] == ["l1.bias", "l1.weight", "l0.bias", "l0.weight"]
