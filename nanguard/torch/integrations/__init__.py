"""Recover inside the frameworks that own the training step.

One module per framework, each imported only when used, each a few lines for the user:

- :mod:`.accelerate` — :func:`guard_accelerator`: guards the optimizer steps an
  ``accelerate.Accelerator`` takes (not its micro-batches), checks before its clip, and makes
  accelerate's own scheduler and the HF Trainer hold the schedule on a skipped step.
- :mod:`.hf` — :func:`guard_trainer`: the same inside ``transformers.Trainer``, plus the
  guard's counters in the Trainer's logs.
- :mod:`.lightning` — :class:`GuardCallback` for ``pytorch_lightning.Trainer``.

They drive :class:`nanguard.GradGuard` through two seams, ``_micro_batch`` (a loss check
around the framework's own backward) and ``_step`` (a decision around the framework's own
optimizer update), so the policies, counts, names and records are the guard's.
"""
