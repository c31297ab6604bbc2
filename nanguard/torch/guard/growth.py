"""The gradient-growth early warning the monitor gives: the warning and its structured alert."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Tuple


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
    reason: str  # "growth" (factor within the window), "climb" (opt-in) or "threshold"
    module: str  # the module that tripped the test (largest growth)
    norm: float  # its current norm (median of the newest 3 steps)
    base: float  # its norm at the start of the window (median of the oldest quarter)
    origin: str  # the module whose norm took off first
    origin_step: int  # the step at which it took off
    growing: Tuple[Tuple[str, float], ...]  # every module growing ≥ sqrt(factor)×, with its factor
    window: int
    climb: int = 0  # reason "climb": the rises in a row (base is then the window's median)

    @property
    def ratio(self) -> float:
        return self.norm / self.base if self.base > 0 else math.inf

    def short(self) -> str:
        growth = {"growth": f"grew {self.ratio:.3g}x",
                  "climb": f"rose {self.climb} steps in a row to {self.ratio:.3g}x its median"
                  }.get(self.reason, f"crossed the threshold ({self.norm:.3g})")
        return (f"step {self.step}: gradient norm of `{self.module}` {growth}; growth started in "
                f"`{self.origin}` at step {self.origin_step}")

    def message(self) -> str:
        others = [f"`{n}` {r:.3g}x" for n, r in self.growing if n != self.origin][:4]
        lines = [
            f"nanguard: gradient norms are exploding (step {self.step}); a non-finite gradient "
            f"is likely soon.",
            f"  growth started in `{self.origin}` at step {self.origin_step}",
            {"growth": f"  `{self.module}`: {self.base:.3g} -> {self.norm:.3g} ({self.ratio:.3g}x "
                       f"within {self.window} steps)",
             "climb": f"  `{self.module}`: rising {self.climb} steps in a row, now {self.norm:.3g}, "
                      f"{self.ratio:.3g}x its median of the last {self.window} steps "
                      f"({self.base:.3g})",
             }.get(self.reason, f"  `{self.module}`: norm {self.norm:.3g} crossed the threshold"),
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
