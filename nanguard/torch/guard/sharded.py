"""Sharded gradients (FSDP2 ``fully_shard``, DTensor): check the shards, decide on the whole.

Under FSDP2 every parameter and its gradient is a ``DTensor``: each rank holds one shard
(``Shard(0)``, possibly empty). The guard works on the local shards (``to_local()`` shares
their storage, so zeroing and clipping in place reach the DTensor) and reduces over the
device mesh what must describe the *full* gradient, so that every rank acts alike:

- per-parameter norms: ``‖g‖_p = (Σ_ranks ‖shard‖_p^p)^(1/p)`` (the max for p = ∞), summed
  in float64 so a finite gradient's squares cannot overflow. The total norm, the clip
  coefficient and the monitor's module norms are those of the full gradients, identical on
  every rank (clipping each shard by its own norm is the FSDP1 mistake this avoids);
- non-finite element counts: summed, so a report counts the elements of the full tensor.

A placement that replicates a mesh dimension (``Replicate()``, as in HSDP's outer dimension)
is counted once, by the ranks at coordinate 0 of that dimension, so replicas do not inflate
norms or counts. A plain (non-DTensor) gradient next to sharded ones is taken as replicated.
``Partial()`` gradients are not reduced yet and are refused, as is a mesh that does not span
the guard's process group (whose sums would then mix different parameters).

FSDP1 (``FullyShardedDataParallel``) shards plain tensors: each rank's ``FlatParameter`` (or,
with ``use_orig_params=True``, each original parameter) holds a 1-d slice of the flattened
gradient, possibly empty with ``grad`` None. `fsdp1_layout` reads the wrapped model's handles
for what the tensors cannot say: which parameters are slices, whether this rank counts its
slice (NO_SHARD replicates: rank 0 counts) and the full shapes the reports show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from nanguard.torch.guard.distributed import Agreement


def dtensor_type() -> type | None:
    """``torch.distributed.tensor.DTensor``, or None where torch.distributed is missing."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed support
        return None
    return DTensor


def is_sharded(t: torch.Tensor) -> bool:
    if type(t) is torch.Tensor:  # the common case, without importing torch.distributed
        return False
    kind = dtensor_type()
    return kind is not None and isinstance(t, kind)


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of `t`: the local shard of a DTensor (same storage), else `t`."""
    return t.to_local() if is_sharded(t) else t


@dataclass(frozen=True)
class Sharding:
    """How to turn per-shard norms and counts into full-tensor ones, for one step's gradients.

    `owned[k]` says whether this rank contributes gradient k's shard to the sums (False for
    a replica of another rank's copy)."""

    agreement: Agreement
    owned: Tuple[bool, ...]

    def _reduce(self, values: torch.Tensor, op: str) -> torch.Tensor:
        import torch.distributed as dist

        device = self.agreement._device(values.device)
        buf = values.to(device)
        dist.all_reduce(buf, op=getattr(dist.ReduceOp, op), group=self.agreement.group)
        return buf.to(values.device)

    def norms(self, local_norms: torch.Tensor, ord: float) -> torch.Tensor:
        """Full-gradient norms from this rank's per-shard norms (a collective: every rank)."""
        if local_norms.numel() == 0:
            return local_norms
        owned = torch.tensor(self.owned, device=local_norms.device)
        wide = local_norms.to(torch.float64)
        if math.isinf(ord):
            # the max of the shards' maxima; a replica repeats a value, which max ignores
            full = self._reduce(wide, "MAX")
        else:
            powered = torch.where(owned, wide.abs() ** ord, torch.zeros_like(wide))
            full = self._reduce(powered, "SUM") ** (1.0 / ord)
        return full.to(local_norms.dtype)

    def counts(self, rows: torch.Tensor, positions: Sequence[int]) -> torch.Tensor:
        """Full-tensor (nan, inf) counts from this rank's `rows` for gradients `positions`."""
        owned = torch.tensor([self.owned[k] for k in positions], device=rows.device)
        return self._reduce(rows * owned.unsqueeze(1).to(rows.dtype), "SUM")


def _check_placements(t: Any, where: str) -> None:
    for placement in t.placements:
        if placement.is_partial():
            raise ValueError(
                f"nanguard.{where}: a gradient is a DTensor with a Partial() placement "
                f"(not reduced across ranks yet), so its values are not the gradient; reduce "
                f"it (grad.redistribute(placements=[Replicate()])) before the guard's step")


def _owned(t: Any) -> bool:
    coordinate = t.device_mesh.get_coordinate()
    if coordinate is None:  # this rank is outside the mesh and holds nothing of it
        return False
    return all(c == 0 for c, p in zip(coordinate, t.placements) if p.is_replicate())


@dataclass(frozen=True)
class FlatShards:
    """FSDP1's slices: for id(parameter), whether this rank counts its slice, and the full
    shape of the parameter (a FlatParameter's: its unpadded, unsharded length)."""

    owned: Dict[int, bool]
    shapes: Dict[int, Tuple[int, ...]]
    names: Dict[int, str]  # a FlatParameter's name: the parameters it flattens


