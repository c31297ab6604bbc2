"""The fused finiteness check: one pass over all gradients, no host sync of its own.

``torch._foreach_norm`` (the kernel ``clip_grad_norm_`` uses) gives every gradient's norm in
one multi-tensor launch per (device, dtype). The total norm is non-finite whenever any
element is NaN or ±Inf, so its finiteness is the step's verdict, and the per-parameter norms
feed the gradient-norm monitor and the guarded clip at no extra cost.

A finite gradient whose squares overflow (|g| > ~1.8e19 in float32) also yields an infinite
norm; `diagnose` counts the actual non-finite elements, so such a step is confirmed as
finite on the (rare) slow path instead of being skipped.

Sharded gradients (FSDP2's DTensors) are checked shard by shard and their norms and counts
reduced to those of the full tensors (`sharded.py`); `grad_norms` and `diagnose` do it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import torch

from nanguard.torch._compat import foreach_mul_, foreach_norm
from nanguard.torch.guard.distributed import Agreement
from nanguard.torch.guard.params import ParamTable
from nanguard.torch.guard.sharded import Sharding, sharding_of

_LOW_PRECISION = (torch.float16, torch.bfloat16)


@dataclass
class Grads:
    """The gradients present this step: `index[k]` is the table position of `tensors[k]`."""

    index: Tuple[int, ...]
    tensors: List[torch.Tensor]  # dense values (a sparse gradient's `_values()`, a shard)
    sharding: Sharding | None = None  # how shards add up, when the gradients are DTensors


def gather(table: ParamTable, agreement: Agreement | None = None) -> Grads:
    index: List[int] = []
    tensors: List[torch.Tensor] = []
    flat = table.flat_owned
    for i, p in enumerate(table.params):
        g = p.grad
        if g is None:
            if flat is None or flat[i] is None:
                continue
            # an FSDP1 slice that is empty on this rank has no grad; every rank must list
            # the same gradients for the reductions, so it takes part with no elements
            g = p.detach().new_zeros(0)
        index.append(i)
        # a sparse gradient's values are checked and zeroed in place; the indices are integers
        tensors.append(g._values() if g.is_sparse else g)
    sharding = None
    if agreement is not None:
        flat_owned = [flat[i] for i in index] if flat is not None else None
        tensors, sharding = sharding_of(tensors, agreement, "GradGuard", flat_owned)
    return Grads(tuple(index), tensors, sharding)


def foreach_norms(tensors: Sequence[torch.Tensor], ord: float = 2.0) -> torch.Tensor:
    """Norms of all `tensors` as one 1-d tensor, in input order, on the first tensor's device.

    Low-precision gradients are reduced in float32: the float16 norm of finite gradients
    overflows at 65504 and would look non-finite.
    """
    if not tensors:
        return torch.zeros(0)
    first = tensors[0].device
    kinds = {(t.device, t.dtype) for t in tensors}
    out_dtype = torch.float64 if any(dt == torch.float64 for _, dt in kinds) else torch.float32
    if len(kinds) == 1:  # the common case: one launch
        ((_, dtype),) = kinds
        acc = torch.float32 if dtype in _LOW_PRECISION else None
        norms = foreach_norm(list(tensors), ord, dtype=acc)
        return torch.stack(norms).to(out_dtype)
    by_kind: Dict[Tuple[torch.device, torch.dtype], List[int]] = defaultdict(list)
    for k, t in enumerate(tensors):
        by_kind[(t.device, t.dtype)].append(k)
    ordered: List[torch.Tensor] = [torch.empty(0)] * len(tensors)
    for (device, dtype), positions in by_kind.items():
        acc = torch.float32 if dtype in _LOW_PRECISION else None
        norms = foreach_norm([tensors[k] for k in positions], ord, dtype=acc)
        for k, n in zip(positions, norms):
            ordered[k] = n.to(device=first, dtype=out_dtype)
    return torch.stack(ordered)


def grad_norms(grads: Grads, ord: float = 2.0) -> torch.Tensor:
    """The norm of every gradient in `grads` (of the full tensor, when it is sharded)."""
    norms = foreach_norms(grads.tensors, ord)
    if grads.sharding is not None:
        norms = grads.sharding.norms(norms, ord)  # a collective: every rank gets here
    return norms


def total_norm(norms: torch.Tensor, ord: float = 2.0) -> torch.Tensor:
    """The norm of the concatenated gradients from their per-tensor norms (as clip_grad_norm_)."""
    if norms.numel() == 0:
        return torch.zeros((), dtype=norms.dtype, device=norms.device)
    return torch.linalg.vector_norm(norms, ord)


@dataclass
class Diagnosis:
    """Non-finite element counts for the parameters whose gradients have any."""

    counts: Dict[int, Tuple[int, int]]  # table position -> (nan, inf), of the full tensors
    here: bool = True  # whether this rank's own gradients (its shards) hold any of them

    @property
    def nonfinite(self) -> bool:
        return bool(self.counts)


@torch.no_grad()
def diagnose(grads: Grads, suspects: Sequence[int] | None = None) -> Diagnosis:
    """Count NaN and ±Inf per gradient (slow path: runs only on a bad step, one host sync).

    `suspects` (positions in `grads`) narrows the count to the gradients whose norm was
    non-finite; every non-finite element makes its tensor's norm non-finite, so none is missed.
    With sharded gradients every rank must call it with the same `suspects` (the counts are
    summed across ranks).
    """
    positions = range(len(grads.tensors)) if suspects is None else suspects
    kept = [k for k in positions
            if grads.tensors[k].dtype.is_floating_point or grads.tensors[k].dtype.is_complex]
    rows = torch.zeros(len(kept), 2, dtype=torch.int64)
    by_device: Dict[torch.device, List[int]] = defaultdict(list)
    for row, k in enumerate(kept):
        by_device[grads.tensors[k].device].append(row)
    for device_rows in by_device.values():
        # one transfer per device: stack the counts there, read them once
        counts = torch.stack([torch.stack([torch.isnan(grads.tensors[kept[r]]).sum(),
                                           torch.isinf(grads.tensors[kept[r]]).sum()])
                              for r in device_rows])
        rows[device_rows] = counts.cpu()
    here = bool(rows.any())
    if grads.sharding is not None:
        rows = grads.sharding.counts(rows, kept)
    found: Dict[int, Tuple[int, int]] = {}
    for k, (nan, inf) in zip(kept, rows.tolist()):
        if nan or inf:
            found[grads.index[k]] = (int(nan), int(inf))
    return Diagnosis(found, here)


@torch.no_grad()
def zero_nonfinite_(grads: Grads, diagnosis: Diagnosis) -> None:
    """Replace only the non-finite gradient elements by 0, in place; finite ones keep their bits."""
    where = {i: k for k, i in enumerate(grads.index)}
    for i in diagnosis.counts:
        t = grads.tensors[where[i]]
        t.masked_fill_(~torch.isfinite(t), 0)


@torch.no_grad()
def scale_(tensors: Sequence[torch.Tensor], coef: torch.Tensor) -> None:
    """Multiply every tensor by the 0-d `coef` in place: one foreach launch per (device, dtype)."""
    by_kind: Dict[Tuple[torch.device, torch.dtype], List[torch.Tensor]] = defaultdict(list)
    for t in tensors:
        by_kind[(t.device, t.dtype)].append(t)
    for (device, _), group in by_kind.items():
        foreach_mul_(group, coef.to(device))
