"""Policy "rollback" inside the integrations: the arguments, and what a framework owns.

The guard's snapshot (`nanguard.torch.guard.rollback`) copies what it is given: the
parameters, the model's buffers, the optimizer's state and param groups, the GradScaler and
the RNGs. Inside a framework the learning-rate scheduler is the framework's: Lightning, the
HF Trainer and an accelerate loop step it themselves and hold it on a step the guard
reports as skipped (a rolled-back step is one). The integrations hand those schedulers to
the guard to *follow* (`ScheduleHold.follow`): their ``state_dict`` is in the snapshot and
comes back with the rest, but the guard never steps them. Each integration also applies
the rollbacks' learning-rate backoff (``lr_backoff``) at the framework's own update.

The framework's counters (``trainer.global_step``, ``state.global_step``) go on: a rollback,
like a skip, is a step taken, as a resumed run's steps are counted from its checkpoint.
"""

from __future__ import annotations

from typing import Any, Iterable

from nanguard.core.guard_policy import POLICIES, ROLLBACK, check_policy, check_rollback

# every policy a framework integration takes: rollback too
INTEGRATION_POLICIES = POLICIES + (ROLLBACK,)


def rollback_options(policy: object, snapshot_every: object, spike: object, lr_backoff: object,
                     accumulation: str, owner: str) -> dict[str, Any]:
    """Check the policy and the rollback arguments now (not when training starts); returns
    the GradGuard keyword arguments for them."""
    policy = check_policy(policy, owner, INTEGRATION_POLICIES)
    check_rollback(policy, snapshot_every, spike, lr_backoff, accumulation, owner)
    out: dict[str, Any] = {"policy": policy}
    if policy == ROLLBACK:
        out.update(snapshot_every=snapshot_every, spike=spike, lr_backoff=lr_backoff)
    return out


def follow(guard: Any, schedulers: Iterable[Any]) -> None:
    """Put the framework's schedulers in the guard's rollback snapshots (a no-op for the
    other policies, which never restore a state)."""
    if guard.policy == ROLLBACK:
        guard._schedule.follow([s for s in schedulers if s is not None])
