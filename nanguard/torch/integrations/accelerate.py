"""accelerate: guard the optimizer steps an ``Accelerator`` takes, not its micro-batches.

Under ``accelerator.accumulate(model)`` the loop calls ``optimizer.step()`` on every
micro-batch and accelerate turns all but the last of a window into no-ops. A guard on that
call would count micro-batches; this one acts only when ``accelerator.sync_gradients`` is
set, so a step is an optimizer step. :func:`guard_accelerator` wraps three calls of the
prepared objects, and the loop stays as accelerate's documentation writes it:

- ``accelerator.backward(loss)``: a non-finite loss is not backpropagated; its window is
  skipped (``accumulation="skip_window"``) or the micro-batch dropped (``"drop"``);
- ``accelerator.clip_grad_norm_(model.parameters(), max_norm)``: checked *before* clipping
  (torch's clip multiplies every gradient by NaN when one is NaN), same bits when finite;
- ``optimizer.step()``: skip, zero, raise or roll back as :class:`nanguard.GradGuard` does.
  A skip (a rollback too) is reported the way accelerate reports an AMP overflow
  (``optimizer.step_was_skipped``), so ``AcceleratedScheduler.step()`` and the HF Trainer
  hold the learning-rate schedule. Under policy "rollback" the snapshot is taken inside this
  call before the update, and the scheduler given as ``scheduler=`` is part of it.

With fp16 mixed precision the guard uses the accelerator's GradScaler: one unscale, its inf
check reused, the scale backs off after a bad step as accelerate's own skip does.

The loop is the user's, so the run ends where accelerate's documentation ends it:
``accelerator.end_training()`` prints the guard's one-line summary on the main process.
"""

from __future__ import annotations

from typing import Any

from nanguard.torch.guard.guard import ON_APPLY, GradGuard
from nanguard.torch.guard.params import NamedParams
from nanguard.torch.integrations._require import require
from nanguard.torch.integrations._rollback import follow, rollback_options

# The distributed types whose clip and step are plain torch (DDP or one process); FSDP,
# DeepSpeed, Megatron and XLA shard or fuse the step in ways this guard does not see.
SUPPORTED = ("NO", "MULTI_CPU", "MULTI_GPU", "MULTI_XPU", "MULTI_NPU", "MULTI_MLU",
             "MULTI_MUSA", "MULTI_HPU", "MULTI_SDAA")


def guard_accelerator(accelerator: Any, optimizer: Any, *, model: NamedParams | None = None,
                      policy: str = "skip", max_consecutive: int | None = 25,
                      accumulation: str = "skip_window", monitor: bool = False,
                      max_events: int = 1000, summary: bool = True,
                      snapshot_every: int | None = None, spike: Any = None,
                      lr_backoff: float | None = None, scheduler: Any = None) -> GradGuard:
    """Guard the optimizer steps of `accelerator` (call it after ``accelerator.prepare``).

    Args:
        accelerator: the ``accelerate.Accelerator``.
        optimizer: the optimizer ``accelerator.prepare`` returned.
        model: the prepared model (or its ``named_parameters()``), for parameter names.
        policy, max_consecutive, accumulation, monitor, max_events: as for
            :class:`nanguard.GradGuard`. Policy "zero" is refused with fp16 mixed precision:
            an overflowing step must let the scaler back off.
        summary: print the one-line summary at ``accelerator.end_training()`` (main process).
        snapshot_every, spike, lr_backoff: policy "rollback", as for :class:`nanguard.GradGuard`.
            The snapshot is taken and restored inside the guarded ``optimizer.step()``; a
            rollback is reported as a skipped step, so the prepared scheduler holds.
        scheduler: policy "rollback": the (prepared) LR scheduler the loop steps; its state
            is kept in the snapshot and restored with the model and optimizer. Without it
            the param groups' ``lr`` come back but the scheduler's position does not.

    Returns the :class:`nanguard.GradGuard` (``guard.records``, ``guard.summary()``,
    ``guard.plot()``).

    Example:
        >>> model, optimizer, data, sched = accelerator.prepare(model, optimizer, data, sched)
        >>> guard = guard_accelerator(accelerator, optimizer, model=model)
        >>> for x, y in data:
        ...     with accelerator.accumulate(model):
        ...         accelerator.backward(loss_fn(model(x), y))
        ...         if accelerator.sync_gradients:
        ...             accelerator.clip_grad_norm_(model.parameters(), 1.0)
        ...         optimizer.step(); sched.step(); optimizer.zero_grad()
    """
    accelerate = require("accelerate", "hf", "accelerate")
    from accelerate.optimizer import AcceleratedOptimizer

    if not isinstance(accelerator, accelerate.Accelerator):
        raise TypeError(f"nanguard.guard_accelerator: `accelerator` must be an "
                        f"accelerate.Accelerator, got {type(accelerator).__name__}")
    if not isinstance(optimizer, AcceleratedOptimizer):
        raise TypeError(f"nanguard.guard_accelerator: `optimizer` must be the optimizer returned "
                        f"by accelerator.prepare(...), got {type(optimizer).__name__}")
    check_distributed_type(accelerator, "guard_accelerator")
    options = rollback_options(policy, snapshot_every, spike, lr_backoff, accumulation,
                               "nanguard.guard_accelerator")
    if scheduler is not None and options["policy"] != "rollback":
        raise ValueError("nanguard.guard_accelerator: `scheduler` belongs to policy='rollback' "
                         "(the loop steps it; a rollback restores it)")
    scaler = accelerator.scaler
    if scaler is not None and policy == "zero":
        raise ValueError("nanguard.guard_accelerator: policy 'zero' cannot be used with fp16 "
                         "mixed precision: an overflow must skip the step so the GradScaler "
                         "backs its scale off; use policy 'skip'")
    if not isinstance(summary, bool):
        raise TypeError(f"nanguard.guard_accelerator: `summary` must be a bool, got {summary!r}")
    guard = GradGuard(optimizer.optimizer, max_consecutive=max_consecutive, model=model,
                      scaler=scaler, monitor=monitor, max_events=max_events,
                      accumulation=accumulation, **options)
    follow(guard, [scheduler])
    install(guard, accelerator, optimizer)
    _print_at_end_training(accelerator, summary)
    return guard


