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
tiny gradient noise climbs back up, still far below its early-training scale, stays quiet.

The origin is the module whose norm took off first: the start of its final run above
``factor^(1/4)`` times its floor (its lower quartile in the window), a bar the same height
above every module's own level, so of two modules that start growing together the faster one
crosses it first. Among modules that took off within a step of each other, the one standing
highest above its floor one step later is named (a head whose learning rate is too high
leads in its first steps, before the layers its gradient flows into overtake it); when they
stand alike (within 1.5x), the explosion entered at the one nearest the loss (the first to
receive its gradient in the backward pass), and that one is named. On ReLU RNNs exploding
through time (``benchmarks/monitor_eval.py``) this names the recurrent layer in 3 of the 6
warned runs (the previous rule, which broke every tie toward the loss: 2 of 6); with
``climb=6``, whose warnings come later in the climb, 8 of 8.

Opt-in, ``climb=k`` adds a faster test: the norm rose at each of the last k steps and now
stands sqrt(factor) above its median over the window. It warns on explosions that start
below an early-training peak and gives more lead (``benchmarks/monitor_eval.py``: on 8
exploding RNN runs, the last warning came a median 8 steps before the first non-finite
gradient instead of 106, 8 of 8 warned instead of 6, the origin right in all 8), but it also
fires on RNNs at the edge of stability whose norms climb 7x to 10^4x and come back down without
a non-finite gradient
(5 warnings in 3 runs with such cliffs, 5 in 2 of the 8 runs the harness counts healthy,
1 in 6 runs at too high a learning rate; the default: none in all 17), which is why it is off
by default.

Growth slower than ``factor`` per ``window`` steps does not trip the window test; give a
``threshold`` (or a longer window) to catch a slow drift.

Opt-in, ``headroom=True`` also watches float16/bfloat16 activations and gradients against the
dtype's maximum (`headroom.py`), fed at the same point of the step.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from nanguard.torch.guard.growth import GradientGrowthWarning, GrowthAlert
from nanguard.torch.guard.headroom import HeadroomAlert, HeadroomWatch
from nanguard.torch.guard.history import TOTAL, NormHistory
from nanguard.torch.guard.params import ParamTable

