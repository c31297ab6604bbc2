"""One active detection on one thread: its lifecycle, and the live mode's on/off scopes.

``with nanguard.detect():`` starts an `Activation` on the entering thread: it puts the live
op-level mode (`live.py`) on the dispatch stack, joins the thread's stack of detections (the
global hooks of `_state.py` call the innermost one) and, when the block ends, takes all of it
away again. The checks themselves are the boundaries (`boundaries.py`: outermost module
calls, backward passes, optimizer steps) and the live mode; a finding goes to `finish`
(raise, warn or record). Everything shared with other activations of the same ``detect()``
is its `Session`.

The live mode is taken off the dispatch stack only inside a scope: ``with act.suspended():``
or ``with act.replaying():``, each undone on every way out, exceptions included.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterator, Optional

import torch

from nanguard.core.report import NonFiniteWarning, Report
from nanguard.torch._compat import dispatch_stack_at, dispatch_stack_len, dispatch_stack_pop, dispatch_stack_push
from nanguard.errors import NonFiniteError
from nanguard.torch.detector import _state, compiled
from nanguard.torch.detector._state import STATE
from nanguard.torch.detector.boundaries import BackwardBoundary, ModuleBoundary, OptimizerBoundary
from nanguard.torch.detector.build import OptimizerContext
from nanguard.torch.detector.frames import is_internal
from nanguard.torch.detector.live import LiveMode
from nanguard.torch.detector.naming import Naming
from nanguard.torch.detector.persistent import PersistentChecks
from nanguard.torch.detector.session import Session
from nanguard.torch.detector.tape import Tape

_stack_len = dispatch_stack_len
_stack_at = dispatch_stack_at
_stack_pop = dispatch_stack_pop
_stack_push = dispatch_stack_push


class Activation:
    """One ``with detect():`` on one thread: its live mode, tape, boundaries and names."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.check = session.check
        self.exhaustive = session.exhaustive
        self.mode = session.mode
        self.tape = Tape()
        self.naming = Naming(session)
        self.live = LiveMode(self)
        self.live_on = False            # pushed on the dispatch stack by start()
        self.tripped = False            # a finding was made; stop checking
        self._reported = False
        self._replays = 0
        self._outer: Optional[_Suspension] = None   # the enclosing detection's live mode, set aside
        self._watch_before = False
        self.modules = ModuleBoundary(self)
        self.backward = BackwardBoundary(self)
        self.optimizer = OptimizerBoundary(self)
        self.persistent = PersistentChecks(self)
        # What the global hooks call, bound once (no extra call per hook).
        self.module_call = self.modules.call
        self.run_backward = self.backward.run
        self.optimizer_pre = self.optimizer.pre
        self.optimizer_post = self.optimizer.post

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Activation":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        _state.acquire()
        compiled.force_eager()   # released in stop(); see compiled.py
        st = STATE
        try:
            if st.stack:
                outer = st.stack[-1].suspended()
                outer.__enter__()
                self._outer = outer
            st.stack.append(self)
            self._watch_before = st.watch
            st.watch = True
            self.live.__enter__()
            self.live_on = True
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        st = STATE
        try:
            self.optimizer.close()   # a step that raised never ran its post hook
            self._remove_live()
        finally:
            if self in st.stack:
                st.stack.remove(self)
            outer, self._outer = self._outer, None
            if outer is not None and outer.act in st.stack:
                outer.__exit__(None, None, None)
            self.tape.clear()
            st.depth = 0
            st.modules = []
            st.watch = self._watch_before if st.stack else st.replay is not None
            _state.release()
            compiled.release()

    def _remove_live(self) -> None:
        if not self.live_on:
            return
        self.live_on = False
        n = _stack_len()
        idx = next((i for i in range(n - 1, -1, -1) if _stack_at(i) is self.live), None)
        above = []
        if idx is None:
            _stack_push(self.live)   # suspended when the context ended: let __exit__ pop it
        else:
            for _ in range(n - 1 - idx):
                above.append(_stack_pop(None))
        try:
            self.live.__exit__(None, None, None)
        finally:
            for m in reversed(above):
                _stack_push(m)

    def maybe_retire(self) -> None:
        """After a finding in warn/record mode, take the live mode away for good (cheap again).

        Called only from the hooks' outermost level: a permanent pop inside a function that
        TorchDynamo wraps (our `no_compile` hooks) would be undone by its dispatch-key guard.
        Not inside ``torch.inference_mode()`` either: its guard saves the thread's dispatch
        keys on entry and puts them back on exit, so emptying the mode stack inside it would
        leave the Python key on with no mode to serve it, and every later op (``torch.empty``,
        ``nn.Linear(...)``) would hit PyTorch's internal assert. The idle live mode stays until
        a hook runs outside the block (or the detection ends).
        """
        st = STATE
        if (self.tripped and self.live_on and st.replay is None and not st.depth and not st.in_backward
                and not st.in_optimizer and not torch.is_inference_mode_enabled()):
            n = _stack_len()
            if n and _stack_at(n - 1) is self.live:
                self._remove_live()

    # ------------------------------------------------------------------ live mode scopes
    def suspended(self, when: bool = True) -> "_Suspension":
        """``with act.suspended():`` the live mode is off the dispatch stack (if it is on top),
        so our own checks neither pass through it nor are judged by it. ``when=False``: a
        no-op (exhaustive mode keeps the live mode on inside modules and backward passes)."""
        return _Suspension(self, when)

    @contextlib.contextmanager
    def replaying(self) -> Iterator[None]:
        """While a replay re-runs recorded calls: the live mode is off the stack and, where
        something sits above it on the stack, ignores what reaches it."""
        self._replays += 1
        self.live.idle = True
        try:
            with self.suspended():
                yield
        finally:
            self._replays -= 1
            self.live.idle = self.tripped or self._replays > 0

    # ------------------------------------------------------------------ findings
    def trip(self) -> None:
        """Stop checking: a finding was made."""
        self.tripped = True
        self.live.idle = True

    def finish(self, report: Report) -> None:
        """Keep the first report and act on it according to ``mode``; stop checking."""
        self.trip()
        if self._reported:
            return
        self._reported = True
        self.session.keep(report)
        if self.mode == "raise":
            raise NonFiniteError(report.format(), report)
        if self.mode == "warn":
            warnings.warn(NonFiniteWarning(report.format(color=False)), stacklevel=_user_stacklevel())

    def step(self) -> Optional[int]:
        """1-based training step, once the program is known to be a training loop: an optimizer
        step has run (or is running). A first backward pass proves nothing: a one-shot
        ``loss.backward()`` would read "step 1 of the training loop"."""
        steps = self.optimizer.steps
        if steps or self.optimizer.running is not None:
            return steps + 1
        return None

    def optimizer_context(self) -> OptimizerContext:
        """What a report may need about optimizer steps (see `build.make_report`)."""
        return self.optimizer.context()


class _Suspension:
    __slots__ = ("act", "popped", "when")

    def __init__(self, act: Activation, when: bool) -> None:
        self.act = act
        self.when = when
        self.popped = False

    def __enter__(self) -> "_Suspension":
        act = self.act
        if self.when and act.live_on:
            n = _stack_len()
            if n and _stack_at(n - 1) is act.live:   # only when on top: nothing else moves
                _stack_pop(None)
                self.popped = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.popped:
            self.popped = False
            _stack_push(self.act.live)


def _user_stacklevel() -> int:
    """warnings.warn stacklevel that points at the innermost user frame."""
    f = sys._getframe(2)
    level = 2
    while f is not None and is_internal(f.f_code.co_filename):
        f = f.f_back
        level += 1
    return level
