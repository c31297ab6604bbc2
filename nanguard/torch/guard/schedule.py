"""Learning-rate schedules on a skipped step: held, not advanced.

A skipped step never happened, so the schedule must not move either: optax (the schedule's
count lives in the skipped inner state), DeepSpeed, Megatron and the HF Trainer (it steps
the scheduler only ``if not accelerator.optimizer_step_was_skipped``) all hold it. With
``GradGuard(optimizer, scheduler=sched)`` the guard calls ``sched.step()`` after every
applied step (zeroed ones included) and never after a skipped or raised one; the loop no
longer calls it. A loop that keeps its own ``sched.step()`` as well would advance the
schedule twice per step: the guard notices the scheduler moved behind its back and stops
with an error instead.

The position is read at the guard's first step, not when the guard is built: a run that
resumes builds the scheduler and the guard, then loads the scheduler's state (or builds it
with ``last_epoch=``), and that move is not a second stepper. A loop that also steps the
scheduler itself is caught one step later, at the guard's second step.

Only per-step schedulers belong here. ``ReduceLROnPlateau`` steps on a validation metric,
and epoch schedulers once per epoch: the loop keeps calling those itself.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau


def _position(scheduler: Any) -> Any:
    """Where a scheduler is in its schedule (ChainedScheduler keeps no count of its own)."""
    if hasattr(scheduler, "last_epoch"):
        return scheduler.last_epoch
    return tuple(_position(s) for s in getattr(scheduler, "_schedulers", ()))


def check_schedulers(scheduler: object, optimizer: torch.optim.Optimizer) -> tuple[Any, ...]:
    if scheduler is None:
        return ()
    schedulers = list(scheduler) if isinstance(scheduler, (list, tuple)) else [scheduler]
    for s in schedulers:
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(
                "nanguard.GradGuard: `scheduler` cannot be a ReduceLROnPlateau: it steps on a "
                "validation metric, not once per optimizer step; keep calling "
                "sched.step(metric) yourself")
        if not isinstance(s, LRScheduler):
            raise TypeError(
                f"nanguard.GradGuard: `scheduler` must be a torch.optim.lr_scheduler."
                f"LRScheduler stepped once per optimizer step (or a list of them), got "
                f"{type(s).__name__}")
        if getattr(s, "optimizer", optimizer) is not optimizer:
            raise ValueError(
                f"nanguard.GradGuard: the {type(s).__name__} passed as `scheduler` schedules "
                f"another optimizer than the guarded one")
    return tuple(schedulers)


class ScheduleHold:
    """Steps the schedulers after applied steps only, and notices a second stepper."""

    def __init__(self, schedulers: Sequence[Any]) -> None:
        self.schedulers = tuple(schedulers)
        self.followed: tuple[Any, ...] = ()  # stepped by a framework: see `follow`
        self._positions: list[Any] | None = None  # None: read at the next step (see above)

    def follow(self, schedulers: Sequence[Any]) -> None:
        """Schedulers a framework steps (Lightning, the HF Trainer, accelerate's loop) and
        holds on a skipped step itself: never stepped here, but a rollback's snapshot holds
        their state too (``state_dict``/``load_state_dict``)."""
        self.followed = tuple(s for s in schedulers if s not in self.schedulers)

    @property
    def restored(self) -> tuple[Any, ...]:
        """Every scheduler whose state a rollback snapshot keeps."""
        return self.schedulers + self.followed

    def reread(self) -> None:
        """Take the schedulers' positions as they are at the next step (a resume loads them)."""
        self._positions = None

    def check_untouched(self) -> None:
        if self._positions is None:
            self._positions = [_position(s) for s in self.schedulers]
            return
        for s, seen in zip(self.schedulers, self._positions):
            if _position(s) != seen:
                raise RuntimeError(
                    f"nanguard.GradGuard.step(): the {type(s).__name__} passed as `scheduler=` "
                    f"was stepped outside the guard (at {seen!r}, now {_position(s)!r}). The "
                    f"guard steps it after every applied step and holds it on a skipped one; "
                    f"remove your own sched.step() call, or do not pass it to the guard")

    def advance(self) -> None:
        for s in self.schedulers:
            s.step()
        self.settle()

    def settle(self) -> None:
        """Take the schedulers' positions as they are now: the guard moved them itself (a
        step, or a rollback that restored their state)."""
        self._positions = [_position(s) for s in self.schedulers]
