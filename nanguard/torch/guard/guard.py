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

This module is the class that ties them together: its arguments and the step. Its other
methods come from four mixins, one concept each: `guard_loss` (``backward`` and
``check_loss``), `guard_recovery` (the bad-step path: decision, rollback, event, error,
dump), `guard_state` (``safe_to_save`` and the guard's ``state_dict``) and `guard_report`
(``summary``, ``alerts``, ``plot``).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch

from nanguard.core.guard_policy import ROLLBACK, check_accumulation, check_rollback
from nanguard.core.guard_records import DROPPED, RAISED, ROLLED_BACK, ZEROED, GuardRecords
from nanguard.core.guard_spike import SpikeWatch
from nanguard.torch.guard import amp, checkpoint, clip
# who marks the GradScaler "stepped" (see GradGuard._step); the integrations import them from here
from nanguard.torch.guard.amp import FRAMEWORK, GUARD, ON_APPLY  # noqa: F401
from nanguard.torch.guard.check import zero_nonfinite_
from nanguard.torch.guard.distributed import Agreement
from nanguard.torch.guard.guard_loss import LossChecks
from nanguard.torch.guard.guard_recovery import Recovery
from nanguard.torch.guard.guard_report import Reporting
from nanguard.torch.guard.guard_state import CheckpointState
from nanguard.torch.guard.monitor import TOTAL, GradNormMonitor, NormHistory
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
    gradient_event,
)
from nanguard.torch.guard.rollback import Rollback, scaled_lr
from nanguard.torch.guard.schedule import ScheduleHold, check_schedulers
from nanguard.torch.guard.sharded import fsdp1_layout
from nanguard.torch.guard.verdict import Verdict, inspect, stamp
from nanguard.torch.guard.window import Window


class GradGuard(LossChecks, Recovery, CheckpointState, Reporting):
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

    def _judge_norm(self, verdict: Verdict) -> tuple[list[bool], float | None]:
        """Which ranks' total gradient norm spiked, and the limit (a finite step only)."""
        if self._norm_spikes is None or verdict.bad:
            return [], None
        return self._norm_spikes.judge(verdict.totals)

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
