"""Per-thread state and the three global hooks detection needs while it is active.

* ``nn.Module.__call__`` is wrapped so the *outermost* module call is one coarse, replayable
  unit (its output checked, its inputs and RNG state taped) and the op-level mode is out of the
  way inside it (default mode) or told the module path (exhaustive mode).
* ``torch.autograd._engine_run_backward`` (the one funnel of ``backward()`` and
  ``autograd.grad``; PyTorch patches it the same way in ``torch.compiler``) is wrapped so each
  backward pass is checked once at the end, and replayed under the op-level check on a finding.
* Global optimizer step hooks take the optimizer's hundreds of small in-place ops out of the
  default mode's path and check the parameters once after the step.
* ``GradScaler.scale`` marks scaled losses (`scaled.py`) and torch's ``ExceptionWrapper``
  carries a DataLoader worker's report to the main process (`workers.py`).

Every hook consults a thread-local stack of active detections and does nothing on threads
without one; they are installed when the first detection starts and removed with the last.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, List, Optional, TypeVar

import torch
import torch.autograd
import torch.autograd.graph
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from nanguard.torch._compat import ENGINE_RUN_BACKWARD_SITES, dynamo_disable, engine_run_backward
from nanguard.torch.detector import scaled, workers


class ThreadState(threading.local):
    def __init__(self) -> None:
        self.stack: List[Any] = []      # active Activation objects, innermost last
        self.depth = 0                  # module-call nesting seen by the wrapper
        self.modules: List[torch.nn.Module] = []   # module stack (exhaustive mode and replays)
        self.replay: Optional[Any] = None          # the Replay in progress on this thread
        self.in_backward = 0
        self.in_optimizer = 0
        # False while nothing needs to see module calls (no detection, or inside an outermost
        # module call in the default mode): the wrapper then costs one attribute read.
        self.watch = False

    # Every change of these fields is one of the scopes below, so that each is undone on every
    # way out of its block, exceptions included.
    def outermost(self, module: torch.nn.Module, watch: bool) -> "_Outermost":
        """``with STATE.outermost(module, watch):`` around an outermost module call."""
        return _Outermost(self, module, watch)

    def nested(self, module: Optional[torch.nn.Module]) -> "_Nested":
        """Around a module call inside another (``module`` joins the module stack unless None)."""
        return _Nested(self, module)

    def backward(self) -> "_Backward":
        """Around a backward pass run by the engine."""
        return _Backward(self)

    def optimizer_step(self) -> "_OptimizerStep":
        """Between an optimizer step's pre and post hooks."""
        return _OptimizerStep(self)

    def replaying(self, replay: Any) -> "_Replaying":
        """While ``replay`` re-runs recorded calls: module calls go to it, the rest is saved."""
        return _Replaying(self, replay)


class _Outermost:
    __slots__ = ("module", "saved", "st", "watch")

    def __init__(self, st: ThreadState, module: torch.nn.Module, watch: bool) -> None:
        self.st, self.module, self.watch = st, module, watch

    def __enter__(self) -> None:
        st = self.st
        self.saved = (st.depth, st.watch)
        st.depth = 1
        st.modules.append(self.module)
        st.watch = self.watch

    def __exit__(self, *exc: object) -> None:
        st = self.st
        st.depth, st.watch = self.saved
        st.modules.pop()


class _Nested:
    __slots__ = ("module", "st")

    def __init__(self, st: ThreadState, module: Optional[torch.nn.Module]) -> None:
        self.st, self.module = st, module

    def __enter__(self) -> None:
        st = self.st
        st.depth += 1
        if self.module is not None:
            st.modules.append(self.module)

    def __exit__(self, *exc: object) -> None:
        st = self.st
        st.depth -= 1
        if self.module is not None:
            st.modules.pop()


class _Backward:
    __slots__ = ("st",)

    def __init__(self, st: ThreadState) -> None:
        self.st = st

    def __enter__(self) -> None:
        self.st.in_backward += 1

    def __exit__(self, *exc: object) -> None:
        self.st.in_backward -= 1


