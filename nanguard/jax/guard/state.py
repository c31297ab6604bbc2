"""The guard's state: the inner optimizer's state plus counters, kept as arrays so it lives
inside ``jit``/``pmap`` like any optax state.

Everything the host needs to name a bad leaf travels with it: the leaves' key paths and
shapes are static pytree metadata (part of the tree structure, never traced), the counts are
int32 arrays. Under ``pmap`` every device holds the same values, because the counts that
feed them are summed over the axis first.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

import jax
import jax.numpy as jnp

# What one update did (the values of `GuardState.event_action` and of the switch index).
APPLIED, ZEROED, SKIPPED, RAISED = 0, 1, 2, 3
ACTION_NAMES = {ZEROED: "zeroed", SKIPPED: "skipped", RAISED: "raised"}


@dataclasses.dataclass(frozen=True)
class GuardState:
    """State of :func:`nanguard.jax.guarded`: ``inner_state`` and what the guard counted.

    Scalars: ``steps`` (updates seen), ``applied``, ``skipped``, ``zeroed``, ``raised``,
    ``consecutive`` (bad steps since the last finite one), ``longest_run``, ``halted`` (the
    step of the last raise, for :func:`check_guard`; 0 if none. The step itself raises, so a
    caller holds such a state only if it kept the outputs of a step that raised; it freezes
    nothing) and ``halted_by_limit`` (1 when that raise came from ``max_consecutive``).
    Per leaf (in ``paths`` order): ``leaf_nan``/``leaf_inf`` elements over the run,
    ``leaf_bad_steps``, ``leaf_first``/``leaf_last`` bad step.
    The newest ``max_events`` bad steps: ``event_step``, ``event_action``, ``event_devices``
    (how many devices had non-finite values), ``event_counts`` ([event, leaf, (nan, inf)]);
    ``n_events`` counts them all.
    """

    inner_state: Any
    steps: jax.Array
    applied: jax.Array
    skipped: jax.Array
    zeroed: jax.Array
    raised: jax.Array
    consecutive: jax.Array
    longest_run: jax.Array
    halted: jax.Array
    halted_by_limit: jax.Array
    leaf_nan: jax.Array
    leaf_inf: jax.Array
    leaf_bad_steps: jax.Array
    leaf_first: jax.Array
    leaf_last: jax.Array
    event_step: jax.Array
    event_action: jax.Array
    event_devices: jax.Array
    event_counts: jax.Array
    n_events: jax.Array
    # static: part of the tree structure, so jit and pmap never trace them
    paths: Tuple[str, ...] = ()
    shapes: Tuple[Tuple[int, ...], ...] = ()
    policy: str = "skip"
    max_consecutive: Optional[int] = None

    def replace(self, **changes: Any) -> "GuardState":
        return dataclasses.replace(self, **changes)


_META = ("paths", "shapes", "policy", "max_consecutive")
jax.tree_util.register_dataclass(
    GuardState,
    data_fields=[f.name for f in dataclasses.fields(GuardState) if f.name not in _META],
    meta_fields=list(_META),
)


def leaf_path(path: Tuple[Any, ...]) -> str:
    """``('encoder', 'layers', 0, 'kernel')`` written as ``encoder.layers.0.kernel``."""
    parts = []
    for key in path:
        for attr in ("key", "name", "idx"):  # DictKey, GetAttrKey, SequenceKey
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts) or "params"


def initial_state(inner_state: Any, params: Any, policy: str, max_consecutive: Optional[int],
                  max_events: int) -> GuardState:
    with_paths = jax.tree_util.tree_leaves_with_path(params)
    paths = tuple(leaf_path(p) for p, _ in with_paths)
    shapes = tuple(tuple(int(s) for s in jnp.shape(leaf)) for _, leaf in with_paths)
    n = len(paths)
    scalar = jnp.zeros((), jnp.int32)
    per_leaf = jnp.zeros((n,), jnp.int32)
    return GuardState(
        inner_state=inner_state, steps=scalar, applied=scalar, skipped=scalar, zeroed=scalar,
        raised=scalar, consecutive=scalar, longest_run=scalar, halted=scalar,
        halted_by_limit=scalar, leaf_nan=per_leaf, leaf_inf=per_leaf, leaf_bad_steps=per_leaf,
        leaf_first=per_leaf, leaf_last=per_leaf,
        event_step=jnp.zeros((max_events,), jnp.int32),
        event_action=jnp.zeros((max_events,), jnp.int32),
        event_devices=jnp.zeros((max_events,), jnp.int32),
        event_counts=jnp.zeros((max_events, n, 2), jnp.int32), n_events=scalar,
        paths=paths, shapes=shapes, policy=policy, max_consecutive=max_consecutive,
    )
