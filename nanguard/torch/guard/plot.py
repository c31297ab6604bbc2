"""`GradGuard.plot()`: the gradient-norm history on a log scale (matplotlib, optional)."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from nanguard.torch.guard.monitor import TOTAL, GrowthAlert, NormHistory

MISSING = ("nanguard: GradGuard.plot() draws with matplotlib, which is an optional extra; "
           "install it with `pip install nanguard[plot]` (or `pip install matplotlib`)")


def _matplotlib() -> Any:
    try:
        # the object-oriented API: no pyplot, no global figure state, no GUI backend needed
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(MISSING) from exc
    return Figure, FigureCanvasAgg


def plot_history(history: NormHistory, alerts: Sequence[GrowthAlert], path: Optional[str] = None,
                 top: int = 8, bad_steps: Sequence[int] = ()) -> Any:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"nanguard.GradGuard.plot: `top` must be an int >= 1, got {top!r}")
    Figure, FigureCanvasAgg = _matplotlib()
    steps, series = history.series()
    if not steps:
        raise ValueError("nanguard.GradGuard.plot: nothing to draw yet; call guard.step() first")

    def finite(values: Sequence[float]) -> list:
        # log scale: zero, NaN and Inf norms leave a gap instead of breaking the axis
        return [v if (math.isfinite(v) and v > 0) else math.nan for v in values]

    def peak(values: Sequence[float]) -> float:
        vals = [v for v in values if math.isfinite(v)]
        return max(vals) if vals else -math.inf

    modules = [n for n in series if n != TOTAL]
    shown = sorted(modules, key=lambda n: -peak(series[n]))[:top]
    fig = Figure(figsize=(9, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name in shown:
        ax.plot(steps, finite(series[name]), linewidth=1.2, label=name)
    if TOTAL in series and any(math.isfinite(v) for v in series[TOTAL]):
        ax.plot(steps, finite(series[TOTAL]), color="black", linestyle="--", linewidth=1.4,
                label="total")
    ax.set_yscale("log")
    marked = sorted(set(history.bad_steps) | set(bad_steps))
    for k, s in enumerate(marked):
        ax.axvline(s, color="tab:red", alpha=0.35, linewidth=1,
                   label="non-finite step" if k == 0 else None)
    for k, a in enumerate(alerts):
        ax.axvline(a.step, color="tab:orange", linestyle=":", linewidth=1.6,
                   label=f"growth warning (from {a.origin})" if k == 0 else None)
    ax.set_xlabel("step")
    ax.set_ylabel("gradient norm")
    hidden = len(modules) - len(shown)
    ax.set_title("gradient norms" + (f" (top {len(shown)} of {len(modules)} modules)" if hidden else ""))
    ax.legend(fontsize="small", loc="upper left", ncol=2 if len(shown) > 6 else 1)
    ax.grid(True, which="both", alpha=0.25)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
