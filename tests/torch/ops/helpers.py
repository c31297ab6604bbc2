"""Shared test helpers for the safe ops: dtypes, tolerances, gradients of a weighted sum."""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import torch

from nanguard.core.vectors import TOLERANCE as CONTRACT_TOLERANCE

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
DTYPE_IDS = ["f16", "bf16", "f32", "f64"]

# (rtol, atol) for comparing a result computed in `dtype` with an exact expectation: the
# contract's tolerances (nanguard.core.vectors), keyed by torch dtype
TOLERANCE = {getattr(torch, name): tol for name, tol in CONTRACT_TOLERANCE.items()}


def finite_part_loss(out: torch.Tensor, weights: Optional[torch.Tensor]) -> torch.Tensor:
    """sum(out * w) over the finite entries of out (an op may return -inf by convention)."""
    w = torch.ones_like(out) if weights is None else weights.to(out.dtype)
    finite = torch.isfinite(out.detach())
    return torch.where(finite, out, torch.zeros_like(out)).mul(w).sum()


def value_and_grads(fn: Callable, inputs: Sequence[torch.Tensor], weights=None, create_graph=False):
    out = fn(*inputs)
    loss = finite_part_loss(out, weights)
    grads = torch.autograd.grad(loss, [t for t in inputs if t.requires_grad], create_graph=create_graph,
                                allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs)]
    return out, grads


def assert_close(actual: torch.Tensor, expected, dtype: torch.dtype, what: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    expected = torch.as_tensor(expected, dtype=torch.float64)
    actual64 = actual.detach().to(torch.float64)
    assert actual64.shape == expected.shape, f"{what}: shape {tuple(actual64.shape)} != {tuple(expected.shape)}"
    torch.testing.assert_close(actual64, expected, rtol=rtol, atol=atol, equal_nan=False,
                               msg=lambda m: f"{what} ({dtype}): {m}")


def all_finite(tensors: List[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors)
