"""Recover for JAX/optax: an optax transformation that guards the step against NaN/Inf.

- :func:`guarded` — wrap any ``optax.GradientTransformation``: skip / zero / raise on NaN/Inf
  gradients, count, record the bad leaves by key path, ``max_consecutive``, works under
  ``jit`` and agrees across devices under ``pmap``/``shard_map`` (``axis_name=``).
- :func:`check_guard` — the host check that raises the error a state records (the update
  raises by itself, under ``jit`` from a host callback);
  :func:`resume_guard` clears it; :func:`guard_records` — counters and summary.

Modules: ``transform`` (the transformation and its traced decision), ``state`` (GuardState,
leaf paths), ``host`` (reading the state back, the error), ``_optax`` (optax, imported lazily).
"""

from nanguard.jax.guard.host import check_guard, guard_records, resume_guard
from nanguard.jax.guard.state import GuardState
from nanguard.jax.guard.transform import guarded

__all__ = ["guarded", "GuardState", "check_guard", "guard_records", "resume_guard"]
