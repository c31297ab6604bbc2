"""The state one ``nanguard.detect()`` object owns, shared by every activation of it.

A `detect` is entered once per ``with`` (and once per call of a decorated function, possibly
on several threads at once); each entry is an `Activation`. What outlives one activation and
is shared between them lives here, in one object the activations are given: the options, the
names the user gave to modules, the parameter-list cache, the backward-pass counter and the
first report, with the lock that guards the report.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch

from nanguard.core.report import Report


@dataclass(eq=False)
class Session:
    """Options and shared state of one ``detect()`` object."""

    check: frozenset
    mode: str
    exhaustive: bool
    names: Dict[int, tuple] = field(default_factory=dict)   # id(module) -> (weakref, name given)
    # module id -> (weakref, parameter list, backward count when listed); kept across activations
    # (a detection entered once per training step) so large models are walked rarely.
    params: Dict[int, tuple] = field(default_factory=dict)
    buffers: Dict[int, tuple] = field(default_factory=dict)   # the same for floating buffers
    backward_count: int = 0
    report: Optional[Report] = None
    active: int = 0                  # activations running now, on all threads
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ------------------------------------------------------------------ activations
    def open(self) -> None:
        """One activation starts; the first of a fresh use forgets the previous report."""
        with self.lock:
            if not self.active:
                self.report = None   # a fresh use (e.g. the next call of a decorated function)
            self.active += 1

    def close(self) -> None:
        with self.lock:
            self.active = max(0, self.active - 1)

    # ------------------------------------------------------------------ the report
    def keep(self, report: Report) -> bool:
        """Keep ``report`` unless one was kept already; True when it was kept."""
        with self.lock:
            if self.report is None:
                self.report = report
                return True
            return False

    def replace(self, old: Report, new: Report) -> None:
        """Put ``new`` in place of the kept ``old`` (a live finding completed by a replay)."""
        with self.lock:
            if self.report is old:
                self.report = new

    def set_report(self, report: Optional[Report]) -> None:
        with self.lock:
            self.report = report

    # ------------------------------------------------------------------ modules
    def given_name(self, root: torch.nn.Module) -> Optional[str]:
        """The name the user gave ``root`` with ``detect(modules=...)``, if any."""
        given = self.names.get(id(root))
        if given is not None and given[0]() is root and given[1]:
            return given[1]
        return None

    def count_backward(self) -> None:
        self.backward_count += 1

    def params_of(self, module: torch.nn.Module) -> List[torch.Tensor]:
        """``list(module.parameters())``, cached: walking a large model costs ~100 µs per step.

        Refreshed every 64 backward passes so that layers added to a model while detection is
        on are picked up (their gradients are still checked through the replay in between).
        """
        cache = self.params
        hit = cache.get(id(module))
        stamp = self.backward_count
        if hit is not None and hit[0]() is module and stamp - hit[2] < 64:
            return hit[1]
        params = list(module.parameters())
        try:
            cache[id(module)] = (weakref.ref(module), params, stamp)
        except TypeError:
            pass
        return params

    def buffers_of(self, module: torch.nn.Module) -> List[torch.Tensor]:
        """The floating-point buffers of ``module`` (running statistics...), cached like `params_of`."""
        cache = self.buffers
        hit = cache.get(id(module))
        stamp = self.backward_count
        if hit is not None and hit[0]() is module and stamp - hit[2] < 64:
            return hit[1]
        buffers = [b for b in module.buffers() if b.is_floating_point()]
        try:
            cache[id(module)] = (weakref.ref(module), buffers, stamp)
        except TypeError:
            pass
        return buffers

    def parameter_owners(self) -> List[torch.nn.Module]:
        """The outermost modules whose parameters were listed (to name a parameter in a report)."""
        return [m for m in (entry[0]() for entry in self.params.values()) if m is not None]
