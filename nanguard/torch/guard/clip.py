"""The guarded clip: ``clip_grad_norm_`` whose non-finite total norm follows the policy.

``torch.nn.utils.clip_grad_norm_`` computes ``max_norm / (total + 1e-6)`` and multiplies every
gradient by it. With one NaN element the total is NaN, so is the coefficient, and *every*
gradient becomes NaN (with the default ``error_if_nonfinite=False``); with an Inf element the
coefficient is 0 and every gradient is wiped. Here the total comes from the guard's own
check, and a non-finite one never reaches the multiplication.
"""

from __future__ import annotations

import math
from typing import Tuple

import torch

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


@torch.no_grad()
def clip_(grads: Grads, total: torch.Tensor, bad: bool, diagnosis: Diagnosis | None,
          zero: bool, max_norm: float, norm_type: float) -> Tuple[torch.Tensor, bool]:
    """Clip in place; returns (the total norm used, whether non-finite elements were zeroed).

    A finite total clips exactly as torch does. A bad step with `zero` zeroes the non-finite
    elements and clips the rest by their own norm; any other bad step leaves the gradients
    untouched, for ``step()`` to skip or raise.
    """
    zeroed = False
    if bad:
        if not zero or diagnosis is None:
            return total, zeroed
        zero_nonfinite_(grads, diagnosis)
        zeroed = True
        total = total_norm(grad_norms(grads, norm_type), norm_type)
    # torch's own formula, so a finite step clips to the same bits
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    scale_(grads.tensors, coef)
    return total, zeroed
