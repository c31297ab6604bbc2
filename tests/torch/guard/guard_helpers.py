"""Shared pieces for the guard tests: a small model, batches, optimizers, bitwise snapshots."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict

import torch

from tests.shared import assert_bitwise, snapshot  # noqa: F401  (re-exported)

nan = float("nan")
inf = float("inf")


def make_model(seed: int = 0, device: str = "cpu") -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(OrderedDict(
        embed=torch.nn.Linear(4, 8), act=torch.nn.Tanh(), head=torch.nn.Linear(8, 2))).to(device)


def batch(seed: int, n: int = 16, device: str = "cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g).to(device), torch.randn(n, 2, generator=g).to(device)


def loss_of(model: torch.nn.Module, seed: int) -> torch.Tensor:
    x, y = batch(seed, device=next(model.parameters()).device.type)
    return torch.nn.functional.mse_loss(model(x), y)


def backward(model: torch.nn.Module, seed: int, scale: float = 1.0) -> torch.Tensor:
    loss = loss_of(model, seed)
    (loss * scale).backward()
    return loss


# Every optimizer in torch.optim that takes dense gradients and no closure, in the variants
# (for-loop, foreach, fused) whose code paths differ.
OPTIMIZERS: Dict[str, Callable[[Any], torch.optim.Optimizer]] = {
    "SGD": lambda p: torch.optim.SGD(p, lr=0.1),
    "SGD-momentum-foreach": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, foreach=True),
    "SGD-fused": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, fused=True),
    "Adam": lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False),
    "Adam-foreach": lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True),
    "Adam-fused": lambda p: torch.optim.Adam(p, lr=1e-2, fused=True),
    "Adam-amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False),
    "AdamW-foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
    "AdamW-fused": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    "Adamax": lambda p: torch.optim.Adamax(p, lr=1e-2),
    "NAdam": lambda p: torch.optim.NAdam(p, lr=1e-2),
    "RAdam": lambda p: torch.optim.RAdam(p, lr=1e-2),
    "RMSprop": lambda p: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2),
    "Adadelta": lambda p: torch.optim.Adadelta(p),
    "ASGD": lambda p: torch.optim.ASGD(p, lr=1e-2),
    "Rprop": lambda p: torch.optim.Rprop(p, lr=1e-2),
}
if hasattr(torch.optim, "Adafactor"):
    OPTIMIZERS["Adafactor"] = lambda p: torch.optim.Adafactor(p, lr=1e-2)
CORE = ["SGD-momentum-foreach", "Adam", "Adam-foreach", "AdamW", "AdamW-foreach", "AdamW-fused"]