class _OptimizerStep:
    """Entered by the step's pre hook and left by its post hook, or, when the step raised and
    its post hook never ran, when the detection ends."""

    __slots__ = ("open", "st")

    def __init__(self, st: ThreadState) -> None:
        self.st = st
        self.open = False

    def __enter__(self) -> "_OptimizerStep":
        self.st.in_optimizer += 1
        self.open = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.open:
            self.open = False
            self.st.in_optimizer = max(0, self.st.in_optimizer - 1)


class _Replaying:
    __slots__ = ("replay", "saved", "st")

    def __init__(self, st: ThreadState, replay: Any) -> None:
        self.st, self.replay = st, replay

    def __enter__(self) -> None:
        st = self.st
        self.saved = (st.replay, st.depth, st.modules, st.watch)
        st.replay = self.replay
        st.watch = True

    def __exit__(self, *exc: object) -> None:
        st = self.st
        st.replay, st.depth, st.modules, st.watch = self.saved


STATE = ThreadState()
_F = TypeVar("_F", bound=Callable[..., Any])


def no_compile(fn: _F) -> _F:
    """Run ``fn`` (and what it calls) with TorchDynamo off.

    While detection runs a hook (an outermost module call, a backward pass, a replay), the
    frames it executes must stay eager: dynamo would otherwise try to compile nanguard's own
    helpers when they run inside a ``torch.compile``'d function. Explicitly compiled modules
    and functions called inside still run compiled. Dynamo is imported on first use (the
    dispatch modes import it anyway).
    """
    disabled: Optional[Callable[..., Any]] = None

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        nonlocal disabled
        if disabled is None:
            disable = dynamo_disable()
            # a torch without dynamo: nothing to turn off
            disabled = fn if disable is None else disable(fn, recursive=True)
        return disabled(*args, **kwargs)

    return inner  # type: ignore[return-value]

_ORIG_MODULE_CALL: Callable[..., Any] = torch.nn.Module.__call__
_ORIG_ENGINE: Optional[Callable[..., Any]] = engine_run_backward
_LOCK = threading.Lock()
_USERS = 0
_HANDLES: List[Any] = []
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


def orig_module_call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    return _ORIG_MODULE_CALL(module, *args, **kwargs)


