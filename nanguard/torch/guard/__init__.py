"""Recover: guard the training step against non-finite gradients, on one process or many.

- :class:`GradGuard` — ``guard.step()`` instead of ``optimizer.step()``: skip / zero / raise
  / roll back on NaN/Inf gradients (rolling back, also on loss or gradient-norm spikes),
  records what happened, works with GradScaler, clipping, gradient accumulation
  (``guard.backward``), LR schedulers, torch.distributed (DDP, ZeRO) and sharded gradients
  (FSDP2's DTensors, FSDP1's flat parameters).
- :class:`GradNormMonitor` — early warning (:class:`GradientGrowthWarning`) when per-module
  gradient norms explode, naming the module where the growth started; with ``headroom=True``
  also (:class:`HeadroomWarning`) when float16/bfloat16 activations or gradients approach the
  dtype's maximum.

Modules, one concept each: ``guard`` (the GradGuard class, its arguments and its step; its
other methods in ``guard_loss``, ``guard_recovery``, ``guard_state`` and ``guard_report``), ``policy`` (skip,
zero, raise or roll back: the arguments, the decision, the error message), ``verdict`` (one step's
inspection and its single host read), ``check`` (the fused finiteness check), ``amp``
(GradScaler protocol), ``distributed`` (agreement across ranks), ``clip`` (the guarded clip),
``monitor`` (norm history and early warning), ``growth`` (its warning and alert),
``headroom`` (float16/bfloat16 headroom),
``history`` (the bounded norm history), ``nanguard.core.guard_records`` (events and the summary),
``params`` (names), ``plot`` (matplotlib, optional), ``window`` (gradient-accumulation windows),
``schedule`` (LR schedules held on a skip), ``checkpoint`` (safe_to_save, post-mortem dumps),
``rollback`` (policy "rollback": the snapshot and its restore; spikes in
``nanguard.core.guard_spike``), ``sharded`` (FSDP2/FSDP1: which rank counts which shard, norms and counts of full tensors).
"""

from nanguard.core.guard_records import GuardEvent, GuardRecords, ParamIssue
from nanguard.torch.guard.guard import GradGuard
from nanguard.torch.guard.headroom import HeadroomAlert, HeadroomWarning
from nanguard.torch.guard.monitor import GradientGrowthWarning, GradNormMonitor, GrowthAlert

__all__ = [
    "GradGuard",
    "GradNormMonitor",
    "GradientGrowthWarning",
    "GrowthAlert",
    "HeadroomAlert",
    "HeadroomWarning",
    "GuardEvent",
    "GuardRecords",
    "ParamIssue",
]
