"""PyTorch Lightning: a ``Callback`` that guards automatic and manual optimization.

Lightning owns the step: ``LightningOptimizer.step`` -> the precision plugin -> the raw
optimizer's ``step(closure)``, with the closure running ``training_step`` and the backward
pass, then the ``on_before_optimizer_step`` hooks, then ``configure_gradient_clipping``.
Overriding ``optimizer_step`` to call a guard drops clipping and hooks; a guard on the raw
optimizer freezes ``global_step``. :class:`GuardCallback` does neither. It decides in
``on_before_optimizer_step`` (after the backward, before the clip) and carries the decision
out at the raw optimizer's own update, so Lightning's loop, hooks, clipping and step
counting run as they always do:

- a skipped step leaves parameters and optimizer state bitwise untouched, is not clipped,
  and still counts as a step (``trainer.global_step`` advances, as after Lightning's own AMP
  skip), so ``max_steps`` ends the run;
- "zero" zeroes the bad elements before Lightning clips;
- ``16-mixed``: the precision plugin's GradScaler is the guard's: one unscale (Lightning's),
  its inf check reused, and the scale backs off after a bad step;
- step-interval LR schedulers are held on a skipped step (``hold_schedule=True``). Lightning
  itself advances them after its own AMP skip; HF, optax and DeepSpeed hold them. In manual
  optimization the module steps its schedulers: ``if callback.last_step_applied()``;
- a non-finite loss is not backpropagated (``LightningModule.backward``), and with
  ``accumulate_grad_batches`` the window is one step (``accumulation=``);
- ``nanguard_skipped_steps`` (also on the progress bar) and ``nanguard_nonfinite_losses``
  (and, under policy "rollback", ``nanguard_rollbacks``) are
  logged when they change and at the start of each epoch: Lightning shows and logs the last
  value logged, and each ``self.log`` costs about 0.3 ms, which every step would pay;
- policy "rollback": the snapshot is taken in ``on_before_optimizer_step`` before the update
  (what the raw optimizer's update then changes), holds the step-interval schedulers of the
  optimizer too (:mod:`._rollback`), and is restored there; the rolled-back step is held like
  a skipped one, and the LR backoff scales the raw optimizer's own update;
- the guards' counters and records are saved in Lightning's checkpoints (``state_dict``), so
  a resumed run keeps its streak and its bad steps; the end of ``fit`` prints one line.

Uses ``pytorch_lightning`` when installed, else ``lightning.pytorch``.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from nanguard.core.guard_policy import ROLLBACK, check_accumulation, check_max_consecutive
from nanguard.core.guard_records import GuardRecords
from nanguard.torch.guard.guard import FRAMEWORK, GradGuard
from nanguard.torch.guard.rollback import scaled_lr
from nanguard.torch.integrations._rollback import follow, rollback_options


def _lightning() -> Any:
    for name in ("pytorch_lightning", "lightning.pytorch"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("nanguard's Lightning integration needs PyTorch Lightning, which is not "
                      "installed: `pip install 'nanguard[lightning]'`")


pl = _lightning()

# The strategies whose step is a plain torch step on every rank (one device, DDP).
SUPPORTED_STRATEGIES = ("SingleDeviceStrategy", "DDPStrategy")


class GuardCallback(pl.Callback):
    """Guard every optimizer step of a Lightning ``Trainer``: skip, zero, raise or roll back.

    Args:
        policy, max_consecutive, accumulation, monitor, max_events: as for
            :class:`nanguard.GradGuard`. "zero" is refused with ``16-mixed``.
        snapshot_every, spike, lr_backoff: policy "rollback", as for
            :class:`nanguard.GradGuard`. The snapshot (parameters, the module's buffers, the
            optimizer, its step-interval schedulers, the precision plugin's GradScaler, the
            RNGs) is taken in ``on_before_optimizer_step`` before the update and restored
            there; the rolled-back step counts as a skipped one (``global_step`` advances).
        hold_schedule: hold step-interval LR schedulers on a skipped step (default True;
            policy "rollback" needs it: a restored schedule must not move on).
        log: log the guard's counters with ``pl_module.log`` (default True).
        summary: print the one-line summary when ``fit`` ends, on global rank 0 (default True).

    After ``fit``: ``callback.records``, ``callback.summary()``, ``callback.plot()``;
    ``callback.guards`` maps each optimizer to its :class:`nanguard.GradGuard` (one per
    optimizer).

    Example:
        >>> nan_guard = GuardCallback()
        >>> trainer = pl.Trainer(max_steps=1000, gradient_clip_val=1.0, callbacks=[nan_guard])
        >>> trainer.fit(model, data)
        >>> print(nan_guard.summary())
    """

    def __init__(self, policy: str = "skip", max_consecutive: int | None = 25, *,
                 accumulation: str = "skip_window", monitor: bool = False,
                 max_events: int = 1000, hold_schedule: bool = True, log: bool = True,
                 summary: bool = True, snapshot_every: int | None = None, spike: Any = None,
                 lr_backoff: float | None = None) -> None:
        self.max_consecutive = check_max_consecutive(max_consecutive, "nanguard.GuardCallback")
        self.accumulation = check_accumulation(accumulation, "nanguard.GuardCallback")
        self._options = rollback_options(policy, snapshot_every, spike, lr_backoff,
                                         self.accumulation, "nanguard.GuardCallback")
        self.policy = self._options["policy"]
        if self.policy == ROLLBACK and hold_schedule is False:
            raise ValueError("nanguard.GuardCallback: policy 'rollback' needs hold_schedule="
                             "True: the rollback restores the schedulers' state, and a "
                             "schedule stepped after it would be one step off the model's")
        for name, flag in (("hold_schedule", hold_schedule), ("log", log), ("summary", summary)):
            if not isinstance(flag, bool):
                raise TypeError(f"nanguard.GuardCallback: `{name}` must be a bool, got {flag!r}")
        self.monitor, self.max_events = monitor, max_events
        # not `self.log`: Lightning sets `callback.log = module.log` on every callback
        self.hold_schedule, self.log_counters, self.print_summary = hold_schedule, log, summary
        self.guards: dict[int, GradGuard] = {}
        self._apply_next: dict[int, bool] = {}  # id(raw optimizer) -> the pending decision
        self._skipped_last: dict[int, bool] = {}
        self._restore: list[tuple[Any, str, Any]] = []
        self._logged: tuple[int, ...] | None = None  # the counters last logged
        self._loaded: list[dict[str, Any]] | None = None  # checkpointed guard states

    # -- what the user reads ---------------------------------------------------------------
    @property
    def records(self) -> GuardRecords:
        return self._only_guard("records").records

    def summary(self) -> str:
        return "\n\n".join(g.summary() for g in self.guards.values())

    def plot(self, path: str | None = None, top: int = 8) -> Any:
        """:meth:`nanguard.GradGuard.plot` of the guarded optimizer (with several, call it on
        ``callback.guards[...]``)."""
        return self._only_guard("plot").plot(path, top)

    def _only_guard(self, what: str) -> GradGuard:
        if len(self.guards) != 1:
            raise RuntimeError(
                f"nanguard.GuardCallback.{what}: " + ("fit() has not started yet" if not self.guards
                else f"several optimizers are guarded; use callback.guards[...].{what}"))
        return next(iter(self.guards.values()))

    # -- checkpoints (Lightning saves a callback's state_dict) -----------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"guards": [g.state_dict() for g in self.guards.values()]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Lightning restores callbacks before on_fit_start makes the guards (or after, for
        # strategies that restore after setup): keep the states until both exist
        self._loaded = list(state_dict.get("guards", []))
        self._load_guards()

    def _load_guards(self) -> None:
        if self._loaded is None or not self.guards:
            return
        for guard, state in zip(self.guards.values(), self._loaded):
            guard.load_state_dict(state)
        self._loaded, self._logged = None, None

    def last_step_applied(self, optimizer: Any = None) -> bool:
        """Whether the last step of `optimizer` (default: the only one) was applied; in manual
        optimization, step your schedulers only when it was (automatic optimization holds
        step-interval schedulers by itself).

        Example:
            >>> opt.step()
            >>> if self.nan_guard.last_step_applied():
            ...     self.lr_schedulers().step()
        """
        if optimizer is None:
            if len(self._skipped_last) != 1:
                raise RuntimeError("nanguard.GuardCallback.last_step_applied: name the optimizer"
                                   " (none or several have stepped)")
            return not next(iter(self._skipped_last.values()))
        raw = getattr(optimizer, "_optimizer", optimizer)
        return not self._skipped_last.get(id(raw), False)

    # -- Lightning hooks -------------------------------------------------------------------
    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        strategy = type(trainer.strategy).__name__
        if strategy not in SUPPORTED_STRATEGIES:
            raise NotImplementedError(
                f"nanguard.GuardCallback: the {strategy} is not supported yet (its step is "
                f"sharded or fused out of the guard's sight); supported: "
                f"{', '.join(SUPPORTED_STRATEGIES)}")
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if scaler is not None and self.policy == "zero":
            raise ValueError("nanguard.GuardCallback: policy 'zero' cannot be used with "
                             "precision '16-mixed': an overflow must skip the step so the "
                             "GradScaler backs its scale off; use policy 'skip'")
        for optimizer in trainer.optimizers:
            raw = getattr(optimizer, "_optimizer", optimizer)
            key = id(raw)
            if key not in self.guards or self.guards[key].optimizer is not raw:
                self.guards[key] = GradGuard(
                    raw, max_consecutive=self.max_consecutive, model=pl_module, scaler=scaler,
                    monitor=self.monitor, max_events=self.max_events,
                    accumulation=self.accumulation, **self._options)
            follow(self.guards[key], [c.scheduler for c in trainer.lr_scheduler_configs
                                      if c.interval == "step"
                                      and _raw(getattr(c.scheduler, "optimizer", None)) is raw])
            self._wrap_step(raw)
        self._load_guards()
        self._wrap(pl_module, "backward", self._guarded_backward(pl_module.backward))
        self._wrap(pl_module, "configure_gradient_clipping",
                   self._guarded_clipping(pl_module.configure_gradient_clipping))
        if self.hold_schedule:
            self._wrap(pl_module, "lr_scheduler_step",
                       self._held_scheduler_step(trainer, pl_module.lr_scheduler_step))

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        raw = getattr(optimizer, "_optimizer", optimizer)
        guard = self.guards.get(id(raw))
        if guard is None:
            return
        applied = guard._step(lambda: None, scaler_step=FRAMEWORK)
        self._apply_next[id(raw)] = applied
        self._skipped_last[id(raw)] = not applied

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._logged = None  # a logger forgets the previous epoch's step values

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if not self.log_counters or not self.guards:
            return
        counters = tuple(sum(getattr(g.records, name) for g in self.guards.values())
                         for name in ("skipped", "nonfinite_losses", "rolled_back"))
        if counters == self._logged:
            return  # Lightning keeps showing, and logging, the value logged last
        self._logged = counters
        pl_module.log("nanguard_skipped_steps", float(counters[0]), on_step=True, on_epoch=False,
                      prog_bar=True)
        pl_module.log("nanguard_nonfinite_losses", float(counters[1]), on_step=True,
                      on_epoch=False)
        if self.policy == ROLLBACK:
            pl_module.log("nanguard_rollbacks", float(counters[2]), on_step=True,
                          on_epoch=False, prog_bar=True)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._unwrap()
        if self.print_summary and trainer.is_global_zero:
            for guard in self.guards.values():
                print(guard.records.line(), flush=True)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._unwrap()

    # -- the seams -------------------------------------------------------------------------
    def _wrap(self, owner: Any, name: str, replacement: Any) -> None:
        self._restore.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, replacement)

    def _unwrap(self) -> None:
        # instance attributes only for the length of fit(): nothing guarded is pickled later
        for owner, name, before in reversed(self._restore):
            if before is _MISSING:
                owner.__dict__.pop(name, None)
            else:
                setattr(owner, name, before)
        self._restore.clear()

    def _wrap_step(self, raw: torch.optim.Optimizer) -> None:
        original = raw.step  # bound, and maybe an LRScheduler's counting wrapper
        decisions, guards = self._apply_next, self.guards

        def step(closure: Any = None, **kwargs: Any) -> Any:
            result = None
            if closure is not None:
                with torch.enable_grad():
                    result = closure()  # training_step, backward, on_before_optimizer_step
            if decisions.pop(id(raw), True):
                guard = guards.get(id(raw))
                # the rollbacks' LR backoff, at the update (see rollback.scaled_lr)
                with scaled_lr(raw, 1.0 if guard is None else guard.lr_scale):
                    original(**kwargs)
            return result

        if hasattr(original, "_wrapped_by_lr_sched"):
            step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
        self._wrap(raw, "step", step)

    def _guarded_backward(self, original: Any) -> Any:
        def backward(loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            guard = self._guard_for_backward()
            if guard is None:
                return original(loss, *args, **kwargs)
            guard._micro_batch(loss, None, lambda: original(loss, *args, **kwargs))
            return None

        return backward

    def _guard_for_backward(self) -> GradGuard | None:
        # automatic optimization has one optimizer; with several (manual) the loss check
        # belongs to no single window, so the gradient check alone decides
        return next(iter(self.guards.values())) if len(self.guards) == 1 else None

    def _guarded_clipping(self, original: Any) -> Any:
        def configure_gradient_clipping(optimizer: Any, *args: Any, **kwargs: Any) -> None:
            raw = getattr(optimizer, "_optimizer", optimizer)
            if not self._apply_next.get(id(raw), True):
                return None  # a skipped step: clipping would only smear its NaN everywhere
            return original(optimizer, *args, **kwargs)

        return configure_gradient_clipping

    def _held_scheduler_step(self, trainer: Any, original: Any) -> Any:
        def lr_scheduler_step(scheduler: Any, metric: Any) -> None:
            optimizer = getattr(scheduler, "optimizer", None)
            raw = getattr(optimizer, "_optimizer", optimizer)
            interval = next((c.interval for c in trainer.lr_scheduler_configs
                             if c.scheduler is scheduler), "epoch")
            if interval == "step" and self._skipped_last.get(id(raw), False):
                return None  # held: the step it would schedule never happened
            return original(scheduler, metric)

        return lr_scheduler_step


def _raw(optimizer: Any) -> Any:
    return getattr(optimizer, "_optimizer", optimizer)


_MISSING = object()
