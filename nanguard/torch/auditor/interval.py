"""`Box`: elementwise lower and upper bounds of one tensor, rounded to its dtype.

A box holds ``lo`` and ``hi`` as float64 tensors that *broadcast* to the tensor's shape: a
box whose bounds are the same everywhere (the usual case: an unbounded parameter, a
normalised activation) keeps 0-dim bounds and costs nothing to carry through reshapes and
reductions. ``exact`` boxes hold the observed value itself (``lo = hi = value``).

What a box means: every element ``x`` satisfies ``lo ≤ x ≤ hi``, where an infinite bound
of a non-degenerate interval means *unbounded*, not "may be inf": the audit asks whether
an op can *make* a NaN/Inf from finite values, so the overflow of a plain product or sum
is not tracked in ``structural`` mode. An element with ``lo == hi == ±inf`` is a real
infinity (a ``-inf`` mask sentinel), which is what makes ``softmax`` of a fully masked
row NaN. Bounds are rounded to the tensor's dtype after every op (in float32
``1 - 1e-8 == 1``), the way the op itself rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

F64 = torch.float64
INF = math.inf
# Bilinear ops replace infinite bounds by ±_BIG so that 0 · unbounded = 0; results beyond
# _UNBOUNDED are unbounded again.
_BIG = 1e150
_UNBOUNDED = 1e100


def _t(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=F64)


@dataclass
class Box:
    """Bounds of one tensor (see the module docstring)."""

    lo: torch.Tensor
    hi: torch.Tensor
    shape: Tuple[int, ...]
    dtype: torch.dtype
    exact: Optional[torch.Tensor] = None
    nonzero: bool = False          # no element is exactly 0 (a refinement, e.g. where(x != 0, x, 1))

    # ------------------------------------------------------------------ constructors
    @staticmethod
    def top(shape: Tuple[int, ...], dtype: torch.dtype) -> "Box":
        if dtype == torch.bool:
            return Box(_t(0.0), _t(1.0), tuple(shape), dtype)
        return Box(_t(-INF), _t(INF), tuple(shape), dtype)

    @staticmethod
    def of(lo: torch.Tensor | float, hi: torch.Tensor | float, shape: Tuple[int, ...], dtype: torch.dtype,
           nonzero: bool = False) -> "Box":
        lo_t = lo if isinstance(lo, torch.Tensor) else _t(float(lo))
        hi_t = hi if isinstance(hi, torch.Tensor) else _t(float(hi))
        return Box(lo_t.to(F64), hi_t.to(F64), tuple(shape), dtype, nonzero=nonzero).rounded()

    @staticmethod
    def of_value(value: torch.Tensor) -> "Box":
        v = value.detach()
        if v.is_complex() or v.layout != torch.strided:
            return Box.top(tuple(v.shape), v.dtype)
        d = v.to(F64) if v.dtype != torch.bool else v.to(F64)
        return Box(d, d, tuple(v.shape), v.dtype, exact=v)

    # ------------------------------------------------------------------ queries
    @property
    def uniform(self) -> bool:
        return self.lo.dim() == 0 and self.hi.dim() == 0

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def full(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """``lo`` and ``hi`` expanded to the tensor's shape (views, no copy)."""
        return self.lo.expand(self.shape), self.hi.expand(self.shape)

    def is_top(self) -> bool:
        return self.uniform and float(self.lo) == -INF and float(self.hi) == INF

    def point_inf(self) -> torch.Tensor:
        """Elements that are a real ±inf (``lo == hi == ±inf``)."""
        return (self.lo == self.hi) & torch.isinf(self.lo)

    def finite_lo(self) -> torch.Tensor:
        """``lo`` with real ``-inf`` points left out (+inf where the element is a point)."""
        return torch.where(self.point_inf(), _t(INF), self.lo)

    def finite_hi(self) -> torch.Tensor:
        return torch.where(self.point_inf(), _t(-INF), self.hi)

    def bounds(self) -> Tuple[float, float]:
        """The overall [min lo, max hi] over the non-point elements (a point-only tensor: its values)."""
        if not self.numel:
            return (0.0, 0.0)
        lo, hi = self.finite_lo(), self.finite_hi()
        lo_v, hi_v = float(lo.min()), float(hi.max())
        if lo_v > hi_v:   # every element a point infinity
            return (float(self.lo.min()), float(self.hi.max()))
        return (lo_v, hi_v)

    def excludes_zero(self) -> bool:
        """No element can be exactly 0 (by its bounds or by a refinement)."""
        return self.nonzero or not bool(self.contains_zero().any())

    def contains_zero(self) -> torch.Tensor:
        z = (self.lo <= 0) & (self.hi >= 0)
        if self.nonzero:
            z = torch.zeros_like(z)
        return z

    def collapsed(self) -> "Box":
        """The same box with 0-dim bounds when every element has the same bounds (cheap to carry on)."""
        if self.uniform or self.exact is not None or self.numel < 1024:
            return self
        lo, hi = self.lo, self.hi
        lo_min, lo_max = torch.aminmax(lo)
        if lo_min != lo_max:
            return self
        hi_min, hi_max = torch.aminmax(hi)
        if hi_min != hi_max:
            return self
        return Box(lo_min.clone(), hi_min.clone(), self.shape, self.dtype, nonzero=self.nonzero)

    # ------------------------------------------------------------------ rounding
    def rounded(self) -> "Box":
        """Bounds as the dtype can hold them (NaN bounds from inf − inf become unbounded)."""
        lo = torch.nan_to_num(self.lo, nan=-INF, posinf=INF, neginf=-INF)
        hi = torch.nan_to_num(self.hi, nan=INF, posinf=INF, neginf=-INF)
        dt = self.dtype
        if dt.is_floating_point:
            if dt != F64:
                lo = lo.to(dt).to(F64)
                hi = hi.to(dt).to(F64)
        else:   # integers and booleans hold whole numbers only
            if dt == torch.bool:
                lo, hi = lo.clamp(0, 1), hi.clamp(0, 1)
            lo, hi = torch.ceil(lo), torch.floor(hi)
            lo = torch.minimum(lo, hi)
        return Box(lo, hi, self.shape, self.dtype, nonzero=self.nonzero)


