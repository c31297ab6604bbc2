"""Checkpoint hygiene: never save NaN weights over a good checkpoint; keep the batch that
broke a step for a post-mortem.

- ``guard.safe_to_save()``: every parameter, every floating buffer of the model and every
  floating optimizer-state tensor (Adam's moments) is finite, on every rank (the answer is
  agreed, so rank 0 does not save while another rank's shard is NaN). A skipped step keeps
  the weights finite, but a NaN forward pass in training mode still poisons BatchNorm's
  running statistics, and policy "zero" or a user's own update can still write NaN.
- ``GradGuard(..., dump_dir="nan_batches")`` with ``guard.backward(loss, batch=...)``: each
  bad step writes the micro-batches that fed it (moved to CPU), the step, the rank and the
  event to ``dump_dir/nanguard-step000123-rank0.pt`` (``torch.load`` it), at most
  ``max_dumps`` files per run. With an active GradScaler an Inf-only overflow is its scale
  calibrating, not a bad batch, and is not dumped.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Iterable

import torch

from nanguard.core.guard_records import GRADIENTS, GuardEvent
from nanguard.torch.guard.distributed import Agreement
from nanguard.torch.guard.sharded import local


def _checkable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def state_tensors(names: Iterable[tuple[str, torch.Tensor]], optimizer: torch.optim.Optimizer,
                  model: torch.nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) of everything a checkpoint holds that can be non-finite."""
    named = list(names)
    by_id = {id(p): n for n, p in named}
    out = [(n, p.detach()) for n, p in named]
    if model is not None:
        out += [(f"buffer {n}", b) for n, b in model.named_buffers() if _checkable(b)]
    for p, state in optimizer.state.items():
        for key, value in state.items():
            if _checkable(value):
                out.append((f"optimizer state {by_id.get(id(p), '?')}.{key}", value))
    return out


@torch.no_grad()
def nonfinite_names(tensors: list[tuple[str, torch.Tensor]], agreement: Agreement
                    ) -> tuple[list[str], bool]:
    """(this rank's non-finite tensor names, whether any rank has one); one host sync.

    A sharded tensor (FSDP2's DTensor parameters and Adam moments) is checked on this rank's
    shard; the agreement covers the others."""
    tensors = [(n, local(t)) for n, t in tensors]
    if tensors:
        device = tensors[0][1].device  # model-parallel tensors are gathered to one device
        flags = torch.stack([(~torch.isfinite(t).all()).to(device) for _, t in tensors]).cpu()
        mine = flags.any()
    else:
        flags = torch.zeros(0, dtype=torch.bool)
        mine = torch.zeros((), dtype=torch.bool)
    anywhere = any(agreement.flags(mine).tolist())
    names = [n for (n, _), f in zip(tensors, flags.tolist()) if f] if anywhere else []
    return names, anywhere


def check_dump_dir(dump_dir: object, max_dumps: object) -> tuple[str | None, int]:
    if dump_dir is not None and not isinstance(dump_dir, (str, os.PathLike)):
        raise TypeError(f"nanguard.GradGuard: `dump_dir` must be a path or None, "
                        f"got {type(dump_dir).__name__}")
    if isinstance(max_dumps, bool) or not isinstance(max_dumps, int) or max_dumps < 0:
        raise ValueError(f"nanguard.GradGuard: `max_dumps` must be an int >= 0, got {max_dumps!r}")
    return (os.fspath(dump_dir) if dump_dir is not None else None), max_dumps


def to_cpu(batch: Any) -> Any:
    """The batch with every tensor detached and on the CPU (containers rebuilt, others kept)."""
    if isinstance(batch, torch.Tensor):
        return batch.detach().cpu()
    if isinstance(batch, dict):
        return {k: to_cpu(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)) and not hasattr(batch, "_fields"):
        return type(batch)(to_cpu(v) for v in batch)
    if isinstance(batch, tuple):  # a namedtuple
        return type(batch)(*(to_cpu(v) for v in batch))
    return batch


def worth_dumping(event: GuardEvent, scaler_active: bool) -> bool:
    if event.kind != GRADIENTS or not scaler_active:
        return True
    return any(p.nan for p in event.params)


def dump(dump_dir: str, event: GuardEvent, batches: list[tuple[int, Any]], rank: int) -> str | None:
    """Write the post-mortem file; returns its path (None, with a warning, if it failed)."""
    path = os.path.join(dump_dir, f"nanguard-step{event.step:06d}-rank{rank}.pt")
    payload = {"step": event.step, "rank": rank, "what": event.describe(),
               "event": event.to_dict(), "micro_batches": {i: to_cpu(b) for i, b in batches}}
    try:
        os.makedirs(dump_dir, exist_ok=True)
        torch.save(payload, path)
    except Exception as error:  # a post-mortem must never kill the run it documents
        warnings.warn(f"nanguard.GradGuard: could not dump the batch of step {event.step} to "
                      f"{path}: {error}", RuntimeWarning, stacklevel=3)
        return None
    return path
