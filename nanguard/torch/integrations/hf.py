"""The HF ``transformers.Trainer``: skip a NaN step without poisoning, hold the schedule.

The Trainer owns the step: per micro-batch ``accelerator.backward``, then at the end of a
window ``accelerator.clip_grad_norm_`` (``max_grad_norm=1.0`` by default), ``optimizer.step()``
and, unless accelerate says the step was skipped, ``lr_scheduler.step()``. A callback alone
runs too late: the clip has already multiplied every gradient by NaN. :func:`guard_trainer`
adds a callback *and* installs the accelerate seams (:mod:`.accelerate`) on the Trainer's
accelerator and, when training starts, on its prepared optimizer:

- the gradients are checked before the clip, so the blame names the parameters that were
  non-finite and policy "zero" zeroes only their bad elements;
- a skipped step leaves parameters and optimizer state bitwise untouched and is reported
  as accelerate reports an AMP overflow, so the Trainer holds the LR schedule exactly as it
  does for its own fp16 skip; ``state.global_step`` still advances, as it does then;
- a non-finite micro-batch loss is not backpropagated (``accumulation=``);
- every training log line gains ``nanguard_skipped_steps`` and
  ``nanguard_nonfinite_losses`` (the callback runs first, so the reporters see them);
- the guard's state travels with the Trainer's checkpoints: it is kept in
  ``state.stateful_callbacks["nanguard"]``, which the Trainer writes to
  ``trainer_state.json`` and reads back on ``train(resume_from_checkpoint=...)``. (Not as an
  ``ExportableState`` callback: with ``restore_callback_states_from_checkpoint`` the Trainer
  would rebuild such a callback from JSON, and this one holds the Trainer);
- the end of ``train()`` prints one line (counts, the parameters that were non-finite);
- policy "rollback": the snapshot is taken inside the guarded ``optimizer.step()`` before
  the update and holds the Trainer's ``lr_scheduler`` too (:mod:`._rollback`); a rollback
  is reported as a skipped step, so the Trainer holds the schedule it has just restored.
"""

from __future__ import annotations

from typing import Any

from nanguard.core.guard_records import COUNTERS, GuardRecords
from nanguard.torch.guard.guard import GradGuard
from nanguard.torch.integrations._require import require
from nanguard.torch.integrations._rollback import follow, rollback_options
from nanguard.torch.integrations.accelerate import check_distributed_type, install

transformers = require("transformers", "hf", "HF Trainer")

STATE_KEY = "nanguard"  # in TrainerState.stateful_callbacks


class TrainerGuard(transformers.TrainerCallback):
    """The Trainer's guard; made by :func:`guard_trainer`. ``.guard`` is the
    :class:`nanguard.GradGuard` once training has started (``None`` before)."""

    def __init__(self, trainer: Any, guard_kwargs: dict[str, Any], summary: bool = True) -> None:
        self.trainer = trainer
        self.guard_kwargs = guard_kwargs
        self.print_summary = summary
        self.guard: GradGuard | None = None
        self._saved: tuple[int, dict[str, Any]] | None = None  # (events version, their state)

    # -- what the user reads ---------------------------------------------------------------
    @property
    def records(self) -> GuardRecords:
        if self.guard is None:
            raise RuntimeError("nanguard: the Trainer has not started training yet")
        return self.guard.records

    def summary(self) -> str:
        return self.records.summary()

    def plot(self, path: str | None = None, top: int = 8) -> Any:
        """:meth:`nanguard.GradGuard.plot` of the Trainer's guard."""
        if self.guard is None:
            raise RuntimeError("nanguard: the Trainer has not started training yet")
        return self.guard.plot(path, top)

    def _state(self) -> dict[str, Any]:
        """The guard's state_dict; its events and per-parameter totals are rebuilt only when
        an event was added (each adds to one of these counters), not at every step."""
        assert self.guard is not None
        r = self.guard.records
        version = r.skipped + r.zeroed + r.raised + r.nonfinite_losses + r.rolled_back + r.spikes
        if self._saved is None or self._saved[0] != version:
            self._saved = (version, r.state_dict())
        state = dict(self._saved[1])
        state.update((k, getattr(r, k)) for k in COUNTERS)
        return state

    # -- Trainer callbacks -----------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        check_distributed_type(trainer.accelerator, "guard_trainer")
        optimizer = trainer.optimizer
        inner = getattr(optimizer, "optimizer", None)
        if inner is None:
            raise TypeError("nanguard.guard_trainer: the Trainer's optimizer was not prepared by "
                            "accelerate; this transformers version is not supported")
        if self.guard is None or self.guard.optimizer is not inner:
            scaler = trainer.accelerator.scaler
            if scaler is not None and self.guard_kwargs["policy"] == "zero":
                raise ValueError("nanguard.guard_trainer: policy 'zero' cannot be used with "
                                 "fp16: an overflow must skip the step so the GradScaler backs "
                                 "its scale off; use policy 'skip'")
            self.guard = GradGuard(inner, model=trainer.model, scaler=scaler, **self.guard_kwargs)
        follow(self.guard, [getattr(trainer, "lr_scheduler", None)])
        saved = (state.stateful_callbacks or {}).get(STATE_KEY)
        if saved is not None:  # resumed: the TrainerState came from the checkpoint
            self.guard.load_state_dict(saved)
        self._saved = None
        install(self.guard, trainer.accelerator, optimizer)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.guard is not None:  # kept current: the Trainer may save after any step
            state.stateful_callbacks[STATE_KEY] = self._state()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.print_summary and self.guard is not None and state.is_world_process_zero:
            print(self.guard.records.line(), flush=True)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if self.guard is None or not logs or "loss" not in logs:
            return  # only training log lines
        r = self.guard.records
        counters = {"nanguard_skipped_steps": r.skipped,
                    "nanguard_nonfinite_losses": r.nonfinite_losses}
        logs.update(counters)
        if state.log_history and state.log_history[-1].get("loss") == logs.get("loss"):
            state.log_history[-1].update(counters)  # the Trainer copied `logs` there already


