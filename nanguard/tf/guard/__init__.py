"""Recover for TensorFlow / Keras 3: guard ``apply_gradients`` against NaN/Inf gradients.

- :class:`GuardedOptimizer` — wrap any Keras optimizer: skip / zero / raise, name the
  variables, count, ``max_consecutive``; eager, ``tf.function``, ``model.fit`` and
  ``MirroredStrategy`` (every replica takes the same decision).
- :class:`GuardCallback` — raises the guard's NonFiniteError from ``model.fit`` (also under
  XLA), puts ``nanguard_skipped_steps`` in Keras' logs, prints a summary when ``fit`` ends.

Modules: ``optimizer`` (the wrapper and its traced decision), ``checks`` (the per-replica
check and the all-reduced verdict), ``counters`` (the counter variables and the host
records), ``callback``.
"""

from nanguard.tf.guard.callback import GuardCallback
from nanguard.tf.guard.optimizer import GuardedOptimizer

__all__ = ["GuardedOptimizer", "GuardCallback"]