__all__ = ["TOTAL", "GradNormMonitor", "GradientGrowthWarning", "GrowthAlert", "NormHistory"]


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
        climb: also warn when a norm rose at each of the last `climb` steps (>= 3, below
            `window`) to sqrt(factor) times its window median: more lead on sudden
            explosions, more warnings on runs at the edge of stability. ``None`` (default): off.
        headroom: also watch how close float16/bfloat16 activations and gradients come to
            the dtype's maximum and warn (:class:`HeadroomWarning`) before they overflow:
            ``True`` warns below 2 bits (within 4x of the maximum) or when the headroom
            falls toward it fast enough to run out within 4 steps; a number sets the bits.
            Needs the guard's ``model=`` (a module): its modules' outputs are hooked
            (`headroom.py`). Default off.

    Example:
        >>> guard = nanguard.GradGuard(opt, model=model, monitor=nanguard.GradNormMonitor(factor=20))
        >>> ...  # training; a GradientGrowthWarning names the module where growth started
        >>> guard.alerts[-1].origin
        'decoder.head'
    """

    def __init__(self, window: int = 50, factor: float = 10.0, threshold: Optional[float] = None,
                 history: int = 2048, depth: Optional[int] = None, warn: bool = True,
                 climb: Optional[int] = None, headroom: Union[bool, float] = False) -> None:
        self.window = _positive_int(window, "window", 8)
        self.climb = None if climb is None else _positive_int(climb, "climb", 3)
        if self.climb is not None and self.climb >= self.window:
            raise ValueError(f"nanguard.GradNormMonitor: `climb` must be smaller than `window` "
                             f"({self.window}), got {self.climb}")
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
        self.headroom = _headroom(headroom, self.window, warn)
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
    def watch(self, model: Optional[torch.nn.Module], scaled: Callable[[], bool]) -> None:
        """Headroom: hook ``model``'s modules (``scaled()``: a GradScaler is active)."""
        if self.headroom is not None:
            if model is None:
                raise ValueError("nanguard.GradNormMonitor(headroom=...) watches the model's module outputs: "
                                 "give the guard model=<the nn.Module>")
            self.headroom.attach(model, scaled)

    @property
    def headroom_alerts(self) -> List[HeadroomAlert]:
        """The headroom warnings given so far (empty without ``headroom=``)."""
        return self.headroom.alerts if self.headroom is not None else []

    def bind(self, table: ParamTable) -> None:
        """Adopt the guard's modules; keep the history if they did not change."""
        if self.headroom is not None:
            self.headroom.bind(table)
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
        if self.headroom is not None:
            self.headroom.observe(step, bad)
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
        no = torch.zeros_like(current, dtype=torch.bool)
        if full:
            q = max(2, n // 4)
            base = x[:q].nanmedian(0).values
            level = x[-3:].nanmedian(0).values
            usable = torch.isfinite(base) & (base > 0)
            ratio = torch.where(usable, level / base.clamp_min(1e-300), torch.zeros_like(base))
            # an explosion also reaches a new high: a converged model whose tiny gradient
            # noise climbs back from 1e-3 to 1e-2 (after norms of 1 early on) is healthy
            growth = (ratio > self.factor) & ~(level <= self._peak)
            # a climb need only top its window: six rises in a row are no converged run's
            # noise, and an RNN's explosion can start below an early-training peak
            if self.climb is not None:
                climb, climb_ratio = self._climbing(x, self.climb)
                climbing = climb & (current >= x[:-1].amax(0)) & ~growth
            else:
                climbing, climb_ratio = no, torch.ones_like(current)
        else:
            base, level = current.clone(), current.clone()
            ratio = torch.ones_like(current)
            growth = climbing = no
            climb_ratio = torch.ones_like(current)
        over = (current > self.threshold) if self.threshold is not None else no
        alarm = growth | climbing | over
        if not bool(alarm.any()):
            return None
        if bool(growth.any()):
            reason, score = "growth", torch.where(growth, ratio, torch.zeros_like(ratio))
        elif bool(climbing.any()):
            reason, score = "climb", torch.where(climbing, climb_ratio, torch.zeros_like(ratio))
        else:
            reason, score = "threshold", torch.where(over, current, torch.zeros_like(current))
        module = int(score.argmax())
        rising = (ratio >= math.sqrt(self.factor)) | climbing if full else no
        candidates = (alarm | rising).nonzero().flatten().tolist()
        # each module's usual low in the window (its lower quartile): what a climb starts from,
        # robust to the single low outlier a minimum would take and to a high early phase
        floor = torch.where(torch.isfinite(x) & (x > 0), x, torch.full_like(x, math.nan))
        floor = floor.nanquantile(0.25, dim=0).nan_to_num(nan=0.0)
        takeoff = {m: self._takeoff(x[:, m], float(floor[m]), bool(rising[m])) for m in candidates}
        origin = self._origin(takeoff, x, floor)
        growing = sorted(((self.modules[m], float(ratio[m])) for m in candidates if rising[m]),
                         key=lambda t: -t[1])
        if reason == "growth":
            norm, start = float(level[module]), float(base[module])
        elif reason == "climb":
            norm = float(current[module])
            start = norm / float(climb_ratio[module])
        else:
            norm, start = float(current[module]), float(base[module])
        return GrowthAlert(
            step=steps[-1], reason=reason, module=self.modules[module], norm=norm, base=start,
            origin=self.modules[origin], origin_step=steps[takeoff[origin]], growing=tuple(growing),
            window=self.window, climb=self.climb if reason == "climb" and self.climb else 0,
        )

    def _climbing(self, x: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Per module: whether the norm rose at every one of the last `climb` steps and now
        stands sqrt(factor) above the window's median; and that ratio. A geometric explosion
        climbs like this for many steps before it reaches `factor` above the window's start;
        noise almost never does (six rises in a row by chance: 1 in 5040, and from a dip they
        do not lift the norm far above its usual level)."""
        tail = x[-(k + 1):]
        rises = (tail[1:] > tail[:-1]).all(0)
        typical = x.nanmedian(0).values
        ratio = torch.where(torch.isfinite(typical) & (typical > 0),
                            x[-1] / typical.clamp_min(1e-300), torch.zeros_like(typical))
        return rises & (ratio >= math.sqrt(self.factor)), ratio

    def _takeoff(self, col: torch.Tensor, floor: float, rising: bool) -> int:
        """Where a module's norm took off: the start of its final run above factor^(1/4)
        times its floor (lower quartile) in the window, a bar the same height above each
        module's own floor, so that of two modules starting to grow together the faster is
        seen crossing it first. One alarmed by the threshold alone took off where it last
        crossed it."""
        if rising and 0 < floor < math.inf:
            bar = floor * self.factor ** 0.25
        else:
            bar = self.threshold if self.threshold is not None else floor
        below = ~((col > bar) | torch.isnan(col))
        last_below = below.nonzero().flatten()
        n = col.shape[0]
        return min(int(last_below[-1]) + 1, n - 1) if last_below.numel() else 0

    def _origin(self, takeoff: Dict[int, int], x: torch.Tensor, floor: torch.Tensor) -> int:
        """The module whose norm took off first. Among those that took off within a step of
        each other, the one whose norm stood highest above its floor one step after the
        first takeoff: the instability lives where the growth compounds first (a recurrent
        layer whose Jacobian
        product explodes through time grows faster than the head it feeds; a head whose
        learning rate is too high grows fastest in its first steps, before the layers its
        gradient flows into overtake it). Early growth within a factor of 1.5 is a tie, and
        the module nearest the loss is named (an explosion entering there reaches every
        module upstream in the same step)."""
        first = min(takeoff.values())
        tied = [m for m, t in takeoff.items() if t <= first + 1]
        early = x[min(first + 1, x.shape[0] - 1)]
        growth = {}
        for m in tied:
            b, v = float(floor[m]), float(early[m])
            if v == math.inf:  # overflowed already: it grew the most
                growth[m] = math.inf
            else:
                growth[m] = math.log(v / b) if 0 < b < v and math.isfinite(v) else 0.0
        best = max(growth.values())
        tied = [m for m in tied if growth[m] >= best - math.log(1.5)]
        rank = self._backward_rank or [len(self.modules) - m for m in range(len(self.modules))]
        return min(tied, key=lambda m: (rank[m], takeoff[m]))


def _headroom(value: object, window: int, warn: bool) -> Optional[HeadroomWatch]:
    if value is False or value is None:
        return None
    if value is True:
        return HeadroomWatch(quiet=window, warn=warn)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 16:
        raise ValueError(f"nanguard.GradNormMonitor: `headroom` must be True, False or a number of bits "
                         f"in (0, 16), got {value!r}")
    return HeadroomWatch(bits=float(value), quiet=window, warn=warn)
