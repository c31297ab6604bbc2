"""GradGuard's bad-step path: the policy's decision, the rollback, the event, the error and
the post-mortem dump."""

from __future__ import annotations

from typing import Any

from nanguard.core.guard_records import NORM_SPIKE, RAISED, ROLLED_BACK, GuardEvent
from nanguard.errors import NonFiniteError
from nanguard.torch.guard import amp, checkpoint
from nanguard.torch.guard.amp import FRAMEWORK
from nanguard.torch.guard.policy import decide, raise_message
from nanguard.torch.guard.rollback import TrainingState
from nanguard.torch.guard.verdict import Verdict
from nanguard.torch.guard.window import Window


class Recovery:
    """What `GradGuard` does once a step, a window or a loss is bad.
    The attributes it reads are `GradGuard`'s (``guard.py``), which mixes it in."""

    def _decide(self, can_zero: bool = True, roll_back: bool = True) -> tuple[str, bool]:
        """`decide` for the next bad event. Under policy "rollback" the streak also counts the
        rollbacks to the current snapshot (the good steps between them were undone, so a run
        that keeps falling back to one snapshot reaches max_consecutive); where `roll_back`
        is False the event is skipped instead."""
        policy, floor = self.policy, 0
        if self._rollback is not None:
            if roll_back:
                floor = self._rollback.returns + 1
            else:
                policy = "skip"
        return decide(policy, self.records.bad(floor), self.max_consecutive, can_zero=can_zero)

    def _rollback_fields(self, action: str) -> dict[str, Any]:
        """The rollback's part of an event: the applied steps it undoes, the new LR scale."""
        if action != ROLLED_BACK or self._rollback is None:
            return {}
        return {"steps_undone": self._rollback.undoes(self._current_table().key),
                "lr_scale": self._rollback.backed_off(self.records.lr_scale)}

    def _roll_back(self) -> None:
        """Restore the snapshot (the event, with its new LR scale, is already recorded)."""
        assert self._rollback is not None
        self._rollback.restore(self._current_table().key, self._training())
        self._schedule.settle()
        self._pending = None

    def _norm_spike(self, step: int, verdict: Verdict, spikes: list[bool], threshold: float | None,
                    window: Window, scaler_step: str) -> bool:
        """A finite step whose total gradient norm spiked (policy "rollback"): roll back."""
        action, limit = self._decide(can_zero=False)
        event = GuardEvent(step=step, kind=NORM_SPIKE, action=action,
                           ranks=tuple(i for i, f in enumerate(spikes) if f),
                           total_norm=verdict.total_value, threshold=threshold,
                           scale=verdict.scale, **self._rollback_fields(action))
        self.records.add(event)
        self._observe(step, verdict)
        self._dump(event, window.batches)
        if amp.active(self.scaler) and scaler_step != FRAMEWORK:
            amp.mark_stepped(self.scaler, self.optimizer)
        if action == RAISED:
            raise self._error(event, limit)
        self._roll_back()
        return False

    def _skip_window(self, window: Window, scaler_step: str) -> bool:
        """Close a window that fed a non-finite (or, policy "rollback", spiking) loss: the step
        is skipped, rolled back or raises."""
        if amp.active(self.scaler):
            # unscale what the good micro-batches left, so scaler.update() works as after any
            # step; the loss was checked before scaling, so the scale does not back off
            amp.found_inf(self.scaler, self.optimizer)
            amp.ensure_inf_check(self.scaler, self.optimizer)
            if scaler_step != FRAMEWORK:
                amp.mark_stepped(self.scaler, self.optimizer)
        self.records.steps += 1
        action, limit = self._decide(can_zero=False)
        event = self._window_event(self.records.steps, action, window)
        self.records.add(event)
        self._dump(event, [(i, b) for i, b in window.batches if i in window.bad])
        if action == RAISED:
            raise self._error(event, limit)
        if action == ROLLED_BACK:
            self._roll_back()
        return False

    def _window_event(self, step: int, action: str, window: Window) -> GuardEvent:
        return GuardEvent(step=step, kind=window.kind, action=action,
                          ranks=tuple(sorted(window.ranks)), loss=window.loss,
                          micro_batches=tuple(window.bad), window=window.size,
                          threshold=window.threshold, **self._rollback_fields(action))

    def _training(self) -> TrainingState:
        return TrainingState(self._table.params, self.optimizer, self._model,
                             self._schedule.restored, self.scaler)

    def _dump(self, event: GuardEvent, batches: list[tuple[int, Any]]) -> None:
        if self._dump_dir is None or not batches or self._dumps_left <= 0:
            return
        path = checkpoint.dump(self._dump_dir, event, batches, self._agreement.rank())
        if path is not None:
            self._dumps_left -= 1
            self.records.dumps.append(path)

    def _error(self, event: GuardEvent, limit: bool) -> NonFiniteError:
        message = raise_message(event, limit, self.policy, self.max_consecutive, self.records)
        return NonFiniteError(message, report=event)