def _module_call(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    # Checked first so that torch.compile traces straight through to the original.
    if _is_compiling():
        return _ORIG_MODULE_CALL(self, *args, **kwargs)
    st = STATE
    if not st.watch:
        return _ORIG_MODULE_CALL(self, *args, **kwargs)
    if st.replay is not None:
        return st.replay.module_call(self, args, kwargs)
    if not st.stack:
        return _ORIG_MODULE_CALL(self, *args, **kwargs)
    act = st.stack[-1]
    try:
        return act.module_call(self, args, kwargs)
    except Exception as exc:
        raise _trimmed(exc)
    finally:
        if act.tripped:
            act.maybe_retire()


def _engine_run_backward(outputs: Any, *args: Any, **kwargs: Any) -> Any:
    st = STATE
    if st.replay is not None or not st.stack or _is_compiling():
        return _ORIG_ENGINE(outputs, *args, **kwargs)
    act = st.stack[-1]
    try:
        return act.run_backward(_ORIG_ENGINE, outputs, args, kwargs)
    except Exception as exc:
        raise _trimmed(exc)
    finally:
        if act.tripped:
            act.maybe_retire()


def _trimmed(exc: BaseException) -> BaseException:
    """A detection's own NonFiniteError without nanguard's internal frames in its traceback
    (the report already says where); any other exception is passed on untouched."""
    from nanguard.core.report import Report
    from nanguard.errors import NonFiniteError
    if isinstance(exc, NonFiniteError) and isinstance(exc.report, Report):
        return exc.with_traceback(None)
    return exc


def _opt_pre(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    st = STATE
    if st.stack and st.replay is None:
        st.stack[-1].optimizer_pre(optimizer)


def _opt_post(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    st = STATE
    if st.stack and st.replay is None:
        act = st.stack[-1]
        act.optimizer_post(optimizer)
        if act.tripped:
            act.maybe_retire()


def acquire() -> None:
    """Install the hooks when the first detection starts.

    They then stay installed for the life of the process: re-assigning ``nn.Module.__call__``
    invalidates Python's attribute cache for every module class (about half a millisecond),
    which a detection entered once per training step would pay twice per step. Installed but
    idle, the hooks cost one thread-local lookup per module call or backward pass.
    """
    global _USERS
    with _LOCK:
        _USERS += 1
        if _HANDLES:
            return
        torch.nn.Module.__call__ = _module_call  # type: ignore[method-assign]
        if _ORIG_ENGINE is not None:
            for owner, attr in ENGINE_RUN_BACKWARD_SITES:
                setattr(owner, attr, _engine_run_backward)
        _HANDLES.append(register_optimizer_step_pre_hook(_opt_pre))
        _HANDLES.append(register_optimizer_step_post_hook(_opt_post))
        scaled.install()
        workers.install()


def release() -> None:
    """One detection ended (the hooks stay, idle; see `acquire`)."""
    global _USERS
    with _LOCK:
        _USERS = max(0, _USERS - 1)


def uninstall() -> None:
    """Remove the hooks now (for tests, or a program that wants torch exactly as it was).

    Refused while a detection is active. Leaves alone any patch someone installed on top.
    """
    with _LOCK:
        if _USERS:
            raise RuntimeError("nanguard: cannot uninstall the detection hooks while a detection is active")
        if torch.nn.Module.__call__ is _module_call:
            torch.nn.Module.__call__ = _ORIG_MODULE_CALL  # type: ignore[method-assign]
        if _ORIG_ENGINE is not None:
            for owner, attr in ENGINE_RUN_BACKWARD_SITES:
                if getattr(owner, attr, None) is _engine_run_backward:
                    setattr(owner, attr, _ORIG_ENGINE)
        while _HANDLES:
            _HANDLES.pop().remove()
        scaled.uninstall()
        workers.uninstall()


def engine_hooked() -> bool:
    """Whether backward passes go through `Activation.run_backward` (torch >= 2.3)."""
    return _ORIG_ENGINE is not None


# ---------------------------------------------------------------------------------- RNG
def capture_rng() -> tuple:
    """CPU generator state plus every initialised CUDA device's (cheap: ~1 µs on CPU)."""
    cuda = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda = torch.cuda.get_rng_state_all()
    return (torch.get_rng_state(), cuda)


def restore_rng(state: tuple) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


# ------------------------------------------------------------------------------ autocast
_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> Optional[tuple]:
    """The enabled autocast regions (device, dtype), or None when autocast is off (the usual case)."""
    out = []
    for device in _AUTOCAST_DEVICES:
        try:
            if torch.is_autocast_enabled(device):
                out.append((device, torch.get_autocast_dtype(device)))
        except (TypeError, RuntimeError, AttributeError):  # older torch spells it differently
            continue
    return tuple(out) or None


def in_autocast() -> bool:
    """Whether the caller runs inside a ``torch.autocast`` region (a replay re-enters the region
    of the call it replays). Read from autocast's nesting count: inside an op's dispatch, where
    findings are made, ``torch.is_autocast_enabled`` answers False (autocast excludes itself
    there). A region entered with ``enabled=False`` counts too: the program uses autocast."""
    try:
        depth = torch.autocast_increment_nesting()
        torch.autocast_decrement_nesting()
    except (AttributeError, RuntimeError):  # a torch without them: autocast is not seen
        return False
    return depth > 1


class autocast_context:
    """Re-enter the autocast regions a call was made under (a no-op for None)."""

    def __init__(self, state: Optional[tuple]) -> None:
        self.managers = [torch.autocast(device, dtype=dtype) for device, dtype in (state or ())]

    def __enter__(self) -> None:
        for m in self.managers:
            m.__enter__()

    def __exit__(self, *exc: object) -> None:
        for m in reversed(self.managers):
            m.__exit__(*exc)
