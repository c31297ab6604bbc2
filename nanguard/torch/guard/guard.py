"""GradGuard: the training step that survives a non-finite gradient and says where it was.

One step of the guard:

1. `verdict.inspect`: the fused finiteness check (`check.py`) and, under torch.distributed,
   the agreement of all ranks (`distributed.py`), with one host read;
2. a finite step calls ``optimizer.step()``; a bad one goes to the slow path, which counts
   the non-finite elements per parameter, applies the policy (`policy.py`) and records the
   event (`records.py`).

This module is the class that ties them together, and its public API.
"""

from __future__ import annotations

from typing import Any

import torch

from nanguard.core.guard_records import LOSS, RAISED, ZEROED, GuardEvent, GuardRecords
from nanguard.errors import NonFiniteError
from nanguard.torch.guard import amp, clip
from nanguard.torch.guard.check import zero_nonfinite_
from nanguard.torch.guard.distributed import Agreement
from nanguard.torch.guard.monitor import (
    TOTAL,
    GradNormMonitor,
    GrowthAlert,
    NormHistory,
)
from nanguard.torch.guard.params import (
    NamedParams,
    ParamTable,
    build_table,
    check_optimizer,
    names_from,
    optimizer_key,
)
from nanguard.torch.guard.policy import (
    DEFAULT_MAX_CONSECUTIVE,
    check_max_consecutive,
    check_max_events,
    check_monitor,
    check_policy,
    decide,
    gradient_event,
    raise_message,
)
from nanguard.torch.guard.verdict import Verdict, inspect, stamp