def _print_at_end_training(accelerator: Any, summary: bool) -> None:
    """Print the installed guard's line at ``end_training()`` (wrapped once per accelerator,
    like the seams of :func:`install`)."""
    state = accelerator._nanguard
    state["summary"] = summary
    if "end_training" in state:
        return
    state["end_training"] = accelerator.end_training  # bound; an instance attribute shadows it

    def end_training(*args: Any, **kwargs: Any) -> Any:
        if state["summary"] and accelerator.is_main_process:
            print(state["guard"].records.line(), flush=True)
        return state["end_training"](*args, **kwargs)

    accelerator.end_training = end_training


def check_distributed_type(accelerator: Any, where: str) -> None:
    kind = getattr(accelerator.distributed_type, "name", str(accelerator.distributed_type))
    if kind not in SUPPORTED:
        raise NotImplementedError(
            f"nanguard.{where}: accelerate's {kind} mode is not supported yet (its clip and "
            f"step are sharded or fused out of the guard's sight); supported: one process "
            f"and DDP ({', '.join(SUPPORTED[:3])}, ...)")


def install(guard: GradGuard, accelerator: Any, optimizer: Any) -> None:
    """Wrap ``accelerator.backward``, ``accelerator.clip_grad_norm_`` and ``optimizer.step``.

    Instance attributes shadow the methods, so only these objects change; installing twice
    (a Trainer that calls ``train()`` again) re-targets the wrappers to the new guard.
    """
    state = getattr(accelerator, "_nanguard", None)
    if state is None:
        state = {"backward": accelerator.backward, "clip": accelerator.clip_grad_norm_}
        accelerator._nanguard = state
    state["guard"] = guard
    original_backward, original_clip = state["backward"], state["clip"]

    def backward(loss: Any, **kwargs: Any) -> None:
        state["guard"]._micro_batch(loss, None, lambda: original_backward(loss, **kwargs))

    def clip_grad_norm_(parameters: Any, max_norm: float, norm_type: float = 2) -> Any:
        params = list(parameters)
        current = state["guard"]
        if same_gradients(params, current.optimizer):
            return current._clip(max_norm, norm_type, params)  # their order: same bits
        return original_clip(params, max_norm, norm_type)  # a subset: not the step's check

    accelerator.backward = backward
    accelerator.clip_grad_norm_ = clip_grad_norm_

    opt_state = getattr(optimizer, "_nanguard", None)
    if opt_state is None:
        opt_state = {"step": optimizer.step}
        optimizer._nanguard = opt_state
    opt_state["guard"] = guard
    original_step = opt_state["step"]

    def step(closure: Any = None) -> None:
        if closure is not None:
            raise TypeError("nanguard: a guarded optimizer.step() takes no closure; compute "
                            "the loss and call accelerator.backward(loss) first")
        if not optimizer.gradient_state.sync_gradients:
            return original_step()  # a micro-batch inside accumulate(): accelerate's no-op
        current = opt_state["guard"]
        applied = current._step(original_step, scaler_step=ON_APPLY)
        if not applied:
            if current.scaler is not None:
                current.scaler.update()  # accelerate's step (which updates) did not run
            optimizer._is_overflow = True  # step_was_skipped: the scheduler holds
        elif current.scaler is None:
            optimizer._is_overflow = False
        return None

    if hasattr(original_step, "_wrapped_by_lr_sched"):
        # an LRScheduler made before the guard marked the step it counts calls of; keep the
        # mark, or torch warns that optimizer.step() was overridden after the scheduler
        step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = step


def same_gradients(params: list[Any], optimizer: Any) -> bool:
    """Whether clipping `params` is clipping the step's gradients (those the guard checks):
    the same tensors with a gradient (a frozen parameter, without one, does not matter)."""
    given = {id(p) for p in params if getattr(p, "grad", None) is not None}
    guarded = {id(p) for group in optimizer.param_groups for p in group["params"]
               if p.grad is not None}
    return given == guarded
