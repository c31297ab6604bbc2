"""What one ``nanguard.jax.detect()`` does with each computation JAX executes.

`Session.observe` is called (through `hooks`) with every top-level computation's function,
arguments and outputs. The cheap part, always: one fused check of the outputs. The rest only
after a non-finite output: a jitted function is replayed equation by equation (`replay`);
an eager op is judged by itself, or, when it runs inside ``jax.grad``/``value_and_grad``,
the whole differentiated call is replayed so that forward and backward are told apart.
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any, Dict, List, Optional, Tuple

import jax
import numpy as np

from nanguard.core.report import NonFiniteWarning, Report
from nanguard.jax._compat import source_info_util as _source_info
from nanguard.errors import NonFiniteError
from nanguard.jax.detector import eager
from nanguard.jax.detector.build import build
from nanguard.jax.detector.exhaustive import Checker
from nanguard.jax.detector.hooks import quiet
from nanguard.jax.detector.replay import Replay
from nanguard.jax.detector.values import INF, float_leaves, special_flags

_ARRAYS = (jax.Array, np.ndarray, np.generic)


def trace(program: Any, args: tuple, kwargs: dict) -> Tuple[Any, List[Any]]:
    """(closed jaxpr, array arguments) of ``program(*args, **kwargs)``; other arguments
    (Python numbers, strings, config objects) are held fixed, as ``static_argnums`` would."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    dynamic = [i for i, leaf in enumerate(leaves) if isinstance(leaf, _ARRAYS)]

    def fixed_program(*values: Any) -> Any:
        full = list(leaves)
        for i, v in zip(dynamic, values):
            full[i] = v
        a, k = jax.tree_util.tree_unflatten(tree, full)
        return program(*a, **k)

    values = [leaves[i] for i in dynamic]
    # a finding inside an eager backward pass runs while JAX attributes new equations to the
    # equation it is transposing; trace with a fresh source context so each keeps its own line
    saved = _source_info._source_info_context.context
    _source_info._source_info_context.context = _source_info.new_source_info()
    try:
        return jax.make_jaxpr(fixed_program)(*values), values
    finally:
        _source_info._source_info_context.context = saved


def _name(fun: Any) -> str:
    return getattr(fun, "__qualname__", None) or getattr(fun, "__name__", None) or type(fun).__name__


class Session:
    """Options, call counts and the first report of one ``detect()`` object."""

    def __init__(self, check: frozenset, mode: str, exhaustive: bool) -> None:
        self.check = check
        self.mode = mode
        self.exhaustive = exhaustive
        self.report: Optional[Report] = None
        self.calls: Dict[int, int] = {}
        self.deliberate: set = set()       # (function, pattern) whose non-finite outputs replay as deliberate
        self.replayed: set = set()         # eager grad calls already replayed
        self.checker = Checker(check)      # exhaustive: the compiled per-equation checks
        self.active = 0
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ activations
    def open(self) -> None:
        with self.lock:
            if not self.active:
                self.report = None
            self.active += 1

    def close(self) -> None:
        with self.lock:
            self.active = max(0, self.active - 1)

    def set_report(self, report: Optional[Report]) -> None:
        with self.lock:
            self.report = report

    # ------------------------------------------------------------------ the observer
    def observe(self, fun: Any, args: tuple, kwargs: dict, outputs: Any) -> None:
        if self.report is not None:
            return  # after the first finding, checking stops
        primitive = getattr(fun, "_apply_primitive", False)
        step = None
        if not primitive:
            calls = self.calls.get(id(fun), 0) + 1
            self.calls[id(fun)] = calls
            # the call count is a training step only once the function is called again: one
            # call of a jitted function is no loop ("step 1 of the training loop" would mislead)
            step = calls if calls > 1 else None
        leaves = float_leaves(outputs)
        if not leaves:
            return
        flags = special_flags(leaves)
        # a NaN output is looked into under check="inf" too: an inf made inside may have led to it
        bad = flags[:, 0] | (flags[:, 1] & (INF in self.check))
        if not bad.any():
            if self.exhaustive and not primitive and not getattr(fun, "_eager_jit", False):
                self._exhaustive_check(fun, args, kwargs, step)
            return
        if primitive or getattr(fun, "_eager_jit", False):
            # an eager op: inside an eager jax.grad the whole differentiated call is replayed
            report = eager.in_grad(self)
            if report is eager.NOT_IN_GRAD:
                report = (eager.judge_primitive(self, fun.__name__, args, outputs) if primitive
                          else self._replay_call(fun, args, kwargs, step, flags))
        else:
            report = self._replay_call(fun, args, kwargs, step, flags)
        if report is not None:
            self.found(report)

    def _exhaustive_check(self, fun: Any, args: tuple, kwargs: dict, step: Optional[int]) -> None:
        """Outputs finite: with ``exhaustive``, ask the compiled per-equation check whether a
        value was made non-finite and discarded on the way; if so, replay to name it."""
        if any(isinstance(x, jax.Array) and x.is_deleted() for x in jax.tree_util.tree_leaves((args, kwargs))):
            return
        with quiet():
            try:
                made = self.checker.any_made(fun, args, kwargs, trace)
            except Exception:  # noqa: BLE001  (a program the check cannot stage is checked at its outputs only)
                return
        if made:
            report = self.replay(fun, args, kwargs, step, _name(fun), expect=False, call_site=eager.live_site())
            if report is not None:
                self.found(report)

    def _replay_call(self, fun: Any, args: tuple, kwargs: dict, step: Optional[int],
                     flags: np.ndarray) -> Optional[Report]:
        """Replay a jitted call, unless the same outputs of the same function were found to be
        deliberate infinities before (a replay costs hundreds of steps)."""
        pattern = (id(fun), tuple(map(tuple, flags.tolist())))
        if pattern in self.deliberate:
            return None
        report = self.replay(fun, args, kwargs, step, _name(fun), call_site=eager.live_site())
        if report is None:
            self.deliberate.add(pattern)
        return report

    def replay(self, program: Any, args: tuple, kwargs: dict, step: Optional[int], label: str,
               expect: bool = True, call_site: Any = None) -> Optional[Report]:
        """Replay ``program(*args, **kwargs)`` equation by equation; the report, or None when
        only deliberate infinities were non-finite (or, ``expect=False``, nothing was)."""
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(x, jax.Array) and x.is_deleted() for x in leaves):
            return eager.unreplayable(label, "its arguments were donated (donate_argnums) and no longer exist; "
                                             "rerun without donation to localise the op", step)
        with quiet():
            try:
                closed, values = trace(program, args, kwargs)
                outcome = Replay(self.check, self.exhaustive).run(closed, values)
                report = build(outcome, step=step, program=f"{label}()", call_site=call_site)
            except Exception as error:  # noqa: BLE001  (the program ran; failing to replay must not hide it)
                return eager.unreplayable(label, f"replaying it failed ({type(error).__name__}: {error})", step)
        if report is None and (outcome.outputs_bad or not expect):
            return None
        if report is None:
            return eager.unreplayable(label, "the replay (op by op, without XLA's fusions) produced finite "
                                             "values: the compiled program rounds differently", step)
        return report

    def found(self, report: Report) -> None:
        with self.lock:
            if self.report is not None:
                return
            self.report = report
        if self.mode == "raise":
            raise NonFiniteError(report.format(), report)
        if self.mode == "warn":
            warnings.warn(NonFiniteWarning(report.format(color=False)), stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    from nanguard.jax.detector.frames import is_internal
    frame, level = sys._getframe(1), 1
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


__all__ = ["Session", "trace"]
