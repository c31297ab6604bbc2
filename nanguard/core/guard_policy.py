"""What a guard does with a bad step: the policies, their arguments, the decision and the
message it raises. Framework-free, shared by the PyTorch, TensorFlow and optax guards.

- ``"skip"``: the step is not applied; ``"zero"``: the non-finite elements become 0 and the
  step is applied; ``"raise"``: :class:`nanguard.NonFiniteError`.
- ``"rollback"`` (PyTorch's GradGuard and its integrations, for now): the last snapshot of the training
  state is restored, also on a finite spike (``spike=``, `nanguard.core.guard_spike`), and
  the learning rate can be backed off (``lr_backoff``).
- ``max_consecutive`` bad steps (or non-finite losses) in a row raise whatever the policy,
  so a run whose every step is bad stops instead of skipping forever.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

from nanguard.core.guard_records import (
    GRADIENTS,
    RAISED,
    ROLLED_BACK,
    SKIPPED,
    ZEROED,
    GuardEvent,
    GuardRecords,
)
from nanguard.core.guard_spike import SpikeRule, check_spike

POLICIES = ("skip", "zero", "raise")
ROLLBACK = "rollback"

# What a non-finite micro-batch loss does to its gradient-accumulation window: "skip_window"
# skips the optimizer step the window feeds (the other micro-batches are not applied either),
# "drop" leaves that micro-batch out and applies the step with the others.
ACCUMULATION = ("skip_window", "drop")

# 2**16 (GradScaler's initial scale) halves to 1 in 16 overflowing steps; a limit above that
# lets AMP calibrate its scale while still stopping a run whose every step is non-finite.
DEFAULT_MAX_CONSECUTIVE = 25

# Policy "rollback" snapshots every DEFAULT_SNAPSHOT_EVERY-th applied step unless told
# otherwise. A snapshot costs about 0.05 of a step on the benchmark transformer (CPU): 0.5%
# at 10. A rollback undoes up to this many steps, the cost that matters: on the planted
# spikes (3 seeds) K = 10 ends within 1% of the clean run, 20 does not (1.1%). Where a large
# model's state crosses PCIe from a GPU a snapshot can cost up to a whole step: raise K there
# (benchmarks/guard_rollback.py; README, Recover).
DEFAULT_SNAPSHOT_EVERY = 10


def check_policy(policy: object, owner: str = "nanguard.GradGuard",
                 choices: Tuple[str, ...] = POLICIES) -> str:
    if not isinstance(policy, str) or policy not in choices:
        hint = ""
        if policy == ROLLBACK:
            hint = (" (policy 'rollback' is PyTorch's: nanguard.GradGuard in a loop you write, or its "
                    "Lightning, Hugging Face Trainer and accelerate integrations; not yet here)")
        raise ValueError(f"{owner}: unknown policy {policy!r}; choose one of "
                         f"{', '.join(map(repr, choices))}{hint}")
    return policy


def check_rollback(policy: str, snapshot_every: object, spike: object, lr_backoff: object,
                   accumulation: str, owner: str = "nanguard.GradGuard"
                   ) -> Tuple[int, Optional[SpikeRule], Optional[float]]:
    """(snapshot_every, spike rule, lr_backoff) of policy "rollback"; these arguments belong
    to that policy alone. snapshot_every None: the default; spike and lr_backoff None: off."""
    if policy != ROLLBACK:
        given = [name for name, value in (("snapshot_every", snapshot_every), ("spike", spike),
                                          ("lr_backoff", lr_backoff)) if value is not None]
        if given:
            raise ValueError(f"{owner}: `{given[0]}` belongs to policy='rollback' (the policy "
                             f"is {policy!r})")
        return DEFAULT_SNAPSHOT_EVERY, None, None
    if accumulation != "skip_window":
        raise ValueError(f"{owner}: policy 'rollback' needs accumulation='skip_window': it "
                         f"rolls the whole step back, where 'drop' would apply the window "
                         f"without the bad micro-batch")
    if snapshot_every is None:
        snapshot_every = DEFAULT_SNAPSHOT_EVERY
    if isinstance(snapshot_every, bool) or not isinstance(snapshot_every, int):
        raise TypeError(f"{owner}: `snapshot_every` must be an int >= 1 (applied steps between "
                        f"two snapshots), got {type(snapshot_every).__name__}")
    if snapshot_every < 1:
        raise ValueError(f"{owner}: `snapshot_every` must be an int >= 1 (applied steps between "
                         f"two snapshots), got {snapshot_every}")
    if lr_backoff is not None:
        if (isinstance(lr_backoff, bool) or not isinstance(lr_backoff, (int, float))
                or not (0 < lr_backoff <= 1) or math.isnan(lr_backoff)):
            raise ValueError(f"{owner}: `lr_backoff` must be a number in (0, 1] (what each "
                             f"rollback multiplies the learning rate by) or None, got "
                             f"{lr_backoff!r}")
        lr_backoff = float(lr_backoff)
    return snapshot_every, check_spike(spike, owner), lr_backoff


def check_accumulation(accumulation: object, owner: str = "nanguard.GradGuard") -> str:
    if not isinstance(accumulation, str) or accumulation not in ACCUMULATION:
        raise ValueError(f"{owner}: unknown accumulation {accumulation!r}; choose "
                         f"'skip_window' (a non-finite micro-batch loss skips the whole "
                         f"optimizer step) or 'drop' (leave that micro-batch out)")
    return accumulation


def check_max_consecutive(max_consecutive: object, owner: str = "nanguard.GradGuard") -> Optional[int]:
    if max_consecutive is None:
        return None
    if isinstance(max_consecutive, bool) or not isinstance(max_consecutive, int):
        raise TypeError(f"{owner}: `max_consecutive` must be an int >= 1 or None, "
                        f"got {type(max_consecutive).__name__}")
    if max_consecutive < 1:
        raise ValueError(f"{owner}: `max_consecutive` must be >= 1 (the bad step "
                         f"in a row that raises) or None, got {max_consecutive}")
    return max_consecutive


def check_max_events(max_events: object, owner: str = "nanguard.GradGuard") -> int:
    if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
        raise ValueError(f"{owner}: `max_events` must be an int >= 1, got {max_events!r}")
    return max_events


def decide(policy: str, run: int, max_consecutive: Optional[int], *,
           can_zero: bool = True) -> Tuple[str, bool]:
    """(action, limit) for the `run`-th bad step in a row; `limit`: max_consecutive reached.

    A non-finite loss (`can_zero=False`) has nothing to zero: "zero" skips it. The TF and JAX
    guards take the same decision inside compiled code (`tf.cond`, `lax.switch`); their tests
    compare it with this function.
    """
    limit = max_consecutive is not None and run >= max_consecutive
    if policy == "raise" or limit:
        return RAISED, limit
    if policy == ROLLBACK:
        return ROLLED_BACK, limit
    return (ZEROED if policy == "zero" and can_zero else SKIPPED), limit


def raise_message(event: GuardEvent, limit: bool, policy: str, max_consecutive: Optional[int],
                  records: GuardRecords, *, what: str = "parameters", run: Optional[int] = None) -> str:
    """The text of the NonFiniteError: the event, the parameters, and what to do next.

    `what` names the things that had gradients ("parameters", "variables", "leaves"); `run`
    is the streak at the event when the error is delivered later (default: the current one).
    """
    if limit and policy != "raise":
        doing = {"skip": "skipping", "zero": "zeroing", ROLLBACK: "rolling back"}[policy]
        head = (f"nanguard: {records.consecutive if run is None else run} bad steps in a row "
                f"(max_consecutive={max_consecutive}); stopping instead of {doing} "
                f"forever.\n  last: {event.describe()}")
    else:
        head = f"nanguard: {event.describe()} (policy 'raise')"
    lines = [head]
    if event.kind == GRADIENTS:
        lines.append(f"  {what} and optimizer state were left untouched by this step.")
        for p in event.params[:10]:
            lines.append(f"  {p.name} {list(p.shape)}: {p.nan} NaN, {p.inf} Inf "
                         f"of {p.numel} elements")
        if len(event.params) > 10:
            lines.append(f"  … {len(event.params) - 10} more {what}")
    if event.scale is not None:
        lines.append(f"  GradScaler scale was {event.scale:g}: with AMP an occasional overflow "
                     f"is expected while the scale calibrates; policy 'skip' lets the scaler "
                     f"back off instead of stopping.")
    if limit and policy == ROLLBACK:
        lines.append("  a rollback's streak counts the rollbacks to the same snapshot (the good "
                     "steps between them were undone). Do the same batches come back after each "
                     "rollback? A loop that draws them from the global RNG (torch.randint) "
                     "replays them, since the RNG is restored: draw from a torch.Generator of "
                     "its own.")
    if limit:
        lines.append("")
        lines.append(records.summary())
    lines.append("  to find the operation that produced it: run the step under nanguard's "
                 "detector (`nanguard run your_script.py`).")
    return "\n".join(lines)
