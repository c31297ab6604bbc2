"""The TF guard's counters, kept as optimizer variables so they live inside ``tf.function``,
``model.fit`` and ``MirroredStrategy`` (and in checkpoints), and how they become a
:class:`nanguard.core.guard_records.GuardRecords` on the host.

The variables use ``aggregation="only_first_replica"``: every replica computes the same values
(the verdict was all-reduced), so writing the first replica's is exact.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from nanguard.core.guard_records import GRADIENTS, GuardEvent, GuardRecords, ParamIssue, ParamTotals

# action codes stored per event
ZEROED, SKIPPED, RAISED = 1, 2, 3
ACTION_NAMES = {ZEROED: "zeroed", SKIPPED: "skipped", RAISED: "raised"}

SCALARS = ("steps", "applied", "skipped", "zeroed", "raised", "consecutive", "longest_run",
           "halted", "halted_by_limit", "n_events")


class Counters:
    """The variables: scalars (see SCALARS; ``halted`` is the step of a raise left for
    ``GuardedOptimizer.check`` to deliver, 0 if none; it freezes nothing),
    per variable ``nan``/``inf``/``bad_steps``/``first``/``last``, and a ring of the newest
    ``max_events`` events (``event_step``, ``event_action``, ``event_counts`` [event, var, 2],
    ``event_replicas`` [event, replica])."""

    def __init__(self, add: Callable[..., Any], n: int, replicas: int, max_events: int) -> None:
        def var(name: str, shape: Tuple[int, ...]) -> Any:
            return add(shape=shape, dtype="int64", initializer="zeros", aggregation="only_first_replica",
                       name=f"nanguard_{name}")

        self.scalars: Dict[str, Any] = {k: var(k, ()) for k in SCALARS}
        self.per_var: Dict[str, Any] = {k: var(k, (n,)) for k in ("nan", "inf", "bad_steps", "first", "last")}
        self.event_step = var("event_step", (max_events,))
        self.event_action = var("event_action", (max_events,))
        self.event_counts = var("event_counts", (max_events, n, 2))
        self.event_replicas = var("event_replicas", (max_events, replicas))
        self.max_events = max_events

    # -- in the traced step ---------------------------------------------------------------
    def finite_step(self) -> None:
        self.scalars["steps"].assign_add(1)
        self.scalars["applied"].assign_add(1)
        self.scalars["consecutive"].assign(0)

    def bad_step(self, run: tf.Tensor, limit: tf.Tensor, action: tf.Tensor, found: tf.Tensor,
                 replicas: tf.Tensor, pending: bool) -> None:
        """Record a new bad step: `found` [n, 2] counts, `replicas` [R] flags, `action` a code;
        `pending`: a raise is left for the host to deliver (the graph does not raise it)."""
        s = self.scalars
        step = s["steps"] + 1
        s["steps"].assign(step)
        for code, key in ((SKIPPED, "skipped"), (ZEROED, "zeroed"), (RAISED, "raised")):
            s[key].assign_add(tf.cast(tf.equal(action, code), tf.int64))
        s["consecutive"].assign(run)
        s["longest_run"].assign(tf.maximum(s["longest_run"], run))
        if pending:
            raised = tf.equal(action, RAISED)
            s["halted"].assign(tf.where(raised, step, s["halted"]))
            # the streak that reached max_consecutive (0: policy "raise"), for a later message
            s["halted_by_limit"].assign(tf.where(raised, tf.where(limit, run, 0), s["halted_by_limit"]))
        hit = tf.reduce_sum(found, axis=-1) > 0
        p = self.per_var
        p["nan"].assign_add(found[:, 0])
        p["inf"].assign_add(found[:, 1])
        p["first"].assign(tf.where(hit & tf.equal(p["bad_steps"], 0), step, p["first"]))
        p["last"].assign(tf.where(hit, step, p["last"]))
        p["bad_steps"].assign_add(tf.cast(hit, tf.int64))
        slot = [[s["n_events"] % self.max_events]]
        for ring, value in ((self.event_step, [step]), (self.event_action, [action]),
                            (self.event_counts, [found]), (self.event_replicas, [replicas])):
            ring.assign(tf.tensor_scatter_nd_update(ring, slot, value))
        s["n_events"].assign_add(1)

    # -- on the host ----------------------------------------------------------------------
    def read(self) -> Dict[str, np.ndarray]:
        out = {k: np.asarray(v.numpy()) for k, v in {**self.scalars, **self.per_var}.items()}
        for k in ("event_step", "event_action", "event_counts", "event_replicas"):
            out[k] = np.asarray(getattr(self, k).numpy())
        return out

    def clear_halt(self) -> None:
        self.scalars["halted"].assign(0)
        self.scalars["halted_by_limit"].assign(0)


def events(host: Dict[str, np.ndarray], names: Sequence[str], shapes: Sequence[Tuple[int, ...]]) -> List[GuardEvent]:
    size = host["event_step"].shape[0]
    n = int(host["n_events"])
    result = []
    for k in range(max(0, n - size), n):
        slot = k % size
        found = host["event_counts"][slot]
        params = tuple(ParamIssue(names[i], shapes[i], int(found[i, 0]), int(found[i, 1]), i)
                       for i in reversed(range(len(names))) if found[i].sum() > 0)  # output side first
        flags = host["event_replicas"][slot]
        ranks = tuple(i for i, f in enumerate(flags) if f) if flags.size > 1 else (0,)
        result.append(GuardEvent(step=int(host["event_step"][slot]), kind=GRADIENTS,
                                 action=ACTION_NAMES.get(int(host["event_action"][slot]), "skipped"),
                                 params=params, ranks=ranks or (0,)))
    return result


def records(host: Dict[str, np.ndarray], names: Sequence[str], shapes: Sequence[Tuple[int, ...]], policy: str,
            max_consecutive: Optional[int]) -> GuardRecords:
    rec = GuardRecords(policy, max_consecutive, max_events=host["event_step"].shape[0], n_params=len(names),
                       guard="GuardedOptimizer")
    rec.events.extend(events(host, names, shapes))
    for key in ("steps", "applied", "skipped", "zeroed", "raised", "consecutive", "longest_run"):
        setattr(rec, key, int(host[key]))
    for i, name in enumerate(names):
        if int(host["bad_steps"][i]):
            rec.params[name] = ParamTotals(shapes[i], i, int(host["nan"][i]), int(host["inf"][i]),
                                           int(host["bad_steps"][i]), int(host["first"][i]), int(host["last"][i]))
    return rec
