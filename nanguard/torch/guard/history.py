"""The bounded per-step norm history the monitor keeps for `GradGuard.plot`."""

from __future__ import annotations

from collections import deque
from typing import Deque, Dict, List, Optional, Sequence, Tuple

TOTAL = "(total)"


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
