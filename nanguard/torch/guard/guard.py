"""GradGuard: the training step that survives a non-finite gradient and says where it was.

One step of the guard:

1. `verdict.inspect`: the fused finiteness check (`check.py`) and, under torch.distributed,
   the agreement of all ranks (`distributed.py`), with one host read;
2. a finite step calls ``optimizer.step()``; a bad one goes to the slow path, which counts
   the non-finite elements per parameter, applies the policy (`policy.py`) and records the
   event (`nanguard.core.guard_records`).

Around it: `window.py` (the micro-batches of an accumulation window, checked by
``guard.backward``), `schedule.py` (LR schedules held on a skip), `checkpoint.py`
(``safe_to_save`` and the post-mortem dumps), `rollback.py` (policy "rollback": the
snapshot and the way back to it, with the spike test of `nanguard.core.guard_spike`). The
framework integrations (`nanguard.torch.integrations`) drive the same class through
``_micro_batch`` and ``_step``.

This module is the class that ties them together, and its public API.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Sequence

import torch

from nanguard.core.guard_policy import ROLLBACK, check_accumulation, check_rollback
from nanguard.core.guard_records import (
    DROPPED,
    LOSS,
    LOSS_SPIKE,
    NORM_SPIKE,
    RAISED,
    ROLLED_BACK,
    ZEROED,
    GuardEvent,
    GuardRecords,
)
from nanguard.core.guard_spike import SpikeWatch
from nanguard.errors import NonFiniteError
from nanguard.torch.guard import amp, checkpoint, clip
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
    optimizer_params,
    unwrap_model,
)
from nanguard.torch.guard.policy import (
    DEFAULT_MAX_CONSECUTIVE,
    GUARD_POLICIES,
    check_max_consecutive,
    check_max_events,
    check_monitor,
    check_policy,
    decide,
    gradient_event,
    raise_message,
)
from nanguard.torch.guard.rollback import Rollback, TrainingState, scaled_lr
from nanguard.torch.guard.schedule import ScheduleHold, check_schedulers
from nanguard.torch.guard.sharded import fsdp1_layout
from nanguard.torch.guard.verdict import Verdict, inspect, stamp
from nanguard.torch.guard.window import (
    Window,
    check_loss_tensor,
    loss_flags,
    loss_rows,
    loss_value,
)

# Who marks the GradScaler "stepped" after the guard's decision (see GradGuard._step).
GUARD, ON_APPLY, FRAMEWORK = "guard", "on_apply", "framework"


class GradGuard:
    """Guards ``optimizer.step()`` against NaN/Inf gradients: skip, zero, roll back or raise,
    and record.

    ``guard.backward(loss); guard.step()`` replaces ``loss.backward(); optimizer.step()``
    (``loss.backward(); guard.step()`` works too; :meth:`backward` adds the loss check that
    keeps a NaN micro-batch out of an accumulation window). The step
    is checked with one fused pass over the gradients and at most one host sync; a finite
    step is applied as usual, a non-finite one is handled by ``policy``:

    - ``"skip"``: ``optimizer.step()`` is not called. Parameters *and* optimizer state
      (Adam's moments and step counter) stay bitwise as they were: the step never happened.
    - ``"zero"``: only the non-finite gradient elements are replaced by 0 (the finite ones keep
      their bits), then the optimizer steps. Like optax's ``zero_nans``. Note that a stateful
      optimizer still moves those elements by its momentum.
    - ``"raise"``: :class:`nanguard.NonFiniteError` naming the parameters, nothing updated.
    - ``"rollback"``: the last snapshot of the training state (parameters, buffers, optimizer
      state, the guard's schedulers, the scaler, the RNGs; kept on the CPU, taken every
      ``snapshot_every`` applied steps) is restored bitwise, also on a finite loss or
      gradient-norm spike (``spike=``); the bad step's batches are dumped (``dump_dir``) and
      the learning rate can be backed off (``lr_backoff``). See `rollback.py`.

    The ``max_consecutive``-th bad step in a row raises ``NonFiniteError`` with the summary
    instead of skipping forever (``None`` disables this). Every bad step is recorded: the step
    number, the parameters and how many of their elements were NaN/Inf; see :meth:`summary`.

    Args:
        optimizer: any ``torch.optim.Optimizer`` (SGD, Adam, AdamW, ..., foreach or fused).
            LBFGS is refused: its closure re-evaluates the gradients inside ``step()``.
        policy: ``"skip"`` (default), ``"zero"``, ``"raise"`` or ``"rollback"``.
        max_consecutive: bad steps in a row that make the guard raise (>= 1, or None).
            Non-finite losses seen by :meth:`check_loss` count too; under "rollback", so do
            earlier rollbacks to the same snapshot (the good steps between them were
            undone). Default 25.
        model: the model (or ``model.named_parameters()``) so reports say
            ``encoder.layers.3.linear1.weight`` instead of ``param_groups[0][12]``. It must own
            every parameter of the optimizer. DDP and ``torch.compile`` wrappers are unwrapped.
        scaler: a ``torch.amp.GradScaler``; then ``guard.backward(loss)`` (it scales) or
            ``scaler.scale(loss).backward()``, ``guard.step(); scaler.update()``. The guard unscales once (unless you already called
            ``scaler.unscale_``), reuses the scaler's inf check, and the scaler still backs its
            scale off after a bad step. Pair it with "skip" or "zero": early AMP steps overflow
            by design while the scale calibrates, and "raise" would stop at the first one.
        monitor: ``True`` or a :class:`GradNormMonitor` to watch per-module gradient norms and
            warn before they explode (see :meth:`plot`); ``GradNormMonitor(headroom=True)``
            also watches float16/bfloat16 activations and gradients approaching the dtype's
            maximum. Default off.
        distributed: ``None`` (default) all-reduces the verdict whenever torch.distributed is
            initialised, so every rank skips or steps together; ``False`` keeps it local
            (refused with sharded gradients: one rank's shard cannot decide for a tensor).
            Sharded gradients work under the default: FSDP2 (``fully_shard``, DTensor
            gradients) and FSDP1 (``FullyShardedDataParallel``, pass the root as ``model=``,
            FULL_SHARD, SHARD_GRAD_OP or NO_SHARD). Counts, names and :meth:`clip_grad_norm_`
            are then those of the full tensors, wrapper prefixes stripped. HYBRID_SHARD
            is refused.
        process_group: the group to agree over (default: the world).
        max_events: how many individual bad events to keep (counters cover the whole run).
        scheduler: a per-step ``LRScheduler`` (or a list): the guard steps it after every
            applied step and holds it on a skipped one, as optax, DeepSpeed and the HF Trainer
            do; the loop stops calling ``sched.step()`` itself. Default: the loop's business.
        accumulation: what a non-finite micro-batch loss seen by :meth:`backward` does to its
            accumulation window: ``"skip_window"`` (default) skips the optimizer step it
            feeds, ``"drop"`` leaves that micro-batch out and applies the others. Either way
            the window is one step, one event and one count toward ``max_consecutive``.
            Under torch.distributed only "skip_window" (every rank skips together).
        dump_dir: a folder to write each bad step's micro-batches to (those passed as
            ``guard.backward(loss, batch=...)``), with the step, rank and event, for a
            post-mortem; at most ``max_dumps`` files (default 10). Default: no dumps.
        snapshot_every: policy "rollback": applied steps between two snapshots (>= 1;
            default `DEFAULT_SNAPSHOT_EVERY`, 10: see the README for the choice). A rollback
            undoes at most this many steps.
        spike: policy "rollback": also roll back on a finite spike, e.g.
            ``dict(loss=5.0, grad_norm=10.0, window=50)``: a loss (seen by :meth:`backward`
            or :meth:`check_loss`) or a total gradient norm above that many times the median
            of its last `window` values (`nanguard.core.guard_spike`). Default: off.
        lr_backoff: policy "rollback": each rollback multiplies the learning rate of every
            param group by this factor in (0, 1] from then on (:attr:`lr_scale`). Default:
            off.

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
                 max_events: int = 1000, scheduler: Any | None = None,
                 accumulation: str = "skip_window", dump_dir: str | os.PathLike | None = None,
                 max_dumps: int = 10, snapshot_every: int | None = None,
                 spike: dict[str, Any] | None = None,
                 lr_backoff: float | None = None) -> None:
        self.optimizer = check_optimizer(optimizer, "GradGuard")
        self.policy = check_policy(policy, choices=GUARD_POLICIES)
        self.max_consecutive = check_max_consecutive(max_consecutive)
        max_events = check_max_events(max_events)
        self.scaler = amp.check_scaler(scaler)
        self.monitor: GradNormMonitor | None = check_monitor(monitor)
        self._agreement = Agreement(distributed, process_group)
        self.accumulation = check_accumulation(accumulation)
        self.snapshot_every, rule, backoff = check_rollback(self.policy, snapshot_every, spike,
                                                            lr_backoff, self.accumulation)
        self._rollback = Rollback(self.snapshot_every, backoff) if self.policy == ROLLBACK else None
        self._loss_spikes = (SpikeWatch(rule.loss, rule.window)
                             if rule is not None and rule.loss is not None else None)
        self._norm_spikes = (SpikeWatch(rule.grad_norm, rule.window)
                             if rule is not None and rule.grad_norm is not None else None)
        self._schedule = ScheduleHold(check_schedulers(scheduler, self.optimizer))
        self._dump_dir, self._dumps_left = checkpoint.check_dump_dir(dump_dir, max_dumps)
        self._names = names_from(model, "GradGuard")
        self._model = unwrap_model(model) if isinstance(model, torch.nn.Module) else None
        self._table = self._build_table()  # validates that the model owns the parameters now
        if self.monitor is not None:  # headroom (opt-in) hooks the model's modules
            self.monitor.watch(self._model, lambda: amp.active(self.scaler))
        self.records = GuardRecords(policy, max_consecutive, max_events=max_events,
                                    n_params=len(self._table))
        self._history = NormHistory([TOTAL], 2048)  # the total norm, when not monitoring
        self._pending: Verdict | None = None
        self._window = Window()

    # -- public API ----------------------------------------------------------------------
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

    def step(self, *args: Any, **kwargs: Any) -> bool:
        """Check the gradients, then step, skip, zero or raise. Returns whether the step was
        applied (True for a finite step and for a zeroed one).

        Extra arguments go to ``optimizer.step``. Call it after the last backward of the step
        (with gradient accumulation: after the last micro-batch); it closes the window of
        :meth:`backward` calls. The gradients are left in place after a skip, for
        inspection; ``optimizer.zero_grad()`` clears them as usual. A ``scheduler`` given to
        the guard is stepped after an applied step only.

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
        return self._step(lambda: self.optimizer.step(*args, **kwargs), scaler_step=GUARD)

    def _step(self, update: Callable[[], Any], scaler_step: str) -> bool:
        """The body of :meth:`step`, with the optimizer update as `update`.

        `scaler_step` says who moves the GradScaler's stage to "stepped" (what ``scaler.step``
        does, and ``update()`` requires): ``GUARD`` (a hand-written loop: the guard, on every
        path), ``ON_APPLY`` (accelerate: `update` calls ``scaler.step``; on a skip the guard
        marks it) or ``FRAMEWORK`` (Lightning calls ``scaler.step`` after the decision,
        whatever it was).
        """
        self._schedule.check_untouched()
        window, self._window = self._window, Window()
        if window.bad and (self.accumulation == "skip_window" or window.all_bad):
            self._pending = None
            return self._skip_window(window, scaler_step)
        verdict = self._pending
        self._pending = None
        if verdict is None or verdict.stamp is None or verdict.stamp != stamp(self._table):
            verdict = self._inspect()
        self.records.steps += 1
        n = self.records.steps
        if window.bad:  # accumulation "drop": the others go on to the check below
            self.records.add(self._window_event(n, DROPPED, window))
        spikes, spike_limit = self._judge_norm(verdict)
        if not verdict.bad and not any(spikes):
            self._apply(update, scaler_step)
            self.records.applied += 1
            self.records.consecutive = 0
            self._observe(n, verdict)
            return True
        if not verdict.bad:
            return self._norm_spike(n, verdict, spikes, spike_limit, window, scaler_step)

        # under an active GradScaler an overflow is the scaler's to handle (the step is
        # skipped and the scale backs off), also under policy "rollback"
        action, limit = self._decide(roll_back=not amp.active(self.scaler))
        if action == ZEROED and not verdict.zeroed and verdict.diagnosis is not None:
            zero_nonfinite_(verdict.grads, verdict.diagnosis)
        event = gradient_event(n, action, verdict, self._table, **self._rollback_fields(action))
        self.records.add(event)
        self._observe(n, verdict)
        if checkpoint.worth_dumping(event, amp.active(self.scaler)):
            self._dump(event, window.batches)
        if self.scaler is not None and amp.active(self.scaler) and verdict.diagnosis is None:
            amp.share_found_inf(self.scaler, self.optimizer)  # another rank overflowed
        if action == ZEROED:
            self._apply(update, scaler_step)
            return True
        if amp.active(self.scaler) and scaler_step != FRAMEWORK:
            amp.mark_stepped(self.scaler, self.optimizer)  # the scaler backs off in update()
        if action == RAISED:
            raise self._error(event, limit)
        if action == ROLLED_BACK:
            self._roll_back()
        return False

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

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_`` that cannot poison the gradients.

        With a finite total norm it does exactly what
        ``torch.nn.utils.clip_grad_norm_(model.parameters(), ...)`` does (same total, same
        coefficient, same bits), whatever order the optimizer's param groups list the
        parameters in (the norms are added up in the model's order, as torch adds them).
        With a non-finite one torch multiplies *every* gradient by NaN (the default
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
        return self._clip(max_norm, norm_type, None)

    def _clip(self, max_norm: float, norm_type: float,
              params: Sequence[torch.Tensor] | None) -> torch.Tensor:
        """The body of :meth:`clip_grad_norm_`; `params`: the parameters as the caller listed
        them for ``clip_grad_norm_(params, ...)``, whose order the total norm's sum follows
        (None: the model's order, else the optimizer's)."""
        max_norm, norm_type = clip.check_args(max_norm, norm_type)
        verdict = self._inspect(ord=norm_type, need_norms=True)
        table = self._table
        if params is None:
            order: Sequence[int] = table.model_order
        else:
            position = {id(p): i for i, p in enumerate(table.params)}
            order = [position[id(p)] for p in params if id(p) in position]
        assert verdict.norms is not None  # need_norms
        total, verdict.zeroed = clip.clip_(verdict.grads, verdict.norms, order, verdict.bad,
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

    # -- internals -----------------------------------------------------------------------
    def _build_table(self) -> ParamTable:
        depth = self.monitor.depth if self.monitor is not None else None
        flat = fsdp1_layout(self._model, optimizer_params(self.optimizer), self._agreement,
                            "GradGuard")
        table = build_table(self.optimizer, self._names, depth, "GradGuard", flat)
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
                       self._agreement, ord=ord, need_norms=need_norms,
                       all_totals=self._norm_spikes is not None)

    def _apply(self, update: Callable[[], Any], scaler_step: str) -> None:
        if self._rollback is None:
            update()
        else:
            key = self._table.key
            if self._rollback.due(key):  # before the update: see rollback.py
                self._rollback.take(key, self._training())
            with scaled_lr(self.optimizer, self.records.lr_scale):
                update()
            self._rollback.applied()
        if amp.active(self.scaler) and scaler_step == GUARD:
            amp.mark_stepped(self.scaler, self.optimizer)
        self._schedule.advance()

    def _window_event(self, step: int, action: str, window: Window) -> GuardEvent:
        return GuardEvent(step=step, kind=window.kind, action=action,
                          ranks=tuple(sorted(window.ranks)), loss=window.loss,
                          micro_batches=tuple(window.bad), window=window.size,
                          threshold=window.threshold, **self._rollback_fields(action))

    def _training(self) -> TrainingState:
        return TrainingState(self._table.params, self.optimizer, self._model,
                             self._schedule.restored, self.scaler)

    def _spike_watches(self) -> dict[str, SpikeWatch]:
        return {name: watch for name, watch in (("loss", self._loss_spikes),
                                                ("grad_norm", self._norm_spikes))
                if watch is not None}

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

    def _judge_norm(self, verdict: Verdict) -> tuple[list[bool], float | None]:
        """Which ranks' total gradient norm spiked, and the limit (a finite step only)."""
        if self._norm_spikes is None or verdict.bad:
            return [], None
        return self._norm_spikes.judge(verdict.totals)

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

    def _state_check(self) -> tuple[list[str], bool]:
        table = self._current_table()
        tensors = checkpoint.state_tensors(zip(table.names, table.params), self.optimizer,
                                           self._model)
        return checkpoint.nonfinite_names(tensors, self._agreement)

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

    def _observe(self, step: int, verdict: Verdict) -> None:
        if self.monitor is not None and verdict.module_norms is not None:
            alert = self.monitor.observe(step, verdict.module_norms, verdict.total_value, verdict.bad)
            if alert is not None:
                self.records.growth_warnings.append(alert)
                del self.records.growth_warnings[:-1000]
        else:
            self._history.add(step, [verdict.total_value], verdict.bad)
