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
  ``nanguard_nonfinite_losses`` (the callback runs first, so the reporters see them).
"""

from __future__ import annotations

from typing import Any

from nanguard.core.guard_records import GuardRecords
from nanguard.torch.guard.guard import GradGuard
from nanguard.torch.integrations._require import require
from nanguard.torch.integrations.accelerate import check_distributed_type, install

transformers = require("transformers", "hf", "HF Trainer")


class TrainerGuard(transformers.TrainerCallback):
    """The Trainer's guard; made by :func:`guard_trainer`. ``.guard`` is the
    :class:`nanguard.GradGuard` once training has started (``None`` before)."""

    def __init__(self, trainer: Any, guard_kwargs: dict[str, Any]) -> None:
        self.trainer = trainer
        self.guard_kwargs = guard_kwargs
        self.guard: GradGuard | None = None

    # -- what the user reads ---------------------------------------------------------------
    @property
    def records(self) -> GuardRecords:
        if self.guard is None:
            raise RuntimeError("nanguard: the Trainer has not started training yet")
        return self.guard.records

    def summary(self) -> str:
        return self.records.summary()

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
        install(self.guard, trainer.accelerator, optimizer)

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
                  max_events: int = 1000) -> TrainerGuard:
    """Guard every optimizer step of an HF ``Trainer`` (call before ``trainer.train()``).

    Args:
        trainer: the ``transformers.Trainer`` (or a subclass: SFTTrainer and friends).
        policy, max_consecutive, accumulation, monitor, max_events: as for
            :class:`nanguard.GradGuard`. "zero" is refused with ``fp16=True``.

    Returns the :class:`TrainerGuard` callback (already added to the Trainer):
    ``.records``, ``.summary()`` and ``.guard`` once training has started.

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
    from nanguard.core.guard_policy import check_accumulation, check_max_consecutive, check_policy

    kwargs = {"policy": check_policy(policy, "nanguard.guard_trainer"),
              "max_consecutive": check_max_consecutive(max_consecutive, "nanguard.guard_trainer"),
              "accumulation": check_accumulation(accumulation, "nanguard.guard_trainer"),
              "monitor": monitor, "max_events": max_events}
    for existing in trainer.callback_handler.callbacks:
        if isinstance(existing, TrainerGuard):
            raise ValueError("nanguard.guard_trainer: this Trainer is already guarded")
    callback = TrainerGuard(trainer, kwargs)
    # first in line, so that the reporting callbacks see the counters it adds to the logs
    trainer.callback_handler.callbacks.insert(0, callback)
    return callback
