"""What a guard remembers: counters, the bad events, per-parameter totals, the summary.

Framework-free, shared by the PyTorch ``GradGuard``, the TensorFlow ``GuardedOptimizer`` and
the optax ``guard`` transformation, so the three count, name and summarise bad steps alike.

Counters and per-parameter totals cover the whole run; the list of individual events is
bounded (the newest `max_events` are kept) so a run that overflows every few steps for a
week does not grow without limit.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Deque, Dict, List, Optional, Tuple

# What was wrong (non-finite, or a finite spike: `nanguard.core.guard_spike`)
GRADIENTS = "gradients"
LOSS = "loss"  # check_loss() saw it; the caller skips the batch
LOSS_SPIKE = "loss spike"  # a finite loss far above its recent median
NORM_SPIKE = "gradient-norm spike"  # a finite total gradient norm far above its recent median
# What the guard did about it
SKIPPED = "skipped"  # optimizer.step() not called (for a loss: the batch is skipped)
ZEROED = "zeroed"  # non-finite gradient elements replaced by 0, then stepped
RAISED = "raised"  # NonFiniteError raised (policy "raise" or max_consecutive reached)
DROPPED = "dropped"  # non-finite micro-batches left out of an accumulation window, the rest stepped
ROLLED_BACK = "rolled back"  # the last snapshot restored (policy "rollback"), the step not applied


@dataclass(frozen=True)
class ParamIssue:
    """Non-finite gradient elements of one parameter at one step.

    ``position`` is the parameter's place in the optimizer's param groups (flattened).
    """

    name: str
    shape: Tuple[int, ...]
    nan: int
    inf: int
    position: int = 0

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class GuardEvent:
    """One bad step (or bad loss) as the guard handled it.

    ``step`` is 1-based: the n-th call of ``guard.step()``; a loss event carries the number of
    the step it would have fed. A loss event of an accumulation window (``window`` > 0: the
    micro-batches backpropagated through ``guard.backward`` since the last step) lists the
    1-based positions of the non-finite ones in ``micro_batches``; its action is "skipped"
    (the whole window was not applied: it counts as a skipped step), "dropped" (the step was
    applied with the other micro-batches), "rolled back" or "raised". ``ranks`` lists the
    data-parallel ranks whose values were non-finite or spiked (``(0,)`` without
    torch.distributed). A spike (``kind`` "loss spike" or "gradient-norm spike") keeps the
    value in ``loss`` or ``total_norm`` and the limit it crossed in ``threshold``. A rollback
    says how many applied steps it undid (``steps_undone``) and, with a learning-rate backoff,
    the scale of the learning rate from then on (``lr_scale``). ``params`` is empty when the
    non-finite values were on another rank only, or for a loss event or a spike; otherwise it
    is ordered from the output side (last registered first), so for a model registered in
    forward order the first entry is where the non-finite values entered the backward pass.
    """

    step: int
    kind: str  # "gradients", "loss", "loss spike" or "gradient-norm spike"
    action: str  # "skipped", "zeroed", "dropped", "rolled back" or "raised"
    params: Tuple[ParamIssue, ...] = ()
    ranks: Tuple[int, ...] = (0,)
    total_norm: Optional[float] = None
    scale: Optional[float] = None  # the GradScaler's scale at that step, if any
    loss: Optional[float] = None
    micro_batches: Tuple[int, ...] = ()
    window: int = 0
    steps_undone: int = 0  # applied steps undone by a rollback
    threshold: Optional[float] = None  # the limit a spike crossed
    lr_scale: Optional[float] = None  # the learning rate's scale after a rollback's backoff

    @property
    def is_step(self) -> bool:
        """Whether this event is the outcome of a ``guard.step()`` call (a gradient check, or an
        accumulation window skipped for a non-finite loss), as opposed to a batch left out."""
        return self.kind in (GRADIENTS, NORM_SPIKE) or (self.window > 0 and self.action != DROPPED)

    def describe(self, limit: int = 5) -> str:
        where = ", ".join(
            f"{p.name} ({_count(p)} of {p.numel})" for p in self.params[:limit]
        )
        if len(self.params) > limit:
            where += f", … {len(self.params) - limit} more"
        if self.kind in (LOSS, LOSS_SPIKE):
            what = (f"non-finite loss ({self.loss})" if self.kind == LOSS
                    else f"loss spike ({_value(self.loss)} above {_value(self.threshold)})")
            if self.window:
                which = ", ".join(map(str, self.micro_batches))
                plural = "es" if len(self.micro_batches) > 1 else ""
                what += (f" in micro-batch{plural} {which} of {self.window}"
                         + (", left out of the window" if self.action == DROPPED else ""))
        elif self.kind == NORM_SPIKE:
            what = (f"gradient-norm spike ({_value(self.total_norm)} above "
                    f"{_value(self.threshold)})")
        else:
            what = "non-finite gradients" + (f" in {where}" if where else "")
        ranks = f" on rank {', '.join(map(str, self.ranks))}" if self.ranks != (0,) else ""
        scale = f" (GradScaler scale {self.scale:g})" if self.scale is not None else ""
        action = self.action
        if action == ROLLED_BACK:
            action += f" {self.steps_undone} step{'s' if self.steps_undone != 1 else ''}"
            if self.lr_scale is not None:
                action += f", learning rate ×{self.lr_scale:g}"
        return f"step {self.step}: {what}{ranks}{scale} -> {action}"

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["params"] = [dict(asdict(p), numel=p.numel) for p in self.params]
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "GuardEvent":
        """The event :meth:`to_dict` wrote (also after a JSON round trip: lists for tuples)."""
        d = dict(d)
        d["params"] = tuple(ParamIssue(p["name"], tuple(p["shape"]), p["nan"], p["inf"],
                                       p.get("position", 0)) for p in d.get("params", ()))
        for key in ("ranks", "micro_batches"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(**d)


def _value(x: Optional[float]) -> str:
    return "?" if x is None else f"{x:.4g}"


def _loss_place(event: GuardEvent, world: int = 1) -> str:
    ranks = f" on rank {', '.join(map(str, event.ranks))}" if world > 1 else ""
    if not event.window:
        return f"before step {event.step}{ranks}"
    outcome = "window skipped" if event.action == SKIPPED else (
        "left out, step applied" if event.action == DROPPED else event.action)
    which = ",".join(map(str, event.micro_batches))
    return f"step {event.step}: micro-batch {which} of {event.window}{ranks}, {outcome}"


def _count(p: ParamIssue) -> str:
    parts = [f"{p.nan} NaN" if p.nan else "", f"{p.inf} Inf" if p.inf else ""]
    return " + ".join(x for x in parts if x) or "0 non-finite"


@dataclass
class ParamTotals:
    shape: Tuple[int, ...]
    position: int = 0
    nan: int = 0
    inf: int = 0
    steps: int = 0
    first: int = 0
    last: int = 0


# The counters of GuardRecords, as a checkpoint and `to_dict` hold them.
COUNTERS = ("steps", "applied", "skipped", "zeroed", "raised", "nonfinite_losses",
            "dropped_micro_batches", "consecutive", "longest_run", "rolled_back",
            "steps_undone", "spikes")


@dataclass
class GuardRecords:
    """Everything the guard counted; ``guard.records``.

    Example:
        >>> guard.records.skipped, guard.records.bad_steps[:3]
        (3, [17, 18, 503])
    """

    policy: str
    max_consecutive: Optional[int]
    max_events: int = 1000
    steps: int = 0  # guard.step() calls: applied, skipped, zeroed, rolled back or raised
    applied: int = 0  # finite steps, applied as they were
    skipped: int = 0
    zeroed: int = 0
    raised: int = 0
    nonfinite_losses: int = 0  # non-finite losses seen (each micro-batch counts)
    dropped_micro_batches: int = 0  # left out of windows whose step was still applied
    consecutive: int = 0  # bad steps/losses since the last applied finite step
    longest_run: int = 0
    rolled_back: int = 0  # rollbacks (policy "rollback"), at a step or at check_loss
    steps_undone: int = 0  # applied steps that those rollbacks undid
    spikes: int = 0  # finite losses and gradient norms far above their recent median
    lr_scale: float = 1.0  # what the rollbacks' backoff multiplies the learning rate by
    dumps: List[str] = field(default_factory=list)  # files of bad batches written (dump_dir)
    events: Deque[GuardEvent] = field(default_factory=deque)
    params: Dict[str, ParamTotals] = field(default_factory=dict)
    growth_warnings: List[Any] = field(default_factory=list)
    n_params: int = 0  # parameters the optimizer trains (for "12 of 50 parameters")
    guard: str = "GradGuard"  # the guard's name in the summary's first line
    world: int = 1  # data-parallel ranks agreeing: above 1, a loss event names its ranks

    def __post_init__(self) -> None:
        self.events = deque(self.events, maxlen=self.max_events)

    @property
    def bad_steps(self) -> List[int]:
        """Step numbers that went bad (among the kept events): non-finite gradients, or an
        accumulation window skipped (or raised) for a non-finite loss. A micro-batch left out
        of a step that was applied is not a bad step."""
        return [e.step for e in self.events if e.is_step]

    @property
    def skipped_steps(self) -> List[int]:
        """Step numbers that were not applied: bad gradients, or a window with a bad loss."""
        return [e.step for e in self.events if e.is_step and e.action == SKIPPED]

    def add(self, event: GuardEvent) -> None:
        self.events.append(event)
        if event.kind == LOSS:
            self.nonfinite_losses += max(1, len(event.micro_batches))
            if event.action == DROPPED:
                self.dropped_micro_batches += len(event.micro_batches)
        elif event.kind in (LOSS_SPIKE, NORM_SPIKE):
            self.spikes += 1
        if event.action == ROLLED_BACK:  # also check_loss's, which is no step outcome
            self.rolled_back += 1
            self.steps_undone += event.steps_undone
            if event.lr_scale is not None:
                self.lr_scale = event.lr_scale
        elif event.is_step:  # a batch left out is not a step outcome: steps counts calls
            if event.action == SKIPPED:
                self.skipped += 1
            elif event.action == ZEROED:
                self.zeroed += 1
            elif event.action == RAISED:
                self.raised += 1
        for p in event.params:
            t = self.params.setdefault(p.name, ParamTotals(p.shape, p.position, first=event.step))
            t.nan += p.nan
            t.inf += p.inf
            t.steps += 1
            t.last = event.step

    def bad(self, floor: int = 0) -> int:
        """Count one more bad step in a row (at least `floor`: a rollback's streak also counts
        the earlier rollbacks to the same snapshot, whose good steps in between it undid)."""
        self.consecutive = max(self.consecutive + 1, floor)
        self.longest_run = max(self.longest_run, self.consecutive)
        return self.consecutive

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"policy": self.policy, "max_consecutive": self.max_consecutive}
        d.update(self.state_dict())
        d["growth_warnings"] = [w.to_dict() for w in self.growth_warnings]
        return d

    def state_dict(self) -> Dict[str, Any]:
        """The counters, the kept events and the per-parameter totals, as plain data (ints,
        strings, lists, dicts) that any checkpoint format holds, JSON included."""
        d: Dict[str, Any] = {k: getattr(self, k) for k in COUNTERS}
        d["events"] = [e.to_dict() for e in self.events]
        d["params"] = {n: asdict(t) for n, t in self.params.items()}
        d["lr_scale"] = self.lr_scale
        d["dumps"] = list(self.dumps)
        return d

    def load_state_dict(self, state: Dict[str, Any], owner: str) -> None:
        """Restore what :meth:`state_dict` wrote (a state with counters only, as older
        versions wrote, restores the counters)."""
        for k, v in state.items():
            if k in COUNTERS and isinstance(v, int) and not isinstance(v, bool):
                continue
            if (k, type(v)) not in (("events", list), ("params", dict), ("lr_scale", float),
                                    ("dumps", list)):
                raise ValueError(f"{owner}: unexpected entry {k!r}")
        for k in COUNTERS:
            if k in state:
                setattr(self, k, state[k])
        if "events" in state:
            self.events.clear()
            self.events.extend(GuardEvent.from_dict(e) for e in state["events"])
        if "params" in state:
            self.params = {n: ParamTotals(**dict(t, shape=tuple(t["shape"])))
                           for n, t in state["params"].items()}
        self.lr_scale = state.get("lr_scale", self.lr_scale)
        self.dumps = list(state.get("dumps", self.dumps))

    def _counts_line(self) -> str:
        return (f"nanguard {self.guard} (policy {self.policy!r}): {self.steps} steps, "
                f"{self.applied} applied, {self.skipped} skipped, {self.zeroed} zeroed"
                + (f", {self.rolled_back} rolled back" if self.rolled_back else "")
                + (f", {self.raised} raised" if self.raised else ""))

    def _params_by_badness(self) -> List[Tuple[str, ParamTotals]]:
        # most often bad first; among equals the one nearest the output, where a non-finite
        # value enters the backward pass before spreading to earlier layers
        return sorted(self.params.items(), key=lambda kv: (-kv[1].steps, -kv[1].position))

    def line(self, max_names: int = 3) -> str:
        """The summary in one line, for the end of a run that a framework drives: the counts,
        which parameters had non-finite gradients, how many losses were non-finite (and on
        which ranks)."""
        parts = [self._counts_line()]
        names = [n for n, _ in self._params_by_badness()]
        if names:
            more = f" and {len(names) - max_names} more" if len(names) > max_names else ""
            parts.append(f"non-finite gradients in {', '.join(names[:max_names])}{more}")
        if self.nonfinite_losses:
            plural = "es" if self.nonfinite_losses > 1 else ""
            ranks = sorted({r for e in self.events if e.kind == LOSS for r in e.ranks})
            on = f" on rank {', '.join(map(str, ranks))}" if self.world > 1 and ranks else ""
            parts.append(f"{self.nonfinite_losses} non-finite loss{plural}{on}")
        if self.spikes:
            parts.append(f"{self.spikes} spike{'s' if self.spikes > 1 else ''}")
        return "; ".join(parts)

    def summary(self, max_rows: int = 10) -> str:
        limit = "none" if self.max_consecutive is None else str(self.max_consecutive)
        lines = [self._counts_line()]
        bad = [e.step for e in self.events if e.kind == GRADIENTS]
        if bad:
            shown = ", ".join(map(str, bad[:12])) + (", …" if len(bad) > 12 else "")
            lines.append(f"  non-finite gradients at step {shown}")
        if self.nonfinite_losses:
            where = list(dict.fromkeys(_loss_place(e, self.world) for e in self.events
                                       if e.kind == LOSS))
            shown = "; ".join(where[:8]) + ("; …" if len(where) > 8 else "")
            lines.append(f"  non-finite losses: {self.nonfinite_losses} ({shown})")
        if self.rolled_back:
            where = [f"{e.step} ({e.kind}, {e.steps_undone} undone)" for e in self.events
                     if e.action == ROLLED_BACK]
            shown = ", ".join(where[:8]) + (", …" if len(where) > 8 else "")
            lr = f"; learning rate scaled ×{self.lr_scale:g}" if self.lr_scale != 1.0 else ""
            times = f"{self.rolled_back} time{'s' if self.rolled_back > 1 else ''}"
            lines.append(f"  rolled back {times}, {self.steps_undone} applied steps undone: "
                         f"at step {shown}{lr}")
        if self.dumps:
            shown = ", ".join(self.dumps[:3]) + (", …" if len(self.dumps) > 3 else "")
            lines.append(f"  bad batches written: {shown}")
        lines.append(f"  longest run of bad steps: {self.longest_run} (raises at {limit})")
        if self.params:
            lines.append(f"  {len(self.params)}" + (f" of {self.n_params}" if self.n_params else "")
                         + " parameters had non-finite gradients (output side first)")
            rows = self._params_by_badness()
            header = ["parameter", "shape", "NaN", "Inf", "bad steps", "first", "last"]
            table = [[n, "×".join(map(str, t.shape)) or "scalar", str(t.nan), str(t.inf),
                      str(t.steps), str(t.first), str(t.last)] for n, t in rows[:max_rows]]
            widths = [max(len(r[i]) for r in table + [header]) for i in range(len(header))]

            def fmt(r: List[str]) -> str:
                return "  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

            lines.append("")
            lines.append(fmt(header))
            lines.append(fmt(["-" * w for w in widths]))
            lines.extend(fmt(r) for r in table)
            if len(rows) > max_rows:
                lines.append(f"  … {len(rows) - max_rows} more parameters")
        if self.growth_warnings:
            lines.append("")
            lines.append(f"  gradient-growth warnings: {len(self.growth_warnings)}")
            for w in self.growth_warnings[-3:]:
                lines.append(f"    {w.short()}")
        return "\n".join(lines)
