"""Checkpoint hygiene: safe_to_save() refuses NaN weights, buffers and optimizer state; a bad
step's micro-batches are dumped for a post-mortem."""

from __future__ import annotations

import os
from collections import OrderedDict

import pytest
import torch

import nanguard
from guard_helpers import backward, batch, make_model, nan


def bn_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(OrderedDict(
        embed=torch.nn.Linear(4, 8), norm=torch.nn.BatchNorm1d(8), head=torch.nn.Linear(8, 2)))


def test_a_healthy_state_is_safe_to_save():
    model = bn_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt, model=model)
    backward(model, 0)
    guard.step()
    assert guard.safe_to_save() is True
    assert guard.nonfinite_state() == []


def test_a_nan_forward_poisons_batchnorm_even_when_the_step_is_skipped():
    model = bn_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt, model=model)
    x, y = batch(0)
    x[0, 0] = nan
    guard.backward(torch.nn.functional.mse_loss(model(x), y))
    assert guard.step() is False  # the weights are safe ...
    # ... but the running statistics were updated by the NaN forward pass
    with pytest.warns(RuntimeWarning, match="buffer norm.running_mean"):
        assert guard.safe_to_save() is False
    assert guard.nonfinite_state() == ["buffer norm.running_mean", "buffer norm.running_var"]


def test_nan_weights_and_optimizer_state_are_named():
    model = make_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt, model=model, policy="zero")
    backward(model, 0)
    guard.step()
    with torch.no_grad():
        model.head.weight[0, 0] = nan  # a user's own update, outside the guard
    opt.state[model.embed.bias]["exp_avg_sq"][1] = float("inf")
    assert guard.nonfinite_state() == ["head.weight", "optimizer state embed.bias.exp_avg_sq"]
    with pytest.warns(RuntimeWarning):
        assert not guard.safe_to_save()


def test_bad_steps_dump_their_micro_batches(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, dump_dir=tmp_path / "post", max_dumps=2)
    for step in range(4):
        opt.zero_grad()
        for m in range(3):
            x, y = batch(10 * step + m)
            if step in (1, 2, 3) and m == 1:
                x[2, 0] = nan
            guard.backward(torch.nn.functional.mse_loss(model(x), y), batch={"x": x, "y": y})
        guard.step()
    files = sorted(os.listdir(tmp_path / "post"))
    assert files == ["nanguard-step000002-rank0.pt", "nanguard-step000003-rank0.pt"]  # max 2
    dumped = torch.load(tmp_path / "post" / files[0], weights_only=False)
    assert dumped["step"] == 2 and dumped["rank"] == 0
    assert list(dumped["micro_batches"]) == [2]  # the bad micro-batch
    x = dumped["micro_batches"][2]["x"]
    assert torch.isnan(x[2, 0]) and x.device.type == "cpu"
    assert torch.equal(x[3], batch(11)[0][3])
    assert "micro-batch 2 of 3" in dumped["what"]


def test_a_bad_gradient_dumps_the_whole_window_and_check_loss_dumps_its_batch(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, model=model, dump_dir=tmp_path)
    for m in range(2):
        x, y = batch(m)
        guard.backward(torch.nn.functional.mse_loss(model(x), y), batch=(x, y))
    model.head.bias.grad[0] = nan
    guard.step()
    dumped = torch.load(tmp_path / "nanguard-step000001-rank0.pt", weights_only=False)
    assert list(dumped["micro_batches"]) == [1, 2] and isinstance(dumped["micro_batches"][1], tuple)
    assert dumped["event"]["params"][0]["name"] == "head.bias"
    assert not guard.check_loss(torch.tensor(nan), batch=torch.arange(3))
    dumped = torch.load(tmp_path / "nanguard-step000002-rank0.pt", weights_only=False)
    assert torch.equal(dumped["micro_batches"][1], torch.arange(3))


def test_no_dump_without_a_bad_step_and_a_failed_dump_only_warns(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = nanguard.GradGuard(opt, dump_dir=tmp_path / "d")
    x, y = batch(0)
    guard.backward(torch.nn.functional.mse_loss(model(x), y), batch=(x, y))
    guard.step()
    assert not (tmp_path / "d").exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    guard = nanguard.GradGuard(opt, dump_dir=blocker)
    with pytest.warns(RuntimeWarning, match="could not dump"):
        guard.backward(torch.tensor(nan, requires_grad=True), batch=(x, y))
        assert guard.step() is False
    with pytest.raises(TypeError, match="`dump_dir` must be a path"):
        nanguard.GradGuard(opt, dump_dir=3)
    with pytest.raises(ValueError, match="`max_dumps` must be an int >= 0"):
        nanguard.GradGuard(opt, dump_dir=tmp_path, max_dumps=-1)


def test_the_guard_state_restores_counters_bad_steps_and_per_parameter_totals():
    import json

    model = make_model()
    opt = torch.optim.Adam(model.parameters())
    guard = nanguard.GradGuard(opt, model=model)
    for step in range(5):
        opt.zero_grad()
        x, y = batch(step)
        guard.backward(torch.nn.functional.mse_loss(model(x), y) * (nan if step == 3 else 1.0))
        if step == 1:
            model.head.bias.grad[0] = nan
        guard.step()
    state = json.loads(json.dumps(guard.state_dict()))  # plain data: fits any checkpoint

    resumed = nanguard.GradGuard(torch.optim.Adam(model.parameters()), model=model)
    resumed.load_state_dict(state)
    assert resumed.records.bad_steps == [2, 4] == guard.records.bad_steps
    events = [json.dumps(e.to_dict()) for e in guard.records.events]  # a NaN loss: not ==
    assert [json.dumps(e.to_dict()) for e in resumed.records.events] == events
    assert resumed.records.params == guard.records.params
    assert resumed.summary() == guard.summary()
    with pytest.raises(ValueError, match="unexpected entry 'nonsense'"):
        resumed.load_state_dict({"nonsense": 1})
