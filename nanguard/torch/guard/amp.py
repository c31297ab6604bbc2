"""Working with ``torch.amp.GradScaler``: unscale once, reuse its inf check, let it back off.

The scaler's ``unscale_`` already runs the fused non-finite kernel
(``torch._amp_foreach_non_finite_check_and_unscale_``) and leaves one ``found_inf`` tensor per
device in its per-optimizer state. The guard reuses that tensor as its verdict, so there is
no second pass over the gradients, no second unscale (``unscale_`` twice raises), and the
scaler's own bookkeeping stays intact: ``scaler.update()`` sees the same ``found_inf`` and
backs the scale off exactly once per bad step.

This relies on GradScaler internals that have been stable since PyTorch 1.6:
``_per_optimizer_states[id(optimizer)]["stage"]`` and ``["found_inf_per_device"]``, and (for
policy "rollback"'s snapshots) the ``_scale`` and ``_growth_tracker`` tensors.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

# Who marks the GradScaler "stepped" after the guard's decision (see GradGuard._step).
GUARD, ON_APPLY, FRAMEWORK = "guard", "on_apply", "framework"

try:  # torch >= 2.3
    from torch.amp.grad_scaler import GradScaler as _GradScaler, OptState
except ImportError:  # pragma: no cover - older torch
    from torch.cuda.amp.grad_scaler import GradScaler as _GradScaler, OptState  # type: ignore


def check_scaler(scaler: object) -> Optional[Any]:
    if scaler is None:
        return None
    if not isinstance(scaler, _GradScaler):
        raise TypeError(
            f"nanguard.GradGuard: `scaler` must be a torch.amp.GradScaler, got {type(scaler).__name__}"
        )
    return scaler


def active(scaler: Optional[Any]) -> bool:
    return scaler is not None and scaler.is_enabled()


def found_inf(scaler: Any, optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """Unscale the optimizer's gradients unless the user already did; return the 0-d flag."""
    state = scaler._per_optimizer_states[id(optimizer)]
    if state["stage"] is OptState.STEPPED:
        raise RuntimeError(
            "nanguard.GradGuard.step(): the scaler already stepped this optimizer since its last "
            "update(); call guard.step() instead of scaler.step(optimizer), then scaler.update()"
        )
    if state["stage"] is OptState.READY:
        scaler.unscale_(optimizer)
    per_device = list(state["found_inf_per_device"].values())
    if not per_device:  # no gradients at all: nothing can be non-finite
        return torch.zeros(())
    flag = per_device[0]
    for other in per_device[1:]:
        flag = flag + other.to(flag.device, non_blocking=True)
    return flag


def mark_stepped(scaler: Any, optimizer: torch.optim.Optimizer) -> None:
    """Record that this optimizer is done for the iteration, as ``scaler.step`` would.

    The guard calls ``optimizer.step()`` itself (or not at all) instead of ``scaler.step``:
    the verdict is already on the host, and ``scaler.step`` would read ``found_inf`` again
    (a second device sync). Marking the stage keeps the scaler's protection against a
    second ``scaler.step(optimizer)`` in the same iteration; ``update()`` reads ``found_inf``
    as usual, so the scale backs off after a bad step and grows after good ones.
    """
    scaler._per_optimizer_states[id(optimizer)]["stage"] = OptState.STEPPED


def ensure_scale(scaler: Any, loss: torch.Tensor) -> None:
    """Create the scaler's scale tensor (it is made lazily by the first ``scale()`` call)."""
    if scaler._scale is None:
        scaler.scale(loss.detach())


def ensure_inf_check(scaler: Any, optimizer: torch.optim.Optimizer) -> None:
    """Give ``update()`` the inf check it insists on, for a step that unscaled no gradient.

    A window whose every micro-batch was kept out has no gradients to unscale, and
    ``update()`` asserts "No inf checks were recorded". A zero flag on the scale's device
    makes it count the step as a non-overflowing one, which it was: the loss was checked
    before scaling.
    """
    per_device = scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
    if not per_device and scaler._scale is not None:
        per_device[scaler._scale.device] = torch.zeros(1, device=scaler._scale.device)


def share_found_inf(scaler: Any, optimizer: torch.optim.Optimizer) -> None:
    """Make this rank's scaler count an overflow that another rank found.

    Under torch.distributed the guard skips on every rank when any rank's gradients were
    non-finite; setting ``found_inf`` here too makes every rank's ``update()`` back off, so
    the loss scales stay equal across ranks. ``clamp_min_`` keeps it on the device (no sync).
    """
    per_device = list(scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"].values())
    if per_device:
        per_device[0].clamp_min_(1.0)


def scale(scaler: Any) -> float:
    return float(scaler.get_scale())


def save_state(scaler: Any) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The scale and growth tracker, copied on their device (``state_dict()`` would read them
    on the host: a device sync at every snapshot)."""
    return tuple(None if t is None else t.detach().clone()  # type: ignore[return-value]
                 for t in (scaler._scale, scaler._growth_tracker))


def load_state(scaler: Any, saved: tuple[torch.Tensor | None, torch.Tensor | None]) -> None:
    """Put back what `save_state` copied, in place."""
    for current, old in zip((scaler._scale, scaler._growth_tracker), saved):
        if current is not None and old is not None:
            current.copy_(old)
