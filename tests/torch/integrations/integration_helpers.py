"""Shared pieces for the framework-integration tests: a model whose gradient (not loss) goes
NaN on a zero input row, batches, and bitwise snapshots."""

from __future__ import annotations

import copy
from typing import Any, Dict

import torch

nan = float("nan")


class SqrtNet(torch.nn.Module):
    """`sqrt(|h|^2)`, the seed's distance-matrix story: a zero input row gives a finite loss
    and a NaN gradient in `embed.weight` only (d sqrt/du = inf at 0, times 2h = 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(4, 8, bias=False)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.head(torch.tanh(h)) + 0.1 * torch.sqrt((h * h).sum(-1, keepdim=True))


def make_net(seed: int = 0) -> SqrtNet:
    torch.manual_seed(seed)
    return SqrtNet()


def data(seed: int, zero_row: bool = False, nan_input: bool = False, n: int = 8):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g)
    if zero_row:
        x[0] = 0.0  # NaN gradient, finite loss
    if nan_input:
        x[1, 2] = nan  # NaN loss
    return x, y


def snapshot(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    return {"params": [p.detach().clone() for p in model.parameters()],
            "state": copy.deepcopy(optimizer.state_dict())}


def assert_bitwise(a: Any, b: Any, path: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, path
        if a.is_floating_point():
            width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
            assert torch.equal(a.view(width), b.view(width)), f"{path} differs"
        else:
            assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_bitwise(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_bitwise(x, y, f"{path}[{i}]")
    else:
        assert a == b or (a != a and b != b), f"{path}: {a!r} != {b!r}"
