"""Gradient accumulation: the micro-batches backpropagated between two optimizer steps.

A step of the guard is an optimizer step, never a micro-batch. ``guard.backward(loss)``
checks each micro-batch's loss before its backward pass; the window it opens closes at the
next ``guard.step()``, which then knows which micro-batches were non-finite and acts on the
whole window at once (one event, one step number, one count toward ``max_consecutive``):

- ``accumulation="skip_window"`` (default): the step is skipped, as if every micro-batch of
  the window had been bad. The rest of the window is not backpropagated: its gradients
  would be thrown away.
- ``accumulation="drop"``: the bad micro-batch contributes nothing and the step is applied
  with the others (a window whose every micro-batch was bad is skipped: nothing to apply).
  The gradients are the sum over the kept micro-batches: with a loss divided by the window
  size they are ``kept / size`` of a full window's mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from nanguard.core.guard_records import LOSS
from nanguard.torch.guard.distributed import Agreement


@dataclass
class Window:
    """The micro-batches seen by ``guard.backward`` since the last ``guard.step()``."""

    size: int = 0  # guard.backward calls
    bad: list[int] = field(default_factory=list)  # 1-based positions of non-finite losses
    ranks: set[int] = field(default_factory=set)  # ranks whose loss was non-finite
    loss: float | None = None  # the first non-finite (or spiking) loss value seen on this rank
    batches: list[Any] = field(default_factory=list)  # (position, batch) kept for a dump
    kind: str = LOSS  # what the bad micro-batches were: non-finite, or a spike (policy rollback)
    threshold: float | None = None  # the limit a spiking loss crossed

    @property
    def all_bad(self) -> bool:
        return bool(self.bad) and len(self.bad) == self.size


def check_loss_tensor(loss: object, where: str) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"nanguard.GradGuard.{where}: `loss` must be a torch.Tensor, "
                        f"got {type(loss).__name__}")
    return loss


@torch.no_grad()
def loss_flags(loss: torch.Tensor, agreement: Agreement) -> list[float]:
    """One flag per rank (1.0: that rank's loss holds a NaN/Inf); one host sync."""
    local = ~torch.isfinite(loss.detach()).all()
    return agreement.flags(local).tolist()


@torch.no_grad()
def loss_rows(loss: torch.Tensor, agreement: Agreement) -> tuple[list[float], list[float]]:
    """(flags, values), one of each per rank: whether its loss holds a NaN/Inf, and its value
    (NaN unless the loss is a single number), for a spike test; one host sync."""
    detached = loss.detach()
    flag = (~torch.isfinite(detached).all()).to(torch.float32).reshape(1)
    value = (detached.to(torch.float32).reshape(1) if detached.numel() == 1
             else torch.full((1,), float("nan"), device=detached.device))
    rows = agreement.rows(torch.cat([flag, value])).tolist()
    return [r[0] for r in rows], [r[1] for r in rows]


def loss_value(loss: torch.Tensor) -> float | None:
    """The loss as a float for the record, when it is a single number."""
    if loss.numel() != 1:
        return None
    return float(loss.detach().float().reshape(()))
