"""GradGuard and checkpoints: whether the state is safe to save, and the guard's own state
(``state_dict``) for a resumed run."""

from __future__ import annotations

import warnings
from typing import Any

from nanguard.core.guard_spike import SpikeWatch
from nanguard.torch.guard import checkpoint


class CheckpointState:
    """The checkpoint side of `GradGuard`.
    The attributes it reads are `GradGuard`'s (``guard.py``), which mixes it in."""

    def safe_to_save(self) -> bool:
        """Whether a checkpoint written now holds only finite numbers, on every rank.

        Checks the parameters, the model's floating buffers (BatchNorm running statistics:
        a NaN forward pass in training mode poisons them even when the step is skipped) and
        the optimizer state. Every rank gets the same answer, so rank 0 does not save while
        another rank holds NaN. When it is False a warning names the first tensors; see
        :meth:`nonfinite_state` for all of them. One pass over the state, one host sync.

        Example:
            >>> if guard.safe_to_save():
            ...     torch.save(model.state_dict(), "last_good.pt")
        """
        names, anywhere = self._state_check()
        if anywhere:
            where = ", ".join(names[:5]) + (f", … {len(names) - 5} more" if len(names) > 5 else "")
            warnings.warn(
                f"nanguard.GradGuard.safe_to_save(): not saving is safer: non-finite values in "
                f"{where or 'the state of another rank'}", RuntimeWarning, stacklevel=2)
        return not anywhere

    def nonfinite_state(self) -> list[str]:
        """Names of this rank's parameters, buffers and optimizer-state tensors that hold a
        NaN or Inf (empty when the state is finite). One host sync."""
        return self._state_check()[0]

    def state_dict(self) -> dict[str, Any]:
        """What the guard counted, for a checkpoint: the counters (so a resumed run keeps its
        bad-step streak), the kept events (which steps were bad, and why), the
        per-parameter totals, the learning-rate scale of rollbacks and the recent values of
        the spike test. Plain data: ``torch.save`` and JSON both hold it. Not the rollback
        snapshot: a resumed run takes its first one at its first step."""
        state = self.records.state_dict()
        history = {name: watch.state_dict() for name, watch in self._spike_watches().items()}
        if history:
            state["spike_history"] = history
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` wrote; the schedulers' positions are read again at
        the next step, as after building the guard (a resume loads them too). A rollback
        snapshot taken before is dropped: the model and optimizer were most likely loaded
        too, and the next step takes a new one."""
        owner = "nanguard.GradGuard.load_state_dict"
        state = dict(state)
        history = state.pop("spike_history", {})
        self.records.load_state_dict(state, owner)
        watches = self._spike_watches()
        for name, values in history.items():
            if name in watches:  # a quantity this guard does not watch has nothing to resume
                watches[name].load_state_dict(values, owner)
        if self._rollback is not None:
            self._rollback.forget()
        self._schedule.reread()

    def _state_check(self) -> tuple[list[str], bool]:
        table = self._current_table()
        tensors = checkpoint.state_tensors(zip(table.names, table.params), self.optimizer,
                                           self._model)
        return checkpoint.nonfinite_names(tensors, self._agreement)

    def _spike_watches(self) -> dict[str, SpikeWatch]:
        return {name: watch for name, watch in (("loss", self._loss_spikes),
                                                ("grad_norm", self._norm_spikes))
                if watch is not None}
