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

    def drawable(values: Sequence[float]) -> list:
        # the log axis cannot show 0, NaN or Inf: the curve breaks there and a marker on the
        # axis edge shows what happened (see `edge_markers`)
        return [v if (math.isfinite(v) and v > 0) else math.nan for v in values]

    def peak(values: Sequence[float]) -> float:
        vals = [v for v in values if math.isfinite(v)]
        return max(vals) if vals else -math.inf

    modules = [n for n in series if n != TOTAL]
    shown = sorted(modules, key=lambda n: -peak(series[n]))[:top]
    fig = Figure(figsize=(10.5, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    drawn = []  # (values, colour) of every curve, for the edge markers
    for name in shown:
        (line,) = ax.plot(steps, drawable(series[name]), linewidth=1.2, label=name)
        drawn.append((series[name], line.get_color()))
    if TOTAL in series:
        ax.plot(steps, drawable(series[TOTAL]), color="black", linestyle="--", linewidth=1.4,
                label="total")
        drawn.append((series[TOTAL], "black"))
    ax.set_yscale("log")
    if not any(math.isfinite(v) and v > 0 for values, _ in drawn for v in values):
        ax.set_ylim(1e-1, 1e1)  # nothing positive and finite: still a readable axis
    edge_markers(ax, steps, drawn)
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
    # outside the axes, so it never covers a curve
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(True, which="both", alpha=0.25)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


# What a norm that the log axis cannot draw was, and where its marker goes (axes y: 1 = top)
EDGE_KINDS = (
    ("Inf norm (overflow)", lambda v: v == math.inf, "^", 1.0),
    ("NaN norm", lambda v: v != v, "X", 1.0),
    ("zero norm", lambda v: v == 0.0, "v", 0.0),
)


def edge_markers(ax: Any, steps: Sequence[int], drawn: Sequence[tuple]) -> None:
    """Markers on the top edge for Inf and NaN norms and on the bottom edge for zero norms,
    in each curve's colour: exactly where a run overflows is what the user needs to see."""
    transform = ax.get_xaxis_transform()  # x in steps, y in axes fractions
    for label, is_kind, marker, y in EDGE_KINDS:
        labelled = False
        for values, colour in drawn:
            xs = [s for s, v in zip(steps, values) if is_kind(v)]
            if not xs:
                continue
            ax.scatter(xs, [y] * len(xs), transform=transform, marker=marker, s=36,
                       color=colour, clip_on=False, zorder=5,
                       label=None if labelled else f"{label}, at the {'top' if y else 'bottom'}")
            labelled = True
