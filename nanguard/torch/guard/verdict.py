"""The inspection of one step: is every gradient finite, on every rank? One host read.

`inspect` runs the fused finiteness check (`check.py`: one ``_foreach_norm`` launch whose
total is non-finite iff an element is, or the GradScaler's own inf check when a scaler is
active), all-reduces the per-rank flags under torch.distributed (`distributed.py`) and
brings the verdict, the total norm and (when monitoring) the per-module norms back in one
host read. Only when some rank is bad does it take the slow path and count the non-finite
elements per parameter (`diagnose`). The `Verdict` is what `GradGuard` acts on.

With sharded gradients (FSDP2) the norms are the full tensors' (one more collective, on every
step) and the slow path runs on every rank, whose counts are summed (`sharded.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from nanguard.torch.guard import amp
from nanguard.torch.guard.check import (
    Diagnosis,
    Grads,
    diagnose,
    gather,
    grad_norms,
    total_norm,
)
from nanguard.torch.guard.distributed import Agreement
from nanguard.torch.guard.monitor import GradNormMonitor
from nanguard.torch.guard.params import ParamTable
from nanguard.torch.guard.sharded import local


@dataclass
class Verdict:
    """The outcome of one inspection, kept until `GradGuard.step()` consumes it."""

    grads: Grads
    bad: bool  # agreed across ranks
    ranks: tuple[int, ...]  # ranks whose gradients were non-finite
    total: torch.Tensor  # total norm (device tensor; NaN when not computed)
    norms: torch.Tensor | None  # per gradient, in `grads` order (None when not computed)
    total_value: float
    module_norms: list[float] | None
    diagnosis: Diagnosis | None  # this rank's non-finite elements, when it has any
    scale: float | None
    zeroed: bool = False
    stamp: tuple[tuple[int, int], ...] | None = None  # gradients it was computed on
    # every rank's total norm (inspect's `all_totals`), else this rank's alone
    totals: tuple[float, ...] = ()


def stamp(table: ParamTable) -> tuple[tuple[int, int], ...] | None:
    """Identity and version counter of every gradient: any backward or in-place change
    after the clip's check (and before step) changes it, and the check is redone."""
    try:
        return tuple((id(p.grad), local(p.grad)._version) for p in table.params
                     if p.grad is not None)
    except RuntimeError:  # inference tensors have no version counter: never reuse
        return None


@torch.no_grad()
def inspect(table: ParamTable, optimizer: torch.optim.Optimizer, scaler: Any | None,
            monitor: GradNormMonitor | None, agreement: Agreement,
            ord: float = 2.0, need_norms: bool = False, all_totals: bool = False) -> Verdict:
    """Check the gradients of `table` once (``ord``: the norm returned as the total).

    `all_totals`: every rank's total norm travels with the flags (for the gradient-norm
    spike test, which must judge the same numbers on every rank); it needs the norms."""
    need_norms = need_norms or all_totals
    grads = gather(table, agreement)
    scaled = amp.active(scaler)
    norms: torch.Tensor | None = None
    if scaled:
        # unscale once; the scaler's fused kernel already flagged any NaN/Inf
        flag = amp.found_inf(scaler, optimizer) > 0
    if not scaled or monitor is not None or need_norms:
        norms = grad_norms(grads, ord)
    if norms is not None:
        total = total_norm(norms, ord)
    else:
        total = torch.full((), math.nan)
    modules = None
    if monitor is not None and norms is not None:
        l2 = norms if ord == 2.0 else grad_norms(grads, 2.0)
        modules = monitor.module_norms(l2, grads.index)
    if agreement.active() or scaled:
        # the flags travel with the norms: one read for everything
        if not scaled:
            flag = ~torch.isfinite(total)  # any NaN/Inf element makes the norm non-finite
        local_row = [flag.reshape(1).to(torch.float32)]
        if all_totals:
            local_row.append(total.reshape(1).to(flag.device, torch.float32))
        rows = agreement.rows(torch.cat(local_row))
        flags = rows[:, 0]
        parts = [flags.to(torch.float64), total.reshape(1).to(flags.device, torch.float64)]
        if all_totals:
            parts.append(rows[:, 1].to(torch.float64))
        if modules is not None:
            parts.append(modules.to(flags.device, torch.float64))
        values = torch.cat(parts).tolist()  # the one host sync of a finite step
        nflags = flags.numel()
        flag_values = values[:nflags]
        totals = tuple(values[nflags + 1:2 * nflags + 1]) if all_totals else (values[nflags],)
        first_module = nflags + 1 + (nflags if all_totals else 0)
    else:
        # local and unscaled: the total norm is the verdict, read it and nothing else
        if modules is not None:
            values = torch.cat([total.reshape(1).to(modules.dtype), modules]).tolist()
        else:
            values = [total.item()]  # the one host sync of a finite step
        values.insert(0, 0.0 if math.isfinite(values[0]) else 1.0)
        nflags = 1
        flag_values = values[:1]
        totals = (values[1],)
        first_module = 2
    module_norms = values[first_module:] if modules is not None else None
    rank = agreement.rank() if nflags > 1 else 0
    diagnosis = None
    scale = None
    if any(flag_values):
        # slow path: only on a bad step somewhere
        if scaled:
            scale = amp.scale(scaler)
        here = False
        # sharded: every rank counts (the counts are summed), on the same suspects, since
        # the norms were the full tensors'
        if flag_values[rank] or grads.sharding is not None:
            suspects = None
            if norms is not None:
                suspects = (~torch.isfinite(norms)).nonzero().flatten().tolist()
            diagnosis = diagnose(grads, suspects)
            here = diagnosis.here
            if not diagnosis.nonfinite:
                # every element finite: the norm itself overflowed (|g| > ~1e19 in float32),
                # the step is finite after all. The scaler's kernel checks elements, so
                # this only happens with the norm-based check.
                diagnosis = None
        if not scaled:  # the scaler's flags are exact and already agreed
            confirmed = torch.tensor(float(here))
            # every rank takes this branch (the flags were agreed), so the collective matches
            flag_values = agreement.flags(confirmed).tolist() if nflags > 1 else [
                float(diagnosis is not None)]
    ranks = tuple(i for i, f in enumerate(flag_values) if f)
    return Verdict(grads=grads, bad=bool(ranks), ranks=ranks, total=total, norms=norms,
                   total_value=values[nflags], module_norms=module_norms,
                   diagnosis=diagnosis, scale=scale, totals=totals)