def guard_trainer(trainer: Any, *, policy: str = "skip", max_consecutive: int | None = 25,
                  accumulation: str = "skip_window", monitor: bool = False,
                  max_events: int = 1000, summary: bool = True,
                  snapshot_every: int | None = None, spike: Any = None,
                  lr_backoff: float | None = None) -> TrainerGuard:
    """Guard every optimizer step of an HF ``Trainer`` (call before ``trainer.train()``).

    Args:
        trainer: the ``transformers.Trainer`` (or a subclass: SFTTrainer and friends).
        policy, max_consecutive, accumulation, monitor, max_events: as for
            :class:`nanguard.GradGuard`. "zero" is refused with ``fp16=True``.
        summary: print the one-line summary when ``train()`` ends, on the main process.
        snapshot_every, spike, lr_backoff: policy "rollback", as for :class:`nanguard.GradGuard`
            (the Trainer's ``lr_scheduler`` is restored with the model and optimizer).

    Returns the :class:`TrainerGuard` callback (already added to the Trainer):
    ``.records``, ``.summary()``, ``.plot()`` and ``.guard`` once training has started.

    Example:
        >>> trainer = Trainer(model=model, args=args, train_dataset=data)
        >>> nan_guard = guard_trainer(trainer)
        >>> trainer.train()
        >>> print(nan_guard.summary())
    """
    if not isinstance(trainer, transformers.Trainer):
        raise TypeError(f"nanguard.guard_trainer: `trainer` must be a transformers.Trainer, "
                        f"got {type(trainer).__name__}")
    check_distributed_type(trainer.accelerator, "guard_trainer")
    # checked now, not when training starts
    from nanguard.core.guard_policy import check_accumulation, check_max_consecutive

    accumulation = check_accumulation(accumulation, "nanguard.guard_trainer")
    kwargs = {"max_consecutive": check_max_consecutive(max_consecutive, "nanguard.guard_trainer"),
              "accumulation": accumulation, "monitor": monitor, "max_events": max_events,
              **rollback_options(policy, snapshot_every, spike, lr_backoff, accumulation,
                                 "nanguard.guard_trainer")}
    for existing in trainer.callback_handler.callbacks:
        if isinstance(existing, TrainerGuard):
            raise ValueError("nanguard.guard_trainer: this Trainer is already guarded")
    if not isinstance(summary, bool):
        raise TypeError(f"nanguard.guard_trainer: `summary` must be a bool, got {summary!r}")
    callback = TrainerGuard(trainer, kwargs, summary)
    # first in line, so that the reporting callbacks see the counters it adds to the logs
    trainer.callback_handler.callbacks.insert(0, callback)
    return callback
