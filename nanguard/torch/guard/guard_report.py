"""GradGuard's reporting: the summary, the growth alerts, the gradient-norm plot and the
norm history they are drawn from."""

from __future__ import annotations

from typing import Any

from nanguard.torch.guard.monitor import GrowthAlert
from nanguard.torch.guard.verdict import Verdict


class Reporting:
    """What `GradGuard` tells the user about the run.
    The attributes it reads are `GradGuard`'s (``guard.py``), which mixes it in."""

    def summary(self) -> str:
        """A readable table: steps applied/skipped/zeroed, bad step numbers, and per parameter
        how many NaN/Inf elements it had, in how many steps, first and last.

        Example:
            >>> print(guard.summary())
            nanguard GradGuard (policy 'skip'): 60 steps, 59 applied, 1 skipped, 0 zeroed
              non-finite gradients at step 23
            ...
        """
        return self.records.summary()

    @property
    def alerts(self) -> list[GrowthAlert]:
        """The gradient-growth early warnings given so far (empty without a monitor)."""
        return self.monitor.alerts if self.monitor is not None else []

    def plot(self, path: str | None = None, top: int = 8) -> Any:
        """Draw the gradient-norm history (log scale): the `top` modules with the largest
        norms and the total, skipped steps marked in red, growth warnings in orange.

        Saves to `path` when given and returns the matplotlib Figure. Needs the optional
        extra: ``pip install nanguard[plot]``. Without a monitor only the total is drawn.

        Example:
            >>> guard.plot("gradnorms.png")
        """
        from nanguard.torch.guard.plot import plot_history

        history = self.monitor.history if self.monitor is not None else self._history
        return plot_history(history, self.alerts, path=path, top=top,
                            bad_steps=self.records.bad_steps)

    @property
    def lr_scale(self) -> float:
        """What the rollbacks' ``lr_backoff`` multiplies each param group's learning rate by
        at every update (1.0 before any backoff). ``param_groups`` keep the schedule's own
        values: the scale is applied at the update (see `rollback.scaled_lr`)."""
        return self.records.lr_scale

    def __repr__(self) -> str:
        r = self.records
        return (f"GradGuard(policy={self.policy!r}, max_consecutive={self.max_consecutive}, "
                f"steps={r.steps}, applied={r.applied}, skipped={r.skipped}, zeroed={r.zeroed})")

    def _observe(self, step: int, verdict: Verdict) -> None:
        if self.monitor is not None and verdict.module_norms is not None:
            alert = self.monitor.observe(step, verdict.module_norms, verdict.total_value, verdict.bad)
            if alert is not None:
                self.records.growth_warnings.append(alert)
                del self.records.growth_warnings[:-1000]
        else:
            self._history.add(step, [verdict.total_value], verdict.bad)