def unbig(x: torch.Tensor) -> torch.Tensor:
    """Infinite bounds as ±_BIG, so that products with an exact 0 stay 0."""
    return x.clamp(-_BIG, _BIG)


def rebig(x: torch.Tensor, nan: float = INF) -> torch.Tensor:
    """Bounds beyond _UNBOUNDED (made from ±_BIG) are unbounded again; NaN (inf − inf) becomes ``nan``."""
    x = torch.where(torch.isnan(x), torch.tensor(nan, dtype=x.dtype), x)
    return torch.where(x >= _UNBOUNDED, _t(INF), torch.where(x <= -_UNBOUNDED, _t(-INF), x))


def mul_bounds(alo: torch.Tensor, ahi: torch.Tensor, blo: torch.Tensor, bhi: torch.Tensor
               ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Elementwise interval product (0 · unbounded = 0)."""
    a0, a1, b0, b1 = unbig(alo), unbig(ahi), unbig(blo), unbig(bhi)
    c = torch.stack(torch.broadcast_tensors(a0 * b0, a0 * b1, a1 * b0, a1 * b1))
    return rebig(c.amin(0), -INF), rebig(c.amax(0), INF)


def centre_radius(lo: torch.Tensor, hi: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    lo, hi = unbig(lo), unbig(hi)
    return (lo + hi) / 2, (hi - lo) / 2


def dtype_max(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).max) if dtype.is_floating_point else INF


def dtype_tiny(dtype: torch.dtype) -> float:
    """The smallest positive value of ``dtype`` (a subnormal where the dtype has them)."""
    if not dtype.is_floating_point:
        return 1.0
    return float(torch.finfo(dtype).smallest_normal) * float(torch.finfo(dtype).eps)


__all__ = ["Box", "F64", "INF", "centre_radius", "dtype_max", "dtype_tiny", "mul_bounds", "rebig", "unbig"]
