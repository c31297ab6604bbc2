"""GradGuard's loss checks: ``guard.backward`` (one micro-batch of an accumulation window)
and ``guard.check_loss``, each one host sync agreed across ranks."""

from __future__ import annotations

from typing import Any, Callable

import torch

from nanguard.core.guard_records import LOSS, LOSS_SPIKE, RAISED, ROLLED_BACK, GuardEvent
from nanguard.torch.guard import amp
from nanguard.torch.guard.policy import decide
from nanguard.torch.guard.window import Window, check_loss_tensor, loss_flags, loss_rows, loss_value


class LossChecks:
    """The loss side of `GradGuard`: a NaN/Inf (or spiking) loss is kept out of the step.
    The attributes it reads are `GradGuard`'s (``guard.py``), which mixes it in."""

    def backward(self, loss: torch.Tensor, *, batch: Any | None = None, **kwargs: Any) -> bool:
        """``loss.backward()`` for a finite loss; a NaN/Inf loss is kept out of the step.

        Returns whether the backward pass ran. Each call adds a micro-batch to the window
        that the next :meth:`step` closes, so gradient accumulation needs nothing else: a
        non-finite loss makes that step skip the whole window (``accumulation=
        "skip_window"``, the default; the window's remaining micro-batches are then not
        backpropagated, their gradients would be thrown away) or leaves this micro-batch out
        (``"drop"``). Policy "raise" raises at once. With a ``scaler`` it runs
        ``scaler.scale(loss).backward()``. One host sync (agreed across ranks, so every rank
        skips the same backward passes); extra arguments go to ``loss.backward``.

        `batch` is kept until the step only when ``dump_dir`` is set, to be written out if
        the step turns out bad.

        Example:
            >>> for i, (x, y) in enumerate(batches):
            ...     guard.backward(criterion(model(x), y) / accum, batch=(x, y))
            ...     if (i + 1) % accum == 0:
            ...         guard.step()          # one optimizer step per window
            ...         optimizer.zero_grad()
        """
        loss = check_loss_tensor(loss, "backward")

        def run() -> None:
            (self.scaler.scale(loss) if amp.active(self.scaler) else loss).backward(**kwargs)

        return self._micro_batch(loss, batch, run)

    def _micro_batch(self, loss: torch.Tensor, batch: Any | None, run: Callable[[], Any]) -> bool:
        """The body of :meth:`backward`, with the backward pass itself as `run`."""
        if self.accumulation == "drop" and self._agreement.active():
            # under DDP's no_sync() the last micro-batch's backward is the one that
            # all-reduces; dropping it on every rank would leave each rank its own gradients
            raise ValueError(
                "nanguard.GradGuard(accumulation='drop') cannot be used under "
                "torch.distributed: a dropped micro-batch may be the one whose backward "
                "synchronises the gradients, and the replicas would drift apart; use "
                "accumulation='skip_window'")
        window = self._window
        window.size += 1
        position = window.size
        if self._dump_dir is not None and batch is not None and self._dumps_left:
            window.batches.append((position, batch))
        if window.bad and self.accumulation == "skip_window":
            return False
        if amp.active(self.scaler):
            # a window skipped before any loss was scaled still needs the scaler's scale
            amp.ensure_scale(self.scaler, loss)
        flags, spikes, limit = self._judge_loss(loss)
        if not any(flags) and not any(spikes):
            run()
            return True
        window.bad.append(position)
        if any(spikes):
            flags, window.kind, window.threshold = spikes, LOSS_SPIKE, limit
        window.ranks.update(i for i, f in enumerate(flags) if f)
        if flags[self._agreement.rank()] and window.loss is None:
            window.loss = loss_value(loss)
        if self.policy == "raise":
            self._window = Window()  # a caller that catches the error starts a fresh window
            action, limit = decide(self.policy, self.records.bad(), self.max_consecutive,
                                   can_zero=False)
            event = GuardEvent(step=self.records.steps + 1, kind=LOSS, action=action,
                               ranks=tuple(sorted(window.ranks)), loss=window.loss)
            self.records.add(event)
            self._dump(event, [(i, b) for i, b in window.batches if i == position])
            raise self._error(event, limit)
        return False

    def check_loss(self, loss: torch.Tensor, *, batch: Any | None = None) -> bool:
        """True when `loss` is finite; otherwise record the event and return False.

        Lets a loop skip the backward pass of a batch whose loss is already NaN/Inf. A
        non-finite loss counts toward ``max_consecutive`` (policy "raise" raises at once).
        Costs one host sync; under torch.distributed all ranks get the same answer, so they
        skip the batch together (a rank that skips ``backward()`` alone would stall DDP).
        With gradient accumulation use :meth:`backward` instead: ``continue`` after a bad
        last micro-batch would merge its window into the next one. `batch` is written to
        ``dump_dir`` (when set) if the loss is bad. Under policy "rollback" a bad (or, with
        ``spike=``, spiking) loss restores the last snapshot before False is returned.

        Example:
            >>> loss = criterion(model(x), y)
            >>> if not guard.check_loss(loss):
            ...     continue          # nothing to undo: no backward, no step
            >>> loss.backward(); guard.step()
        """
        loss = check_loss_tensor(loss, "check_loss")
        flags, spikes, threshold = self._judge_loss(loss)
        if not any(flags) and not any(spikes):
            return True
        kind = LOSS
        if any(spikes):
            flags, kind = spikes, LOSS_SPIKE
        value = loss_value(loss) if flags[self._agreement.rank()] else None
        action, limit = self._decide(can_zero=False)
        event = GuardEvent(step=self.records.steps + 1, kind=kind, action=action,
                           ranks=tuple(i for i, f in enumerate(flags) if f), loss=value,
                           threshold=threshold if kind == LOSS_SPIKE else None,
                           **self._rollback_fields(action))
        self.records.add(event)
        if batch is not None and self._dump_dir is not None:
            self._dump(event, [(1, batch)])
        if action == RAISED:
            raise self._error(event, limit)
        if action == ROLLED_BACK:
            self._roll_back()
        return False

    def _judge_loss(self, loss: torch.Tensor) -> tuple[list[float], list[bool], float | None]:
        """(every rank's non-finite flag, every rank's spike flag, the spike limit) for a
        loss; one host sync, agreed across ranks. Spikes are judged when every loss is finite."""
        if self._loss_spikes is None:
            flags = loss_flags(loss, self._agreement)
            spikes: list[bool] = [False] * len(flags)
            limit = None
        else:
            flags, values = loss_rows(loss, self._agreement)
            spikes, limit = ([False] * len(flags), None) if any(flags) else \
                self._loss_spikes.judge(values)
        self.records.world = len(flags)
        return flags, spikes, limit
