"""Parameters and buffers, the values that outlive a step, are checked where they are written
(issue 14): an optimizer-made NaN is the optimizer's, not the data's; a running variance gone
to Inf is reported in the forward that wrote it, not when the model is next evaluated."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nanguard

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6) * self.weight


class TinyLM(nn.Module):
    """Embedding + RMSNorm + head: the shape of a Llama, small enough for a test."""

    def __init__(self, vocab: int = 20, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(ids)))


def _adam_eps0_run(exhaustive: bool):
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, eps=0.0)
    ids = torch.randint(0, 10, (4, 5))           # rows 10..19 of the embedding get no gradient
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        for _ in range(3):
            loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()                           # the line the report must name
            ids = torch.randint(0, 20, (4, 5))   # next batch uses the rows Adam made NaN
    return d.report, model


@pytest.mark.parametrize("exhaustive", MODES)
def test_adam_eps0_nan_in_an_embedding_is_blamed_on_the_step(exhaustive):
    report, model = _adam_eps0_run(exhaustive)
    assert torch.isnan(model.embed.weight).any()
    assert report is not None and report.phase == "optimizer" and report.kind == "nan"
    assert report.code == "opt.step()                           # the line the report must name"
    assert report.step == 1
    assert "eps=0" in report.explanation and "check the data" not in report.suggestion.lower()
    if not exhaustive:
        assert report.op == "Adam.step"
        assert [s.name for s in report.outputs] == ["model.embed.weight"]
        assert report.outputs[0].nan > 0 and report.inputs[0].name == "model.embed.weight.grad"


def test_a_healthy_step_is_quiet_and_parameters_are_untouched():
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 20, (4, 5))
    with nanguard.detect() as d:
        for _ in range(3):
            loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert d.report is None


def test_inf_only_parameters_are_not_reported_under_check_nan():
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=2.0)
    with nanguard.detect(check="nan", mode="record") as d:
        model.weight.grad = torch.full_like(model.weight, -float(torch.finfo(torch.float32).max))
        model.bias.grad = torch.zeros_like(model.bias)
        opt.step()                                        # weight + 2·max overflows to +inf
    assert torch.isinf(model.weight).all()
    assert d.report is None


def _huge_batch_norm_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.Linear(16, 1))
    with torch.no_grad():
        model[0].weight.mul_(3e19)       # weights grown huge by a learning rate of 1e3
    return model


@pytest.mark.parametrize("exhaustive", MODES)
def test_running_var_gone_inf_is_reported_in_the_forward_that_wrote_it(exhaustive):
    model = _huge_batch_norm_model()
    x = torch.randn(32, 4)
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        out = model(x)                   # the line the report must name
    assert torch.isfinite(out).all() and torch.isinf(model[1].running_var).all()
    report = d.report
    assert report is not None and report.kind == "inf" and report.phase == "forward"
    assert report.op == "aten.native_batch_norm.default" and report.module == "model.1"
    assert report.code == "out = model(x)                   # the line the report must name"
    assert any(s.name.startswith("running_var") and s.posinf for s in report.outputs)


def test_buffers_are_not_checked_in_eval_mode_and_deliberate_inf_buffers_are_left_alone():
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mask", torch.tensor([0.0, float("-inf")]))

        def forward(self, x):
            return torch.softmax(x + self.mask, dim=-1)

    model = Masked()
    with nanguard.detect() as d:
        model(torch.ones(3, 2))
        model(torch.ones(3, 2))
    assert d.report is None
    bn = _huge_batch_norm_model().eval()
    with nanguard.detect() as d:
        bn(torch.randn(32, 4))                            # eval mode: running stats are read, not written
    assert d.report is None
