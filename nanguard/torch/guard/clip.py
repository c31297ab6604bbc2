"""The guarded clip: ``clip_grad_norm_`` whose non-finite total norm follows the policy.

``torch.nn.utils.clip_grad_norm_`` computes ``max_norm / (total + 1e-6)`` and multiplies every
gradient by it. With one NaN element the total is NaN, so is the coefficient, and *every*
gradient becomes NaN (with the default ``error_if_nonfinite=False``); with an Inf element the
coefficient is 0 and every gradient is wiped. Here the total comes from the guard's own
check, and a non-finite one never reaches the multiplication.

A finite total is torch's to the bit: the per-gradient norms are the check's, and they are
added up in the order torch adds them for ``clip_grad_norm_(model.parameters())`` (grouped by
device and dtype, each group in the model's order), not in the optimizer's. Floating-point
addition is not associative: an optimizer with two param groups (weights that decay, then
biases and norms, as the HF Trainer builds AdamW) lists the parameters in another order, and
its sum differs in the last bit on about one step in seven.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import torch

from nanguard.torch._compat import group_tensors_by_device_and_dtype
from nanguard.torch.guard.check import Diagnosis, Grads, grad_norms, scale_, total_norm, zero_nonfinite_


def check_args(max_norm: object, norm_type: object) -> Tuple[float, float]:
    where = "nanguard.GradGuard.clip_grad_norm_"
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)):
        raise TypeError(f"{where}: `max_norm` must be a number, got {type(max_norm).__name__}")
    if not (max_norm > 0 and math.isfinite(max_norm)):
        raise ValueError(f"{where}: `max_norm` must be a finite number > 0, got {max_norm}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or not norm_type > 0:
        raise ValueError(f"{where}: `norm_type` must be a number > 0 or float('inf'), got {norm_type!r}")
    return float(max_norm), float(norm_type)


def torch_order(grads: Grads, order: Sequence[int]) -> List[int]:
    """Positions in `grads` in the order ``clip_grad_norm_`` adds their norms, for parameters
    listed in `order` (table positions): grouped by (device, dtype) as torch groups them,
    each group in `order`. Gradients `order` does not list come last."""
    where = {i: k for k, i in enumerate(grads.index)}
    ks = [where[i] for i in order if i in where]
    if len(ks) != len(where):
        listed = set(ks)
        ks += [k for k in range(len(grads.index)) if k not in listed]
    tensors = [grads.tensors[k] for k in ks]
    if len({(t.device, t.dtype) for t in tensors}) > 1:
        grouped = group_tensors_by_device_and_dtype([tensors], with_indices=True)
        ks = [ks[j] for _, (_, indices) in grouped.items() for j in indices]
    return ks


def ordered_total(grads: Grads, norms: torch.Tensor, order: Sequence[int],
                  norm_type: float) -> torch.Tensor:
    """The total norm from the per-gradient `norms`, added up in torch's order (see above)."""
    ks = torch_order(grads, order)
    if ks != list(range(len(ks))):
        # views stacked on the device: an index tensor would be a copy from the host, and a
        # copy from pageable memory waits for the device
        norms = torch.stack([norms[k] for k in ks])
    return total_norm(norms, norm_type)


@torch.no_grad()
def clip_(grads: Grads, norms: torch.Tensor, order: Sequence[int], bad: bool,
          diagnosis: Diagnosis | None, zero: bool, max_norm: float,
          norm_type: float) -> Tuple[torch.Tensor, bool]:
    """Clip in place; returns (the total norm used, whether non-finite elements were zeroed).

    `norms` are the check's per-gradient norms; `order` lists the parameters (table
    positions) in the order the user's ``clip_grad_norm_`` call would. A finite total clips
    exactly as torch does. A bad step with `zero` zeroes the non-finite elements and clips
    the rest by their own norm; any other bad step leaves the gradients untouched, for
    ``step()`` to skip or raise.
    """
    zeroed = False
    if bad:
        if not zero or diagnosis is None:
            return ordered_total(grads, norms, order, norm_type), zeroed
        zero_nonfinite_(grads, diagnosis)
        zeroed = True
        norms = grad_norms(grads, norm_type)
    total = ordered_total(grads, norms, order, norm_type)
    # torch's own formula, so a finite step clips to the same bits
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    scale_(grads.tensors, coef)
    return total, zeroed
