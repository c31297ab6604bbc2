"""`nanguard.detect()`: the public context manager / decorator and its options.

How it works lives next door: `session.py` (what one ``detect()`` owns), `activation.py`
(one active detection on one thread: its lifecycle), `boundaries.py` (the coarse checks at
module, backward and optimizer boundaries), `live.py` (the op-level dispatch mode),
`replay.py` (localising a coarse finding by re-running it op by op), `tape.py` (what a replay
needs), `build.py` (the report), `naming.py` (module paths and parameter names).

Two ways of checking, one result:

* **default** (cheap enough to leave on): values are checked at coarse boundaries only: each
  aten op of top-level code (outside any module), the output of each *outermost* module call,
  and the gradients at the end of each backward pass. Nothing runs per op inside modules, the
  backward pass or the optimizer step. When a boundary sees a value that was *made*
  non-finite there, that unit is replayed under the op-level check to find the exact op,
  line and module; a parameter the optimizer step made non-finite is caught at its first
  use and blamed on that step.
* **exhaustive** (``exhaustive=True``): every aten op, forward, backward and optimizer, is
  checked as it runs. It also sees values that are made non-finite and then thrown away
  (inside a module, or in a backward branch that a mask zeroes).

In both, "made non-finite" follows one rule (`values.judge`): NaN where no input held NaN,
±Inf where every input was finite. A ``-inf`` mask that flows through softmax is not reported;
``log(0)`` is.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, Iterable, Mapping, Union

import torch

from nanguard.torch.detector._state import STATE
from nanguard.torch.detector.activation import Activation
from nanguard.torch.detector.session import Session
from nanguard.core.detect_api import DetectBase
from nanguard.core.options import Check, Kind, Mode, parse_check, parse_exhaustive, parse_mode
from nanguard.core.report import NonFiniteWarning

__all__ = ["detect", "NonFiniteWarning"]

def _parse_modules(modules: Any) -> Dict[int, tuple]:
    """{id(module): (weakref, name)} from a module, a {name: module} mapping, or a list."""
    if modules is None:
        return {}
    if isinstance(modules, torch.nn.Module):
        items = [(None, modules)]
    elif isinstance(modules, Mapping):
        items = list(modules.items())
    elif isinstance(modules, (list, tuple)):
        items = [(None, m) for m in modules]
    else:
        raise TypeError("nanguard.detect: modules must be an nn.Module, a {name: module} dict or a list "
                        f"of modules, got {type(modules).__name__}")
    out = {}
    for name, m in items:
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"nanguard.detect: modules must contain nn.Module objects, got {type(m).__name__}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"nanguard.detect: module names must be strings, got {name!r}")
        out[id(m)] = (weakref.ref(m), name)
    return out


class detect(DetectBase):
    """Raise at the first op, forward or backward, that turns finite values into NaN or ±Inf.

    Use it as a context manager or a decorator. It checks cheaply at coarse boundaries (each
    op of top-level code, each outermost module's output, each backward pass's gradients)
    and, once something is non-finite, replays the culprit under an op-level check to name
    the exact op, the user's line, the module path, the inputs and a fix. Numerics are
    untouched: outputs, gradients and the random stream are bitwise identical with and
    without it.

    Args:
        check: which values count: ``"nan"``, ``"inf"``, or ``"both"`` (default; ``"all"`` is the same).
        mode: ``"raise"`` (default) raises ``nanguard.NonFiniteError`` (a
            ``FloatingPointError``) carrying ``.report``; ``"warn"`` issues a
            ``NonFiniteWarning`` and goes on; ``"record"`` keeps the first report on
            ``.report`` and goes on. After the first finding, checking stops.
        modules: optional module(s) used to name module paths in reports: an ``nn.Module``,
            a ``{"model": model}`` dict, or a list. Without it, the outermost modules called
            are discovered and named after the variable that holds them.
        exhaustive: check every op as it runs (about 1.5x a training step instead of about
            1.03x); it also finds values made non-finite and then discarded, and the exact op
            inside an optimizer step.

    Deliberate infinities are not reported: a ``masked_fill(mask, float("-inf"))`` that
    flows into softmax and comes out finite is fine. ±Inf that an op *creates* from finite
    inputs (overflow, ``log(0)``, ``x/0``) is reported, and NaN wherever it first appears.
    A NaN already present in data the program feeds in is reported with phase ``"input"``
    at the line that first consumes it.

    Example:
        >>> x = torch.zeros(3, requires_grad=True)
        >>> with nanguard.detect():
        ...     torch.sqrt(x).sum().backward()
        Traceback (most recent call last):
        nanguard.errors.NonFiniteError: nanguard: first non-finite value (+Inf) — backward of sqrt ...
        >>> with nanguard.detect(mode="record") as d:
        ...     y = torch.log(torch.zeros(2))
        >>> d.report.phase, d.report.op, d.report.kind
        ('forward', 'aten.log.default', 'inf')

    Detection covers the thread that entered it (use one ``detect()`` per thread; the
    decorator form does that naturally). Under ``torch.compile`` the compiled region runs
    eagerly while detection is active (PyTorch does not compile under a dispatch mode), so
    it is checked like eager code; a module compiled *before* entering detection runs its
    kernels, is checked at its outputs and gradients, and a finding in it (forward or
    backward) is located by an eager replay (`compiled.py` says what that cannot see).
    """

    API = "nanguard.detect"

    def __init__(self, *, check: Union[Check, Iterable[Kind]] = "both", mode: Mode = "raise",
                 modules: Any = None, exhaustive: bool = False) -> None:
        self._session = Session(check=parse_check(check, self.API), mode=parse_mode(mode, self.API),
                                exhaustive=parse_exhaustive(exhaustive, self.API),
                                names=_parse_modules(modules))

    # The options and the report live in the session its activations share; unlike the other
    # backends', torch's options can also be changed between uses.
    @DetectBase.check.setter
    def check(self, value: Union[Check, Iterable[Kind]]) -> None:
        self._session.check = parse_check(value, self.API)

    @DetectBase.mode.setter
    def mode(self, value: Mode) -> None:
        self._session.mode = parse_mode(value, self.API)

    @DetectBase.exhaustive.setter
    def exhaustive(self, value: bool) -> None:
        self._session.exhaustive = parse_exhaustive(value, self.API)

    def __enter__(self) -> "detect":
        session = self._session
        session.open()
        try:
            Activation(session).start()
        except BaseException:
            session.close()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            for act in reversed(STATE.stack):
                if act.session is self._session:
                    act.stop()
                    break
        finally:
            self._session.close()
        return False
