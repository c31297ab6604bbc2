"""Spikes: a finite loss or gradient norm far above its recent median. Framework-free.

``spike=dict(loss=5.0, grad_norm=10.0, window=50)`` makes a value a spike when it is above
``factor`` × the median of the last ``window`` values of the same quantity. A multiple of
the median, not the median plus a multiple of the median absolute deviation: on a plateau
the deviation shrinks toward 0, so median + k·MAD would call ordinary noise a spike, and each
false spike costs a rollback (up to ``snapshot_every`` steps of training) and a learning-rate
backoff. Losses (cross-entropy, MSE) and norms are ≥ 0, which a multiple needs: while the
median is ≤ 0 (a loss that can be negative, such as a Gaussian log-likelihood) nothing is a
spike.

The test starts once `MIN_HISTORY` values are known (or ``window``, if fewer): the first
steps of a run have no "recent" to compare with. Only finite values that passed the test
join the history, so a spike does not raise the bar for the next one. Under data
parallelism every rank sees every rank's value (one all-reduced row per step), all of them
join the history and the test is a function of them alone: every rank takes the same
decision, and the ranks named are those whose value crossed the limit.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, List, Mapping, Optional, Sequence, Tuple

SPIKE_KEYS = ("loss", "grad_norm", "window")
DEFAULT_WINDOW = 50
MIN_HISTORY = 10


@dataclass(frozen=True)
class SpikeRule:
    """The parsed ``spike=`` argument: the factors (None: that quantity is not watched)."""

    loss: Optional[float]
    grad_norm: Optional[float]
    window: int = DEFAULT_WINDOW


def check_spike(spike: object, owner: str = "nanguard.GradGuard") -> Optional[SpikeRule]:
    if spike is None:
        return None
    if not isinstance(spike, Mapping):
        raise TypeError(f"{owner}: `spike` must be a dict such as dict(loss=5.0, grad_norm=10.0, "
                        f"window=50), got {type(spike).__name__}")
    unknown = [k for k in spike if k not in SPIKE_KEYS]
    if unknown:
        raise ValueError(f"{owner}: unknown `spike` key {unknown[0]!r}; the keys are 'loss' and "
                         f"'grad_norm' (a spike is a value above that many times its recent "
                         f"median) and 'window' (how many recent values make the median)")
    factors = {}
    for key in ("loss", "grad_norm"):
        factor = spike.get(key)
        if factor is None:
            continue
        if (isinstance(factor, bool) or not isinstance(factor, (int, float))
                or not (1 < factor < math.inf)):
            raise ValueError(f"{owner}: spike[{key!r}] must be a finite number > 1 (a spike is a "
                             f"value above that many times its recent median), got {factor!r}")
        factors[key] = float(factor)
    if not factors:
        raise ValueError(f"{owner}: `spike` must give a factor for 'loss', 'grad_norm' or both, "
                         f"e.g. dict(loss=5.0, grad_norm=10.0)")
    window = spike.get("window", DEFAULT_WINDOW)
    if isinstance(window, bool) or not isinstance(window, int) or window < 3:
        raise ValueError(f"{owner}: spike['window'] must be an int >= 3 (how many recent values "
                         f"make the median), got {window!r}")
    return SpikeRule(factors.get("loss"), factors.get("grad_norm"), window)


class SpikeWatch:
    """The recent values of one quantity, and the test of new ones against them."""

    def __init__(self, factor: float, window: int) -> None:
        self.factor = factor
        self.window = window
        self._steps: Deque[Tuple[float, ...]] = deque(maxlen=window)  # one entry per step

    def limit(self) -> Optional[float]:
        """The value above which a new one is a spike; None while the test does not run."""
        if len(self._steps) < min(MIN_HISTORY, self.window):
            return None
        median = statistics.median(v for step in self._steps for v in step)
        return self.factor * median if median > 0 else None

    def judge(self, values: Sequence[float]) -> Tuple[List[bool], Optional[float]]:
        """Which of `values` (one per rank) are spikes, and the limit; when none is, the
        finite ones join the history. NaN (a loss that is not a single number) is never a
        spike; +Inf (a finite gradient whose norm overflowed) is one once the test runs."""
        limit = self.limit()
        flags = [limit is not None and v > limit for v in values]
        finite = tuple(v for v in values if math.isfinite(v))
        if not any(flags) and finite:
            self._steps.append(finite)
        return flags, limit

    def state_dict(self) -> List[List[float]]:
        return [list(step) for step in self._steps]

    def load_state_dict(self, state: Any, owner: str) -> None:
        if not isinstance(state, list) or not all(
                isinstance(step, list) and all(isinstance(v, (int, float)) for v in step)
                for step in state):
            raise ValueError(f"{owner}: a spike history must be a list of lists of numbers")
        self._steps = deque((tuple(map(float, step)) for step in state), maxlen=self.window)
