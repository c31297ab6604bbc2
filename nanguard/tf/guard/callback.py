"""GuardCallback: delivers a GuardedOptimizer's raise during ``model.fit``, and shows what
the guard did where Keras shows a run.

``model.fit`` runs the train step as a ``tf.function``, where a Python error cannot be raised
from the guard's ``tf.cond``. With this callback attached the guard leaves the raise pending
and the callback raises the :class:`nanguard.NonFiniteError` on the host after the batch
(with ``steps_per_execution=N``, after the N-step chunk), also under XLA, which cannot fail a
step at all. Without it a graph step fails with ``InvalidArgumentError`` (see
:mod:`nanguard.tf.guard.optimizer`).

An epoch whose loss is NaN because one batch was (and was skipped, leaving the model fine)
looks broken in ``History``, ``CSVLogger`` and the progress bar unless they also say the
guard skipped it: the callback adds ``nanguard_skipped_steps`` to the batch and epoch logs
(callbacks listed after it see it; ``History`` and the progress bar always do), and prints
the guard's one-line summary when ``fit`` ends (unless ``verbose=0``).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import keras

from nanguard.tf.guard.optimizer import GuardedOptimizer


class GuardCallback(keras.callbacks.Callback):
    """Raise the guard's NonFiniteError from ``model.fit`` ("raise" and ``max_consecutive``).

    Not needed for "skip"/"zero" without ``max_consecutive``; harmless otherwise: one scalar
    read per batch. ``optimizer=None`` uses the model's optimizer, which must be a
    :class:`GuardedOptimizer`.

    Example:
        >>> opt = nanguard.tf.GuardedOptimizer(keras.optimizers.Adam(), policy="raise")
        >>> model.compile(optimizer=opt, loss="mse")
        >>> model.fit(x, y, callbacks=[nanguard.tf.GuardCallback()])   # raises on a NaN batch
    """

    def __init__(self, optimizer: Optional[GuardedOptimizer] = None) -> None:
        super().__init__()
        if optimizer is not None and not isinstance(optimizer, GuardedOptimizer):
            raise TypeError(f"nanguard.tf.GuardCallback: `optimizer` must be a GuardedOptimizer or None, "
                            f"got {type(optimizer).__name__}")
        self._optimizer = optimizer

    def _guard(self) -> GuardedOptimizer:
        opt = self._optimizer if self._optimizer is not None else getattr(self.model, "optimizer", None)
        if not isinstance(opt, GuardedOptimizer):
            raise TypeError("nanguard.tf.GuardCallback: the model's optimizer is not a GuardedOptimizer; compile "
                            "with optimizer=nanguard.tf.GuardedOptimizer(...) or pass it to GuardCallback(opt)")
        return opt

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        self._guard()._host_checks = True  # before fit traces its step: leave raises to check()

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        guard = self._guard()
        guard.check()
        self._add_counters(guard, logs)

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        self._add_counters(self._guard(), logs)

    def on_train_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        guard = self._guard()
        guard._host_checks = False  # steps traced from now on (a custom loop) raise themselves
        guard.check()
        if guard.built and self.params.get("verbose", 1) != 0:
            print(guard.records.line(), flush=True)

    @staticmethod
    def _add_counters(guard: GuardedOptimizer, logs: Optional[Dict[str, Any]]) -> None:
        if logs is not None and guard.built:
            logs["nanguard_skipped_steps"] = guard._read_counter("skipped")