_FSDP1_SHARDED = ("FULL_SHARD", "SHARD_GRAD_OP")
# FSDP1 and activation checkpointing insert these module names into parameter names
_WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


def strip(name: str) -> str:
    """A parameter name without the wrappers' module names."""
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def fsdp1_layout(model: Optional[torch.nn.Module], params: Sequence[torch.Tensor],
                 agreement: Agreement, where: str) -> FlatShards | None:
    """The FSDP1 layout of `model`, or None when no parameter in `params` is FSDP1's."""
    flat = [p for p in params if getattr(p, "_fsdp_flattened", False) and not is_sharded(p)]
    if not flat:
        return None
    units = []
    if model is not None:
        from torch.distributed.fsdp import FullyShardedDataParallel

        units = [u for u in FullyShardedDataParallel.fsdp_modules(model) if u._handle is not None]
    if not units:
        raise ValueError(
            f"nanguard.{where}: the optimizer's parameters are FSDP1 shards "
            f"(FullyShardedDataParallel) but no FSDP-wrapped `model` was given; pass "
            f"model=<the FSDP root>, so the guard knows how the shards add up (otherwise each "
            f"rank would clip and count with its own slice)")
    if not agreement.active():
        raise ValueError(
            f"nanguard.{where}: FSDP1 shards need the guard to agree across ranks; leave "
            f"distributed=None (the default)")
    rank, size = agreement.rank_and_size()
    owned: Dict[int, bool] = {}
    shapes: Dict[int, Tuple[int, ...]] = {}
    names: Dict[int, str] = {}
    for unit in units:
        strategy = unit._handle._sharding_strategy.name
        if strategy in _FSDP1_SHARDED:
            counts_here = True
        elif strategy == "NO_SHARD":
            counts_here = rank == 0  # every rank holds the whole gradient
        else:
            raise ValueError(
                f"nanguard.{where}: FSDP1 with sharding strategy {strategy} (sharded within a "
                f"node, replicated across nodes) is not supported; use FULL_SHARD, "
                f"SHARD_GRAD_OP or NO_SHARD, or FSDP2's fully_shard with a 2-d mesh")
        group_size = unit.process_group.size()
        if strategy in _FSDP1_SHARDED and group_size != size:
            raise ValueError(
                f"nanguard.{where}: an FSDP1 unit shards over {group_size} ranks but the guard "
                f"agrees over {size}; pass GradGuard(..., process_group=<the FSDP group>)")
        flat_param = unit._handle.flat_param
        owned[id(flat_param)] = counts_here
        shapes[id(flat_param)] = tuple(flat_param._unpadded_unsharded_size)
        fqns = [strip(n) for n in flat_param._fqns]
        listed = ", ".join(fqns[:3]) + (f", +{len(fqns) - 3} more" if len(fqns) > 3 else "")
        names[id(flat_param)] = f"flat[{listed}]"
        for p, shape in zip(flat_param._params or (), flat_param._shapes):
            owned[id(p)] = counts_here
            shapes[id(p)] = tuple(shape)
    return FlatShards(owned, shapes, names)


def sharding_of(grads: Sequence[torch.Tensor], agreement: Agreement, where: str,
                flat_owned: Sequence[Optional[bool]] | None = None
                ) -> Tuple[List[torch.Tensor], Sharding | None]:
    """(the local parts of `grads`, their Sharding or None when nothing is sharded).

    `flat_owned[k]` is set for an FSDP1 slice (whether this rank counts it), else None."""
    if flat_owned is None and (all(type(g) is torch.Tensor for g in grads)
                               or not any(is_sharded(g) for g in grads)):
        return list(grads), None
    if not agreement.active():
        raise ValueError(
            f"nanguard.{where}: the gradients are sharded (DTensor, e.g. FSDP2's fully_shard) "
            f"but the guard does not agree across ranks (distributed=False): a skip or a clip "
            f"decided on one shard would apply part of a step. Leave distributed=None (the "
            f"default) so the decision is taken on the full gradients")
    rank, group_size = agreement.rank_and_size()
    owned: List[bool] = []
    parts: List[torch.Tensor] = []
    for k, g in enumerate(grads):
        if flat_owned is not None and flat_owned[k] is not None:
            owned.append(flat_owned[k])
            parts.append(g)
        elif is_sharded(g):
            _check_placements(g, where)
            if g.device_mesh.size() != group_size:
                raise ValueError(
                    f"nanguard.{where}: a gradient's device mesh has {g.device_mesh.size()} "
                    f"ranks but the guard agrees over {group_size}; pass the mesh's group as "
                    f"GradGuard(..., process_group=...) so norms are summed over its shards only")
            owned.append(_owned(g))
            parts.append(g.to_local())
        else:
            owned.append(rank == 0)  # a plain gradient beside shards: the same on every rank
            parts.append(g)
    return parts, Sharding(agreement, tuple(owned))
