"""Gradient-explosion early warning: per-module gradient norms, watched for growth.

A gradient rarely jumps from 1 to inf in one step. Before it overflows it grows, usually
geometrically, for tens of steps, and it grows first in one place: the module nearest the
numerical trouble (a `log` of a shrinking value, a layer whose learning rate is too high).
The monitor keeps a bounded history of every module's gradient norm and warns, naming that
module, when a norm has grown more than `factor` times within `window` steps or crosses an
absolute `threshold`.

Growth is measured robustly: the median of the 3 newest norms against the median of the
oldest quarter of the window, so one noisy batch does not fire it; and it must reach a new
high for the module (above every norm it had before the window), so a converged run whose
tiny gradient noise climbs back up, still far below its early-training scale, stays quiet. The origin is the module
whose norm took off first (the start of its final run above a quarter of its log-rise);
when several took off in the same step, the explosion entered at the one nearest the loss
(the first to receive its gradient in the backward pass), and that one is named.

Growth slower than ``factor`` per ``window`` steps does not trip the window test; give a
``threshold`` (or a longer window) to catch a slow drift.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

import torch

from nanguard.torch.guard.params import ParamTable

TOTAL = "(total)"


class GradientGrowthWarning(RuntimeWarning):
    """A module's gradient norm is growing fast: a non-finite gradient is probably coming.

    The warning object carries the structured finding as ``.alert`` (a :class:`GrowthAlert`).
    """

    def __init__(self, message: str, alert: Optional["GrowthAlert"] = None) -> None:
        super().__init__(message)
        self.alert = alert


@dataclass(frozen=True)
class GrowthAlert:
    """One early warning: where the norm is growing now, and where the growth started."""

    step: int
    reason: str  # "growth" (factor within the window) or "threshold"
    module: str  # the module that tripped the test (largest growth)
    norm: float  # its current norm (median of the newest 3 steps)
    base: float  # its norm at the start of the window (median of the oldest quarter)
    origin: str  # the module whose norm took off first
    origin_step: int  # the step at which it took off
    growing: Tuple[Tuple[str, float], ...]  # every module growing ≥ sqrt(factor)×, with its factor
    window: int

    @property
    def ratio(self) -> float:
        return self.norm / self.base if self.base > 0 else math.inf

    def short(self) -> str:
        growth = (f"grew {self.ratio:.3g}x" if self.reason == "growth"
                  else f"crossed the threshold ({self.norm:.3g})")
        return (f"step {self.step}: gradient norm of `{self.module}` {growth}; growth started in "
                f"`{self.origin}` at step {self.origin_step}")

    def message(self) -> str:
        others = [f"`{n}` {r:.3g}x" for n, r in self.growing if n != self.origin][:4]
        lines = [
            f"nanguard: gradient norms are exploding (step {self.step}); a non-finite gradient "
            f"is likely soon.",
            f"  growth started in `{self.origin}` at step {self.origin_step}",
            f"  `{self.module}`: {self.base:.3g} -> {self.norm:.3g} ({self.ratio:.3g}x within "
            f"{self.window} steps)" if self.reason == "growth" else
            f"  `{self.module}`: norm {self.norm:.3g} crossed the threshold",
        ]
        if others:
            lines.append(f"  also growing: {', '.join(others)}")
        lines.append(
            "  look for a learning rate too high for that module, a log/div/exp of a value drifting "
            "toward its singularity, or a missing normalisation; clipping only hides it"
        )
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["growing"] = [list(g) for g in self.growing]
        d["ratio"] = self.ratio
        return d


class NormHistory:
    """Bounded per-step norms for plotting: when full, neighbouring rows merge (keeping the
    larger norm, so spikes survive) and the resolution halves. Memory stays
    ``capacity × columns`` for any run length."""

    def __init__(self, names: Sequence[str], capacity: int) -> None:
        self.names = list(names)
        self.capacity = capacity
        self.stride = 1
        self.rows: List[Tuple[int, List[float]]] = []
        self._pending: Optional[Tuple[int, List[float]]] = None
        self._pending_n = 0
        self.bad_steps: Deque[int] = deque(maxlen=capacity)

    @staticmethod
    def _merge(a: List[float], b: List[float]) -> List[float]:
        return [y if (x != x or (y == y and y > x)) else x for x, y in zip(a, b)]

    def add(self, step: int, values: List[float], bad: bool = False) -> None:
        if bad:
            self.bad_steps.append(step)
        if self._pending is None:
            self._pending = (step, values)
        else:
            self._pending = (step, self._merge(self._pending[1], values))
        self._pending_n += 1
        if self._pending_n >= self.stride:
            self.rows.append(self._pending)
            self._pending, self._pending_n = None, 0
        if len(self.rows) >= self.capacity:
            self.rows = [(self.rows[i + 1][0], self._merge(self.rows[i][1], self.rows[i + 1][1]))
                         for i in range(0, len(self.rows) - 1, 2)]
            self.stride *= 2

    def series(self) -> Tuple[List[int], Dict[str, List[float]]]:
        rows = self.rows + ([self._pending] if self._pending is not None else [])
        steps = [s for s, _ in rows]
        return steps, {n: [r[1][k] for r in rows] for k, n in enumerate(self.names)}


def _positive_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"nanguard.GradNormMonitor: `{name}` must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"nanguard.GradNormMonitor: `{name}` must be >= {minimum}, got {value}")
    return value


class GradNormMonitor:
    """Watches per-module gradient norms and warns before they overflow.

    Pass it to a guard (``GradGuard(opt, model=model, monitor=GradNormMonitor(...))``, or
    ``monitor=True`` for the defaults); the guard feeds it the norms its finiteness check
    already computed, so monitoring adds no pass over the gradients.

    Args:
        window: steps over which growth is measured (>= 8). No growth warning is given
            before the first `window` steps have been seen.
        factor: warn when a module's norm grew more than this many times within `window`.
        threshold: also warn when any module's norm exceeds this absolute value (None: off).
        history: rows kept for :meth:`GradGuard.plot`; older rows are merged, not dropped.
        depth: group parameters into modules by the first `depth` name components
            (``None``: the module owning each parameter; ``1``: top-level children).
        warn: emit a :class:`GradientGrowthWarning` (otherwise only record the alert).

    Example:
        >>> guard = nanguard.GradGuard(opt, model=model, monitor=nanguard.GradNormMonitor(factor=20))
        >>> ...  # training; a GradientGrowthWarning names the module where growth started
        >>> guard.alerts[-1].origin
        'decoder.head'
    """

    def __init__(self, window: int = 50, factor: float = 10.0, threshold: Optional[float] = None,
                 history: int = 2048, depth: Optional[int] = None, warn: bool = True) -> None:
        self.window = _positive_int(window, "window", 8)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise TypeError(f"nanguard.GradNormMonitor: `factor` must be a number, got {type(factor).__name__}")
        if not (factor > 1 and math.isfinite(factor)):
            raise ValueError(f"nanguard.GradNormMonitor: `factor` must be a finite number > 1, got {factor}")
        self.factor = float(factor)
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
                raise TypeError(f"nanguard.GradNormMonitor: `threshold` must be a number or None, "
                                f"got {type(threshold).__name__}")
            if not threshold > 0:
                raise ValueError(f"nanguard.GradNormMonitor: `threshold` must be > 0, got {threshold}")
        self.threshold = None if threshold is None else float(threshold)
        self.capacity = _positive_int(history, "history", 16)
        self.depth = None if depth is None else _positive_int(depth, "depth", 1)
        if not isinstance(warn, bool):
            raise TypeError(f"nanguard.GradNormMonitor: `warn` must be a bool, got {type(warn).__name__}")
        self.warn = warn
        self.modules: Tuple[str, ...] = ()
        self.alerts: List[GrowthAlert] = []
        self.history = NormHistory([TOTAL], self.capacity)
        # the newest `window` rows, as a ring buffer the analysis reads without rebuilding it
        self._ring = torch.zeros(0)
        # per module, the largest norm of the steps that have left the window
        self._peak = torch.zeros(0, dtype=torch.float64)
        self._ring_steps: List[int] = []
        self._pos = 0
        self._count = 0
        self._quiet_until = -1
        self._backward_rank: Optional[List[int]] = None  # per module: 0 = nearest the loss
        self._seen: List[int] = []
        self._hooks: List[Any] = []
        self._module_index: Optional[torch.Tensor] = None
        self._index_cache: Optional[Tuple[Any, torch.Tensor]] = None

    # -- wiring ------------------------------------------------------------------------
    def bind(self, table: ParamTable) -> None:
        """Adopt the guard's modules; keep the history if they did not change."""
        if table.module_names == self.modules:
            return
        self.detach()
        self.modules = table.module_names
        self.history = NormHistory(list(self.modules) + [TOTAL], self.capacity)
        self._ring = torch.zeros(self.window, len(self.modules), dtype=torch.float64)
        self._peak = torch.zeros(len(self.modules), dtype=torch.float64)
        self._ring_steps = [0] * self.window
        self._pos = self._count = 0
        self._module_index = torch.tensor(table.modules, dtype=torch.long)
        self._index_cache = None
        self._backward_rank = None
        self._seen = []
        # learn once which module receives its gradient first in backward (nearest the loss):
        # a post-accumulate hook per parameter for one backward pass, then removed
        if hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
            for p, m in zip(table.params, table.modules):
                if p.requires_grad:
                    self._hooks.append(p.register_post_accumulate_grad_hook(
                        lambda _p, m=m: self._seen.append(m)))

    def detach(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def _learn_order(self) -> None:
        if self._backward_rank is not None or not self._seen:
            return
        order = list(dict.fromkeys(self._seen))
        rank = {m: k for k, m in enumerate(order)}
        # modules not seen (frozen this step) rank after, in reverse registration order
        n = len(self.modules)
        self._backward_rank = [rank.get(m, len(order) + (n - m)) for m in range(n)]
        self.detach()

    def module_norms(self, param_norms: torch.Tensor, index: Sequence[int]) -> torch.Tensor:
        """Per-module L2 norms from per-parameter norms (positions `index` in the table)."""
        assert self._module_index is not None, "bind() first"
        key = (tuple(index), param_norms.device)
        if self._index_cache is None or self._index_cache[0] != key:
            # built once per set of gradients and device: no host-to-device copy per step
            self._index_cache = (key, self._module_index[list(index)].to(param_norms.device))
        idx = self._index_cache[1]
        sq = torch.zeros(len(self.modules), dtype=param_norms.dtype, device=param_norms.device)
        return sq.index_add_(0, idx, param_norms * param_norms).sqrt_()

    # -- the test ----------------------------------------------------------------------
    def observe(self, step: int, norms: List[float], total: float, bad: bool) -> Optional[GrowthAlert]:
        """Record one step's module norms; return (and warn with) an alert if one fires."""
        self._learn_order()
        self.history.add(step, norms + [total], bad)
        if self._count == self.window:  # the oldest row leaves the window
            self._peak = torch.fmax(self._peak, self._ring[self._pos])
        self._ring[self._pos] = torch.tensor(norms, dtype=torch.float64)
        self._ring_steps[self._pos] = step
        self._pos = (self._pos + 1) % self.window
        self._count = min(self._count + 1, self.window)
        if bad or step <= self._quiet_until or not self.modules:
            return None
        if self.threshold is None and self._count < self.window:
            return None
        alert = self._analyse()
        if alert is not None:
            self._quiet_until = step + self.window  # one warning per episode, not per step
            self.alerts.append(alert)
            del self.alerts[:-1000]
            if self.warn:
                warnings.warn(GradientGrowthWarning(alert.message(), alert), stacklevel=4)
        return alert

    def _analyse(self) -> Optional[GrowthAlert]:
        if self._count < self.window:  # not wrapped yet: rows 0..count-1 are in order
            x = self._ring[:self._count]
            steps = self._ring_steps[:self._count]
        else:  # oldest row first
            x = torch.cat([self._ring[self._pos:], self._ring[:self._pos]])
            steps = self._ring_steps[self._pos:] + self._ring_steps[:self._pos]
        n = x.shape[0]
        current = x[-1]
        full = n >= self.window
        if full:
            q = max(2, n // 4)
            base = x[:q].nanmedian(0).values
            level = x[-3:].nanmedian(0).values
            usable = torch.isfinite(base) & (base > 0)
            ratio = torch.where(usable, level / base.clamp_min(1e-300), torch.zeros_like(base))
            # an explosion also reaches a new high: a converged model whose tiny gradient
            # noise climbs back from 1e-3 to 1e-2 (after norms of 1 early on) is healthy
            growth = (ratio > self.factor) & ~(level <= self._peak)
        else:
            base, level = current.clone(), current.clone()
            ratio = torch.ones_like(current)
            growth = torch.zeros_like(current, dtype=torch.bool)
        over = (current > self.threshold) if self.threshold is not None else torch.zeros_like(growth)
        alarm = growth | over
        if not bool(alarm.any()):
            return None
        reason = "growth" if bool(growth.any()) else "threshold"
        if reason == "growth":
            module = int(torch.where(growth, ratio, torch.zeros_like(ratio)).argmax())
        else:
            module = int(torch.where(over, current, torch.zeros_like(current)).argmax())
        rising = (ratio >= math.sqrt(self.factor)) if full else torch.zeros_like(alarm)
        candidates = (alarm | rising).nonzero().flatten().tolist()
        takeoff: Dict[int, int] = {}
        for m in candidates:
            # a rising module took off where its norm last climbed past a quarter of its
            # log-rise (scale-free: modules that start rising together tie whatever their
            # rates); one alarmed by the threshold alone, where it last crossed the threshold
            if rising[m]:
                bar = float(base[m]) * float(ratio[m]) ** 0.25
            else:
                assert self.threshold is not None
                bar = self.threshold
            col = x[:, m]
            below = ~((col > bar) | torch.isnan(col))
            last_below = below.nonzero().flatten()
            takeoff[m] = min(int(last_below[-1]) + 1, n - 1) if last_below.numel() else 0
        first = min(takeoff.values())
        tied = [m for m, t in takeoff.items() if t <= first + 1]
        rank = self._backward_rank or [len(self.modules) - m for m in range(len(self.modules))]
        origin = min(tied, key=lambda m: (rank[m], takeoff[m]))
        growing = sorted(((self.modules[m], float(ratio[m])) for m in candidates if rising[m]),
                         key=lambda t: -t[1])
        return GrowthAlert(
            step=steps[-1], reason=reason, module=self.modules[module],
            norm=float(level[module]) if reason == "growth" else float(current[module]),
            base=float(base[module]), origin=self.modules[origin],
            origin_step=steps[takeoff[origin]], growing=tuple(growing), window=self.window,
        )
