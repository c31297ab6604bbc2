"""The seam in JAX's dispatch where every executed computation's outputs pass by.

JAX runs both a jitted function and an eager op (``jnp.log(x)`` is a one-primitive jit) as
a compiled computation. Cached calls take the C++ fast path, which calls a *post hook*
after each execution when one is set (the hook ``jax_debug_nans`` uses); first calls take
the Python path (``pjit._run_python_pjit``), which we wrap once. Both hand us the function,
its arguments and its outputs, so one observer sees every top-level computation, jitted or
eager, and nothing while JAX is tracing (then outputs are tracers).

The hook is set thread-locally while a detection is active on that thread and restored on
exit; ``busy`` keeps the detector's own computations (checks, replays) out of it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional

import jax
from jax.extend import core as jcore

from nanguard.jax._compat import api as _api
from nanguard.jax._compat import jit_primitive
from nanguard.jax._compat import pjit as _pjit

Observer = Callable[[Any, tuple, dict, Any], None]


class _Local(threading.local):
    def __init__(self) -> None:
        self.observers: List[Observer] = []
        self.saved: List[Any] = []
        self.busy = False


_LOCAL = _Local()
_INSTALL_LOCK = threading.Lock()
_ORIGINAL: Optional[Callable] = None


def _dispatch(fun: Any, args: tuple, kwargs: dict, outputs: Any) -> None:
    local = _LOCAL
    if local.busy or not local.observers:
        return
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(outputs)):
        return  # staged into a trace, not executed
    local.busy = True
    try:
        local.observers[-1](getattr(fun, "_fun", fun), args, kwargs or {}, outputs)
    finally:
        local.busy = False


def _post_hook(fun: Any, args: tuple, kwargs: dict, output: Any) -> None:
    _dispatch(fun, args, kwargs, output)


def _python_path(p: Any, args_flat: Any, fun: Callable, *rest: Any) -> Any:
    # rest ends with (args, kwargs); JAX 0.9.0 passed its jit_info before them
    result = _ORIGINAL(p, args_flat, fun, *rest)
    if _LOCAL.observers and not _LOCAL.busy:
        _dispatch(fun, rest[-2], rest[-1], result[0])
    return result


class EagerJit:
    """A ``jit`` equation run eagerly by a transformation (the transposed ``jit`` of an eager
    ``jax.grad``): JAX calls the primitive's impl directly, not a jitted function."""

    _eager_jit = True

    def __init__(self, closed: Any, name: str) -> None:
        self.closed = closed
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args: Any) -> Any:
        return jcore.jaxpr_as_fun(self.closed)(*args)


def _jit_impl(*args: Any, **params: Any) -> Any:
    outputs = _ORIGINAL_IMPL(*args, **params)
    if _LOCAL.observers and not _LOCAL.busy:
        _dispatch(EagerJit(params["jaxpr"], str(params.get("name", "jit"))), args, {}, outputs)
    return outputs


_ORIGINAL_IMPL: Optional[Callable] = None


def _install() -> None:
    global _ORIGINAL, _ORIGINAL_IMPL
    with _INSTALL_LOCK:
        if _ORIGINAL is None:
            _ORIGINAL = _pjit._run_python_pjit
            _pjit._run_python_pjit = _python_path
            _ORIGINAL_IMPL = jit_primitive.impl
            jit_primitive.impl = _jit_impl


def push(observer: Observer) -> None:
    """Start observing on this thread (nested detections: the innermost observes)."""
    _install()
    _LOCAL.saved.append(_api._post_hook_state.swap_local(_post_hook))
    _LOCAL.observers.append(observer)


def pop(observer: Observer) -> None:
    local = _LOCAL
    for i in range(len(local.observers) - 1, -1, -1):
        if local.observers[i] == observer:   # bound methods: equal, not identical
            del local.observers[i]
            saved = local.saved.pop(i)
            if not local.observers:
                _api._post_hook_state.set_local(saved)
            return


class quiet:
    """Keep the detector's own computations out of the hook (a replay, a check)."""

    def __enter__(self) -> None:
        self._was = _LOCAL.busy
        _LOCAL.busy = True

    def __exit__(self, *exc: Any) -> None:
        _LOCAL.busy = self._was


__all__ = ["EagerJit", "pop", "push", "quiet"]
