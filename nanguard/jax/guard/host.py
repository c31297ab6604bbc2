"""The host side of the optax guard: read a :class:`GuardState` back, summarise it, and
deliver the error a "raise" left pending inside ``jit``.

These functions run outside ``jit`` (they read arrays with ``jax.device_get``). They accept
the guard's state itself or any optimizer state that contains it (e.g. a chain's tuple). A
state replicated by ``pmap`` has a leading device axis; every device holds the same values
(the guard sums its counts over the axis), so the first device's copy is read.
"""

from __future__ import annotations

from typing import Any, List

import jax
import numpy as np

from nanguard.core.guard_policy import raise_message
from nanguard.core.guard_records import GRADIENTS, GuardEvent, GuardRecords, ParamIssue, ParamTotals
from nanguard.errors import NonFiniteError
from nanguard.jax.guard.state import ACTION_NAMES, GuardState

_GUARD_NAME = "optax guard"


def find_state(state: Any) -> GuardState:
    """The GuardState in `state` (the state itself, or inside a tuple/chain/dict)."""
    if isinstance(state, GuardState):
        return state
    found = [s for s in jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, GuardState))
             if isinstance(s, GuardState)]
    if len(found) != 1:
        raise TypeError(f"nanguard.jax: expected the state of nanguard.jax.guarded(...) (or an optimizer "
                        f"state containing exactly one), found {len(found)} in a {type(state).__name__}")
    return found[0]


def _host(state: GuardState) -> GuardState:
    """The state with numpy arrays; a pmap-replicated state (leading device axis) reduced to device 0."""
    host = jax.device_get(state.replace(inner_state=None))
    if np.ndim(host.steps) == 0:
        return host
    return jax.tree.map(lambda a: np.asarray(a)[0], host)


def _event(host: GuardState, slot: int) -> GuardEvent:
    counts = host.event_counts[slot]
    params = tuple(
        ParamIssue(host.paths[i], host.shapes[i], int(counts[i, 0]), int(counts[i, 1]), i)
        for i in range(len(host.paths)) if counts[i].sum() > 0
    )
    return GuardEvent(step=int(host.event_step[slot]), kind=GRADIENTS,
                      action=ACTION_NAMES[int(host.event_action[slot])], params=params)


def _events(host: GuardState) -> List[GuardEvent]:
    size = host.event_step.shape[0]
    n = int(host.n_events)
    return [_event(host, k % size) for k in range(max(0, n - size), n)]


def guard_records(state: Any) -> GuardRecords:
    """What the guard counted, as a :class:`nanguard.core.guard_records.GuardRecords`
    (``.skipped``, ``.bad_steps``, ``.params`` per leaf path, ``.summary()``).

    Example:
        >>> records = nanguard.jax.guard_records(opt_state)
        >>> records.skipped, records.bad_steps
        (1, [7])
        >>> print(records.summary())  # doctest: +SKIP
    """
    host = _host(find_state(state))
    records = GuardRecords(host.policy, host.max_consecutive, max_events=host.event_step.shape[0],
                           n_params=len(host.paths), guard=_GUARD_NAME)
    for event in _events(host):
        records.events.append(event)
    for key in ("steps", "applied", "skipped", "zeroed", "raised", "consecutive", "longest_run"):
        setattr(records, key, int(getattr(host, key)))
    records.params.clear()
    for i, path in enumerate(host.paths):
        if int(host.leaf_bad_steps[i]):
            records.params[path] = ParamTotals(host.shapes[i], i, int(host.leaf_nan[i]), int(host.leaf_inf[i]),
                                               int(host.leaf_bad_steps[i]), int(host.leaf_first[i]),
                                               int(host.leaf_last[i]))
    return records


def check_guard(state: Any) -> None:
    """Raise :class:`nanguard.NonFiniteError` if `state` records a raise ("raise" or
    ``max_consecutive``), naming the leaves by key path. Reads one scalar when none is.

    The update raises by itself (eagerly, or from the host under ``jit``: see
    :func:`guarded`); this check is what that host callback runs, and a second look for a
    state that was kept anyway. :func:`resume_guard` clears the record.

    Example:
        >>> params, opt_state = train_step(params, opt_state, batch)   # jitted
        >>> nanguard.jax.check_guard(opt_state)                         # raises on a bad step
    """
    guard_state = find_state(state)
    halted = np.asarray(jax.device_get(guard_state.halted)).reshape(-1)
    if not halted.size or int(halted[0]) == 0:
        return
    host = _host(guard_state)
    records = guard_records(guard_state)
    step = int(host.halted)
    event = next((e for e in reversed(_events(host)) if e.step == step), None)
    if event is None:  # older than the kept events
        event = GuardEvent(step=step, kind=GRADIENTS, action="raised")
    limit = bool(host.halted_by_limit)
    message = raise_message(event, limit, host.policy, host.max_consecutive, records, what="leaves")
    size = host.event_step.shape[0]
    slot = next((k % size for k in range(int(host.n_events) - 1, -1, -1) if host.event_step[k % size] == step), None)
    if slot is not None and int(host.event_devices[slot]) > 1:
        message += f"\n  non-finite on {int(host.event_devices[slot])} devices (counts summed over them)."
    raise NonFiniteError(message, report=records)


def resume_guard(state: Any) -> Any:
    """The state with the pending raise cleared, so training can go on (the streak is kept:
    with ``max_consecutive`` the next bad step raises again).

    Example:
        >>> try:
        ...     nanguard.jax.check_guard(opt_state)
        ... except nanguard.NonFiniteError:
        ...     opt_state = nanguard.jax.resume_guard(opt_state)   # e.g. after lowering the lr
    """
    target = find_state(state)
    cleared = target.replace(halted=target.halted * 0, halted_by_limit=target.halted_by_limit * 0)
    if state is target:
        return cleared
    return jax.tree.map(lambda s: cleared if s is target else s, state,
                        is_leaf=lambda x: isinstance(x, GuardState))
