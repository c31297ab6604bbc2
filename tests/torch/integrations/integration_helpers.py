"""Shared pieces for the framework-integration tests: a model whose gradient (not loss) goes
NaN on a zero input row, batches, and bitwise snapshots."""

from __future__ import annotations

import torch

from tests.shared import SqrtNet, assert_bitwise, snapshot  # noqa: F401  (re-exported)

nan = float("nan")


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
