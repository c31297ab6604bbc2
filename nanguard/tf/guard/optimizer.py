"""GuardedOptimizer: a Keras 3 optimizer wrapper that skips, zeroes or raises on a step with
NaN/Inf gradients, for custom training loops (eager or ``tf.function``) and ``model.fit``.

Built like Keras' own ``LossScaleOptimizer`` (the precedent for a wrapper that skips steps):
the verdict is computed in replica context and all-reduced (`checks.py`), then one
``tf.cond`` applies the inner optimizer, applies it to zeroed gradients, or records the bad
step and leaves every variable alone (`counters.py`). On strategies that need a merge call
(MirroredStrategy on CPUs) the ``tf.cond`` runs in cross-replica context and the inner
optimizer is called for each replica, exactly as ``LossScaleOptimizer`` does.

A raise ("raise", or the ``max_consecutive``-th bad step in a row) must reach the user
however the step runs, or a run whose every gradient is NaN skips forever in silence:

- eagerly, ``apply_gradients`` raises :class:`nanguard.NonFiniteError` at once;
- in a graph (``tf.function``, ``model.fit``), a ``tf.debugging.Assert`` fails the step with
  ``InvalidArgumentError`` whose message names the variables;
- under XLA (``jit_compile=True``), which drops assertions, the raise is left pending for
  :meth:`GuardedOptimizer.check`, which :class:`GuardCallback` calls after each ``fit``
  batch and ``fit`` itself calls when it ends; so is it when a ``GuardCallback`` is attached,
  to raise the NonFiniteError itself.

A pending raise freezes nothing: a later finite step is applied.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from nanguard.core.guard_policy import (
    DEFAULT_MAX_CONSECUTIVE,
    check_max_consecutive,
    check_max_events,
    check_policy,
    raise_message,
)
from nanguard.core.guard_records import GRADIENTS, GuardEvent, GuardRecords
from nanguard.errors import NonFiniteError
from nanguard.tf._compat import control_flow_util, strategy_supports_no_merge_call
from nanguard.tf.guard import checks
from nanguard.tf.guard.counters import RAISED, SKIPPED, ZEROED, Counters, events, records

try:  # the decorator Keras' own wrappers use, so the counters are not tracked twice
    from keras.src.utils.tracking import no_automatic_dependency_tracking
except ImportError:  # pragma: no cover - other Keras layouts
    def no_automatic_dependency_tracking(fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

OWNER = "nanguard.tf.GuardedOptimizer"


def _in_xla() -> bool:
    """Whether the graph being traced is compiled by XLA (``jit_compile=True``), which drops
    ``tf.debugging.Assert``."""
    if not control_flow_util:  # pragma: no cover - another TF layout: let the host deliver
        return True
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


@keras.saving.register_keras_serializable(package="nanguard")  # model.save / load_model keep the guard
class GuardedOptimizer(keras.optimizers.Optimizer):
    """Wraps a Keras optimizer so a step with NaN/Inf gradients is skipped, zeroed or raises.

    ``model.compile(optimizer=GuardedOptimizer(keras.optimizers.AdamW()))`` or, in a custom
    loop, ``opt.apply_gradients(zip(grads, model.trainable_variables))`` as usual:

    - ``"skip"`` (default): the inner optimizer is not called. Model variables, its slot
      variables (momentum, Adam's moments) and ``iterations`` stay bitwise as they were.
    - ``"zero"``: the non-finite gradient elements become 0 (finite ones keep their bits) and
      the inner optimizer steps. A stateful optimizer still moves those elements by momentum.
    - ``"raise"``: the step is skipped and :class:`nanguard.NonFiniteError` names the variables.
      Called eagerly, ``apply_gradients`` raises at once. Inside ``tf.function`` (and so in
      ``model.fit``) the step fails with ``InvalidArgumentError`` carrying the same facts;
      with :class:`nanguard.tf.GuardCallback` in ``fit`` the callback raises the
      NonFiniteError after the batch. Under XLA a graph cannot raise: :meth:`check` does
      (``GuardCallback`` calls it, and so does the end of ``fit``).

    The ``max_consecutive``-th bad step in a row raises the same way whatever the policy (None
    disables it). Under ``tf.distribute`` (MirroredStrategy) the verdict is all-reduced, so every
    replica skips or steps together; counts are summed over replicas. Counters are optimizer
    variables (they work in graphs and are saved in checkpoints); :attr:`records` and
    :meth:`summary` read them back.

    Args:
        inner_optimizer: the ``keras.optimizers.Optimizer`` to guard (SGD, Adam, AdamW, ...).
            Create both inside ``strategy.scope()`` when distributing.
        policy: ``"skip"``, ``"zero"`` or ``"raise"``.
        max_consecutive: bad steps in a row that raise (>= 1, or None). Default 25.
        max_events: how many individual bad steps are kept (counters cover the whole run).
        name: the optimizer's name.

    Example:
        >>> opt = nanguard.tf.GuardedOptimizer(keras.optimizers.Adam(1e-3))
        >>> model.compile(optimizer=opt, loss="mse")
        >>> model.fit(x, y, callbacks=[nanguard.tf.GuardCallback(opt)])
        >>> opt.records.skipped, opt.records.bad_steps
        (1, [23])
    """

    def __init__(self, inner_optimizer: keras.optimizers.Optimizer, policy: str = "skip",
                 max_consecutive: Optional[int] = DEFAULT_MAX_CONSECUTIVE, *, max_events: int = 100,
                 name: Optional[str] = None, **kwargs: Any) -> None:
        if not isinstance(inner_optimizer, keras.optimizers.Optimizer):
            raise TypeError(f"{OWNER}: `inner_optimizer` must be a keras.optimizers.Optimizer "
                            f"(e.g. keras.optimizers.Adam()), got {type(inner_optimizer).__name__}")
        if isinstance(inner_optimizer, (GuardedOptimizer, keras.optimizers.LossScaleOptimizer)):
            raise ValueError(f"{OWNER}: cannot wrap a {type(inner_optimizer).__name__}; for mixed precision "
                             f"wrap the other way round: LossScaleOptimizer(GuardedOptimizer(Adam())), so the "
                             f"loss scale still backs off on its own overflows")
        policy = check_policy(policy, OWNER)
        max_consecutive = check_max_consecutive(max_consecutive, OWNER)
        max_events = check_max_events(max_events, OWNER)
        kwargs.pop("learning_rate", None)  # from_config of a saved model
        if kwargs:
            raise ValueError(f"{OWNER}: unexpected arguments {sorted(kwargs)}; optimizer options such as "
                             f"clipnorm or weight_decay belong on the inner optimizer")
        super().__init__(learning_rate=0.0, name=name)
        self.inner_optimizer = inner_optimizer
        self.policy = policy
        self.max_consecutive = max_consecutive
        self.max_events = max_events
        self._host_checks = False  # a GuardCallback calls check() after every fit batch

    # -- Keras optimizer protocol ----------------------------------------------------------
    @no_automatic_dependency_tracking
    def build(self, var_list: Sequence[Any]) -> None:
        var_list = list(var_list)
        self._names: List[str] = [getattr(v, "path", None) or v.name for v in var_list]
        self._shapes = [tuple(int(d) for d in v.shape) for v in var_list]
        replicas = self._distribution_strategy.num_replicas_in_sync
        self._counters = Counters(self.add_variable, len(var_list), replicas, self.max_events)
        self.inner_optimizer.build(var_list)
        super().build(var_list)

    @property
    def variables(self) -> List[Any]:
        return self._variables + self.inner_optimizer.variables

    @property
    def learning_rate(self) -> Any:
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate: Any) -> None:
        if hasattr(self, "inner_optimizer"):  # Optimizer.__init__ sets it before the inner exists
            self.inner_optimizer.learning_rate = learning_rate

    @property
    def iterations(self) -> Any:
        return self.inner_optimizer.iterations

    def scale_loss(self, loss: Any) -> Any:
        return self.inner_optimizer.scale_loss(loss)

    def finalize_variable_values(self, var_list: Sequence[Any]) -> None:
        self.inner_optimizer.finalize_variable_values(var_list)
        if tf.executing_eagerly():  # the end of fit: a raise XLA could not deliver
            self.check()

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "inner_optimizer": keras.saving.serialize_keras_object(self.inner_optimizer),
                "policy": self.policy, "max_consecutive": self.max_consecutive, "max_events": self.max_events}

    @classmethod
    def from_config(cls, config: Dict[str, Any], custom_objects: Any = None) -> "GuardedOptimizer":
        config = dict(config)
        inner = keras.saving.deserialize_keras_object(config.pop("inner_optimizer"), custom_objects=custom_objects)
        return cls(inner, **config)

    def apply(self, grads: Sequence[Any], trainable_variables: Optional[Sequence[Any]] = None) -> None:
        """Check, then apply, zero or skip (`apply_gradients` calls this)."""
        grads = list(grads)
        if trainable_variables is None and not self.built:
            raise ValueError(f"{OWNER}: pass the variables with the first gradients (apply_gradients(zip(grads, "
                             f"vars))) or call build(variables) first")
        if not self.built:
            # outside any graph being traced: the counters are read by the tf.cond of this very
            # step, which tf.function's lifting of first-call variables cannot do under MirroredStrategy
            with tf.init_scope(), keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
            self.built = True
        tvs = list(trainable_variables) if trainable_variables is not None else list(self._trainable_variables)
        if len(grads) != len(tvs):
            raise ValueError(f"{OWNER}: got {len(grads)} gradients for {len(tvs)} variables")
        try:
            positions = [self._get_variable_index(v) for v in tvs]
        except KeyError:
            raise ValueError(f"{OWNER}: a variable was not among those the optimizer was built with "
                             f"({len(self._names)} variables, first {self._names[:3]})") from None
        if tf.distribute.has_strategy() and tf.distribute.in_cross_replica_context():
            raise ValueError(f"{OWNER}: apply_gradients() must be called in a replica context "
                             f"(inside strategy.run), as for any Keras optimizer")
        n = len(self._names)
        in_graph = self._raises_in_graph()
        with keras.name_scope(self.name, caller=self):
            verdict = checks.agree(*checks.local_verdict(grads, positions, n))
            if strategy_supports_no_merge_call():
                self._act(verdict, grads, tvs, None, in_graph)
            else:
                def cross_replica(distribution: Any, verdict: Any, grads: Any, tvs: Any) -> None:
                    # every replica's vector is the same (all-reduced): read the first
                    self._act(distribution.experimental_local_results(verdict)[0], grads, tvs, distribution,
                              in_graph)

                tf.distribute.get_replica_context().merge_call(cross_replica, args=(verdict, grads, tvs))
        if tf.executing_eagerly() and not tf.distribute.has_strategy():
            self.check()  # eager: a pending raise is delivered at once

    # -- the decision, in the traced step --------------------------------------------------
    def _raises_in_graph(self) -> bool:
        """Whether a raise of this step is a failing ``tf.debugging.Assert`` rather than left
        pending for :meth:`check` (see the module docstring); decided when the step is traced."""
        if tf.executing_eagerly() and not tf.distribute.has_strategy():
            return False  # apply() calls check() right after the step
        return not self._host_checks and not _in_xla()

    def _act(self, verdict: tf.Tensor, grads: List[Any], tvs: List[Any], distribution: Any,
             in_graph: bool) -> None:
        c = self._counters
        replicas = int(verdict.shape[0]) - 2 * len(self._names)
        flags = tf.cast(verdict[:replicas], tf.int64)
        found = tf.reshape(tf.cast(verdict[replicas:], tf.int64), [-1, 2])
        bad = tf.reduce_sum(flags) > 0

        def inner_apply(transform: Callable[[Any], Any]) -> None:
            def per_replica(g: Sequence[Any], v: Sequence[Any]) -> None:
                self.inner_optimizer.apply([transform(x) for x in g], v)

            if distribution is None:
                per_replica(grads, tvs)
            else:
                distribution.extended.call_for_each_replica(per_replica, args=(grads, tvs))

        def finite() -> None:
            inner_apply(lambda g: g)
            c.finite_step()

        def not_finite() -> None:
            run = c.scalars["consecutive"] + 1
            step = c.scalars["steps"] + 1
            limit = (run >= self.max_consecutive) if self.max_consecutive is not None else tf.constant(False)
            raise_now = tf.constant(True) if self.policy == "raise" else limit
            zero_now = tf.logical_not(raise_now) if self.policy == "zero" else tf.constant(False)
            action = tf.where(raise_now, tf.constant(RAISED, tf.int64),
                              tf.where(zero_now, tf.constant(ZEROED, tf.int64), tf.constant(SKIPPED, tf.int64)))
            if self.policy == "zero":
                tf.cond(zero_now, lambda: inner_apply(checks.zero_nonfinite), lambda: None)
            c.bad_step(run, limit, action, found, flags, pending=not in_graph)
            if in_graph:  # recorded first: the counters keep the step that raised
                tf.cond(raise_now, lambda: self._fail(step, run, found, flags), lambda: None)

        tf.cond(bad, not_finite, finite)

    def _fail(self, step: tf.Tensor, run: tf.Tensor, found: tf.Tensor, flags: tf.Tensor) -> None:
        """Fail the traced step with the facts of :func:`raise_message`'s first lines (names
        and counts are only known in the graph, so the message is built there)."""
        numel = tf.constant([int(np.prod(shape)) for shape in self._shapes], tf.int64)
        each = tf.strings.join([tf.constant(self._names), " (", tf.strings.as_string(found[:, 0]), " NaN, ",
                                tf.strings.as_string(found[:, 1]), " Inf of ", tf.strings.as_string(numel), ")"])
        hit = tf.reduce_sum(found, axis=-1) > 0
        where = tf.strings.reduce_join(tf.reverse(tf.boolean_mask(each, hit), [0]), separator=", ")  # output side first
        ranks = ""
        if int(flags.shape[0]) > 1:
            bad_ranks = tf.strings.as_string(tf.reshape(tf.where(flags > 0), [-1]))
            ranks = tf.strings.join([" on rank ", tf.strings.reduce_join(bad_ranks, separator=", ")])
        event = tf.strings.join(["step ", tf.strings.as_string(step), ": non-finite gradients in ", where, ranks,
                                 " -> raised"])
        if self.policy == "raise":
            head = tf.strings.join(["nanguard: ", event, " (policy 'raise')"])
        else:
            doing = "skipping" if self.policy == "skip" else "zeroing"
            head = tf.strings.join(["nanguard: ", tf.strings.as_string(run), " bad steps in a row (max_consecutive=",
                                    str(self.max_consecutive), f"); stopping instead of {doing} forever. Last: ",
                                    event])
        # one line: TF prints a string tensor's newlines as \n
        message = tf.strings.join([head, ". Variables and optimizer state were left untouched by this step; "
                                   f"{OWNER}.summary() has the whole record."])
        tf.debugging.Assert(tf.constant(False), [message])

    # -- host side --------------------------------------------------------------------------
    @property
    def records(self) -> GuardRecords:
        """What the guard counted (reads the counter variables): ``.skipped``, ``.bad_steps``,
        ``.params`` per variable path, ``.summary()``."""
        self._require_built("records")
        return records(self._counters.read(), self._names, self._shapes, self.policy, self.max_consecutive)

    def summary(self) -> str:
        """A readable table: steps applied/skipped/zeroed, bad step numbers, and per variable how
        many NaN/Inf elements it had, in how many steps, first and last.

        Example:
            >>> print(opt.summary())
            nanguard GuardedOptimizer (policy 'skip'): 40 steps, 39 applied, 1 skipped, 0 zeroed
            ...
        """
        return self.records.summary()

    def check(self) -> None:
        """Raise :class:`nanguard.NonFiniteError` if a "raise" (or ``max_consecutive``) is pending.

        Under XLA the step cannot raise; this host call delivers the error (and clears it, so
        training can go on if you catch it). Reads one scalar when nothing is pending.
        :class:`GuardCallback` calls it for ``model.fit``; call it in a ``jit_compile`` loop.

        Example:
            >>> train_step(x, y)      # a tf.function calling opt.apply_gradients
            >>> opt.check()           # raises after a bad step under policy "raise"
        """
        if not self.built or self._read_counter("halted") == 0:
            return
        host = self._counters.read()
        rec = records(host, self._names, self._shapes, self.policy, self.max_consecutive)
        step = int(host["halted"])
        event = next((e for e in reversed(events(host, self._names, self._shapes)) if e.step == step),
                     GuardEvent(step=step, kind=GRADIENTS, action="raised"))
        run = int(host["halted_by_limit"])  # the streak that reached the limit, 0 if none did
        message = raise_message(event, bool(run), self.policy, self.max_consecutive, rec, what="variables",
                                run=run or None)
        self._counters.clear_halt()
        raise NonFiniteError(message, report=rec)

    def _read_counter(self, name: str) -> int:
        """One counter (a scalar of `counters.SCALARS`), read on the host: one small copy."""
        return int(self._counters.scalars[name].numpy())

    def _require_built(self, what: str) -> None:
        if not self.built:
            raise ValueError(f"{OWNER}.{what}: the optimizer has not taken a step yet (it is built on the first "
                             f"apply_gradients, or by model.fit/compile)")
