"""``torch.finfo(dtype).min`` masks are deliberate extremes, like ``-inf`` masks (issue 14).

Eager float16 attention (a ``model.half()`` transformer) adds ``finfo(float16).min`` to scores
of a few tens: the sum rounds to ``-inf``, softmax turns it into 0 and outputs and gradients
are finite. That is what the mask is for, not an overflow. A real overflow, or a row that
rounds to ``-inf`` everywhere (its softmax is NaN), is still reported.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nanguard

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


class HalfAttention(nn.Module):
    """Eager causal attention as written in many models: the mask is the dtype's minimum."""

    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-1, -2) * self.scale
        n = x.shape[-2]
        hidden = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
        mask = torch.zeros(n, n, dtype=x.dtype).masked_fill(hidden, torch.finfo(x.dtype).min)
        return torch.softmax(scores + mask, dim=-1) @ self.v(x)


def _model_and_input():
    torch.manual_seed(0)
    return HalfAttention().half(), torch.randn(2, 6, 8).half()


@pytest.mark.parametrize("exhaustive", MODES)
def test_half_attention_with_finfo_min_mask_is_quiet(exhaustive):
    model, x = _model_and_input()
    with torch.no_grad():
        scores = model.q(x) @ model.k(x).transpose(-1, -2) * model.scale
        rounded = scores + torch.finfo(torch.float16).min
    assert torch.isinf(rounded).any(), "the case must round the mask to -inf"
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        out = model(x)
        out.float().sum().backward()
    assert d.report is None, d.report
    assert torch.isfinite(out).all() and all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("exhaustive", MODES)
def test_a_row_rounded_entirely_to_minus_inf_is_reported_at_softmax(exhaustive):
    scores = torch.full((2, 4), -30.0, dtype=torch.float16)     # every entry rounds to -inf
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        torch.softmax(scores + torch.finfo(torch.float16).min, dim=-1)
    assert d.report is not None and d.report.kind == "nan"
    assert d.report.op == "aten._softmax.default"


@pytest.mark.parametrize("exhaustive", MODES)
def test_real_float16_overflow_is_still_reported(exhaustive):
    model, x = _model_and_input()
    model.scale = 1e5                              # scores beyond 65504: an overflow, not a mask
    with nanguard.detect(mode="record", exhaustive=exhaustive) as d:
        model(x)
    assert d.report is not None and d.report.kind == "inf" and d.report.phase == "forward"
    assert d.report.op in ("aten.mul.Tensor", "aten.add.Tensor")


def test_casting_a_large_activation_to_half_is_still_an_overflow():
    big = torch.tensor([1.0, 1e5])
    with nanguard.detect(mode="record") as d:
        big.half()
    assert d.report is not None and d.report.kind == "inf"


def test_casting_the_float32_minimum_to_half_is_a_deliberate_extreme():
    mask = torch.tensor([0.0, torch.finfo(torch.float32).min])
    with nanguard.detect(mode="record") as d:
        half = mask.half()
        torch.softmax(torch.ones(2, dtype=torch.float16) + half, dim=0)
    assert d.report is None, d.report