class GradGuard:
    """Guards ``optimizer.step()`` against NaN/Inf gradients: skip, zero or raise, and record.

    ``loss.backward(); guard.step()`` replaces ``loss.backward(); optimizer.step()``. The step
    is checked with one fused pass over the gradients and at most one host sync; a finite
    step is applied as usual, a non-finite one is handled by ``policy``:

    - ``"skip"``: ``optimizer.step()`` is not called. Parameters *and* optimizer state
      (Adam's moments and step counter) stay bitwise as they were: the step never happened.
    - ``"zero"``: only the non-finite gradient elements are replaced by 0 (the finite ones keep
      their bits), then the optimizer steps. Like optax's ``zero_nans``. Note that a stateful
      optimizer still moves those elements by its momentum.
    - ``"raise"``: :class:`nanguard.NonFiniteError` naming the parameters, nothing updated.

    The ``max_consecutive``-th bad step in a row raises ``NonFiniteError`` with the summary
    instead of skipping forever (``None`` disables this). Every bad step is recorded: the step
    number, the parameters and how many of their elements were NaN/Inf; see :meth:`summary`.

    Args:
        optimizer: any ``torch.optim.Optimizer`` (SGD, Adam, AdamW, ..., foreach or fused).
            Closure-based optimizers (LBFGS) are not supported.
        policy: ``"skip"`` (default), ``"zero"`` or ``"raise"``.
        max_consecutive: bad steps in a row that make the guard raise (>= 1, or None).
            Non-finite losses seen by :meth:`check_loss` count too. Default 25.
        model: the model (or ``model.named_parameters()``) so reports say
            ``encoder.layers.3.linear1.weight`` instead of ``param_groups[0][12]``. It must own
            every parameter of the optimizer. DDP and ``torch.compile`` wrappers are unwrapped.
        scaler: a ``torch.amp.GradScaler``; then ``scaler.scale(loss).backward();
            guard.step(); scaler.update()``. The guard unscales once (unless you already called
            ``scaler.unscale_``), reuses the scaler's inf check, and the scaler still backs its
            scale off after a bad step. Pair it with "skip" or "zero": early AMP steps overflow
            by design while the scale calibrates, and "raise" would stop at the first one.
        monitor: ``True`` or a :class:`GradNormMonitor` to watch per-module gradient norms and
            warn before they explode (see :meth:`plot`). Default off.
        distributed: ``None`` (default) all-reduces the verdict whenever torch.distributed is
            initialised, so every rank skips or steps together; ``False`` keeps it local.
        process_group: the group to agree over (default: the world).
        max_events: how many individual bad events to keep (counters cover the whole run).

    Example:
        >>> model = torch.nn.Linear(3, 1)
        >>> opt = torch.optim.AdamW(model.parameters())
        >>> guard = nanguard.GradGuard(opt, model=model)
        >>> model(torch.tensor([[1.0, float("nan"), 0.0]])).sum().backward()
        >>> guard.step()          # the NaN gradient is not applied
        False
        >>> guard.records.skipped, guard.records.bad_steps
        (1, [1])
        >>> print(guard.summary())  # doctest: +SKIP
    """

    def __init__(self, optimizer: torch.optim.Optimizer, policy: str = "skip",
                 max_consecutive: int | None = DEFAULT_MAX_CONSECUTIVE,
                 model: NamedParams | None = None, *, scaler: Any | None = None,
                 monitor: bool | GradNormMonitor = False,
                 distributed: bool | None = None, process_group: Any | None = None,
                 max_events: int = 1000) -> None:
        self.optimizer = check_optimizer(optimizer, "GradGuard")
        self.policy = check_policy(policy)
        self.max_consecutive = check_max_consecutive(max_consecutive)
        max_events = check_max_events(max_events)
        self.scaler = amp.check_scaler(scaler)
        self.monitor: GradNormMonitor | None = check_monitor(monitor)
        self._agreement = Agreement(distributed, process_group)
        self._names = names_from(model, "GradGuard")
        self._table = self._build_table()  # validates that the model owns the parameters now
        self.records = GuardRecords(policy, max_consecutive, max_events=max_events,
                                    n_params=len(self._table))
        self._history = NormHistory([TOTAL], 2048)  # the total norm, when not monitoring
        self._pending: Verdict | None = None

    # -- public API ----------------------------------------------------------------------
    def step(self, *args: Any, **kwargs: Any) -> bool:
        """Check the gradients, then step, skip, zero or raise. Returns whether the step was
        applied (True for a finite step and for a zeroed one).

        Extra arguments go to ``optimizer.step``. Call it after the last backward of the step
        (with gradient accumulation: after the last micro-batch). The gradients are left in
        place after a skip, for inspection; ``optimizer.zero_grad()`` clears them as usual.

        Example:
            >>> loss.backward()
            >>> if not guard.step():
            ...     print("skipped step", guard.records.steps)
        """
        if "closure" in kwargs or any(callable(a) for a in args):
            raise TypeError(
                "nanguard.GradGuard.step(): closures are not supported; compute the loss and call "
                "loss.backward() before guard.step() (optimizers that require a closure, such "
                "as LBFGS, cannot be guarded)"
            )
        verdict = self._pending
        self._pending = None
        if verdict is None or verdict.stamp is None or verdict.stamp != stamp(self._table):
            verdict = self._inspect()
        self.records.steps += 1
        n = self.records.steps
        if not verdict.bad:
            self._apply(args, kwargs)
            self.records.applied += 1
            self.records.consecutive = 0
            self._observe(n, verdict)
            return True

        action, limit = decide(self.policy, self.records.bad(), self.max_consecutive)
        if action == ZEROED and not verdict.zeroed and verdict.diagnosis is not None:
            zero_nonfinite_(verdict.grads, verdict.diagnosis)
        event = gradient_event(n, action, verdict, self._table)
        self.records.add(event)
        self._observe(n, verdict)
        if self.scaler is not None and amp.active(self.scaler) and verdict.diagnosis is None:
            amp.share_found_inf(self.scaler, self.optimizer)  # another rank overflowed
        if action == ZEROED:
            self._apply(args, kwargs)
            return True
        if self.scaler is not None and amp.active(self.scaler):
            amp.mark_stepped(self.scaler, self.optimizer)  # the scaler backs off in update()
        if action == RAISED:
            raise self._error(event, limit)
        return False

    def check_loss(self, loss: torch.Tensor) -> bool:
        """True when `loss` is finite; otherwise record the event and return False.

        Lets a loop skip the backward pass of a batch whose loss is already NaN/Inf. A
        non-finite loss counts toward ``max_consecutive`` (policy "raise" raises at once).
        Costs one host sync; under torch.distributed all ranks get the same answer, so they
        skip the batch together (a rank that skips ``backward()`` alone would stall DDP).

        Example:
            >>> loss = criterion(model(x), y)
            >>> if not guard.check_loss(loss):
            ...     continue          # nothing to undo: no backward, no step
            >>> loss.backward(); guard.step()
        """
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"nanguard.GradGuard.check_loss: `loss` must be a torch.Tensor, "
                            f"got {type(loss).__name__}")
        with torch.no_grad():
            local = ~torch.isfinite(loss.detach()).all()
            flags = self._agreement.flags(local).tolist()
        if not any(flags):
            return True
        value = None
        if flags[self._agreement.rank()] and loss.numel() == 1:
            value = float(loss.detach().float().reshape(()))
        action, limit = decide(self.policy, self.records.bad(), self.max_consecutive, can_zero=False)
        event = GuardEvent(step=self.records.steps + 1, kind=LOSS, action=action,
                           ranks=tuple(i for i, f in enumerate(flags) if f), loss=value)
        self.records.add(event)
        if action == RAISED:
            raise self._error(event, limit)
        return False

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_`` that cannot poison the gradients.

        With a finite total norm it does exactly what torch's does (same coefficient, same
        bits). With a non-finite one torch multiplies *every* gradient by NaN (the default
        ``error_if_nonfinite=False``); here the policy decides instead: "skip" and "raise" leave
        the gradients untouched and the next :meth:`step` skips or raises; "zero" zeroes the
        non-finite elements and clips the rest by their own (finite) norm.

        The check done here is the step's check: :meth:`step` reuses it, so clipping adds no
        second pass. With a scaler the gradients are unscaled first. Call it after the last
        backward of the step, right before :meth:`step`.

        Returns the total norm of the gradients before clipping (after zeroing, for "zero");
        non-finite when the step will be skipped.

        Example:
            >>> loss.backward()
            >>> guard.clip_grad_norm_(1.0)
            >>> guard.step()
        """
        max_norm, norm_type = clip.check_args(max_norm, norm_type)
        verdict = self._inspect(ord=norm_type, need_norms=True)
        total, verdict.zeroed = clip.clip_(verdict.grads, verdict.total, verdict.bad,
                                           verdict.diagnosis, self.policy == "zero",
                                           max_norm, norm_type)
        verdict.stamp = stamp(self._table)
        self._pending = verdict  # step() reuses this check unless the gradients change
        return total

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

    def state_dict(self) -> dict[str, Any]:
        """The counters, for a checkpoint (so a resumed run keeps its bad-step streak)."""
        keys = ("steps", "applied", "skipped", "zeroed", "raised", "nonfinite_losses",
                "consecutive", "longest_run")
        return {k: getattr(self.records, k) for k in keys}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            if not hasattr(self.records, k) or not isinstance(v, int):
                raise ValueError(f"nanguard.GradGuard.load_state_dict: unexpected entry {k!r}")
            setattr(self.records, k, v)

    def __repr__(self) -> str:
        r = self.records
        return (f"GradGuard(policy={self.policy!r}, max_consecutive={self.max_consecutive}, "
                f"steps={r.steps}, applied={r.applied}, skipped={r.skipped}, zeroed={r.zeroed})")

    # -- internals -----------------------------------------------------------------------
    def _build_table(self) -> ParamTable:
        depth = self.monitor.depth if self.monitor is not None else None
        table = build_table(self.optimizer, self._names, depth, "GradGuard")
        if self.monitor is not None:
            self.monitor.bind(table)
        return table

    def _current_table(self) -> ParamTable:
        # an optimizer can gain param groups (add_param_group) between steps
        if optimizer_key(self.optimizer) != self._table.key:
            self._table = self._build_table()
            self.records.n_params = len(self._table)
        return self._table

    def _inspect(self, ord: float = 2.0, need_norms: bool = False) -> Verdict:
        return inspect(self._current_table(), self.optimizer, self.scaler, self.monitor,
                       self._agreement, ord=ord, need_norms=need_norms)

    def _apply(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.optimizer.step(*args, **kwargs)
        if self.scaler is not None and amp.active(self.scaler):
            amp.mark_stepped(self.scaler, self.optimizer)

    def _error(self, event: GuardEvent, limit: bool) -> NonFiniteError:
        message = raise_message(event, limit, self.policy, self.max_consecutive, self.records)
        return NonFiniteError(message, report=event)

    def _observe(self, step: int, verdict: Verdict) -> None:
        if self.monitor is not None and verdict.module_norms is not None:
            alert = self.monitor.observe(step, verdict.module_norms, verdict.total_value, verdict.bad)
            if alert is not None:
                self.records.growth_warnings.append(alert)
                del self.records.growth_warnings[:-1000]
        else:
            self._history.add(step, [verdict.total_value], verdict.bad)
