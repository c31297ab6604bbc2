"""A summary's counts from a NumPy array on the host: what TensorFlow and JAX both do once a
finding has to be summarised (their eager values read back as NumPy arrays).

Not in `nanguard.core`, which imports no NumPy; torch counts on the device instead
(`nanguard.torch.detector.values`).
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from nanguard.core.summary import TensorSummary


def unravel(flat: int, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The index in ``shape`` of the ``flat``-th element (``()`` for a scalar)."""
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def count(summary: TensorSummary, a: np.ndarray) -> TensorSummary:
    """Fill ``summary``'s counts, range and first non-finite index from ``a`` (of the
    summary's shape): a complex value counts its real and imaginary parts, a bool as 0/1."""
    if a.size == 0:
        return summary
    parts = a.dtype.kind == "c"
    if parts:
        a = np.stack([a.real, a.imag], axis=-1)
    if a.dtype.kind == "b":
        a = a.astype(np.uint8)
    floating = a.dtype.kind == "f"
    finite = np.isfinite(a) if floating else np.ones(a.shape, bool)
    if floating:
        summary.nan = int(np.isnan(a).sum())
        summary.posinf = int((a == np.inf).sum())
        summary.neginf = int((a == -np.inf).sum())
    summary.zeros = int((a == 0).sum())
    summary.negative = int((finite & (a < 0)).sum())
    if finite.any():
        values = a[finite]
        summary.min, summary.max = float(values.min()), float(values.max())
    bad = ~finite
    if parts:
        bad = bad.any(axis=-1)
    if bad.any():
        summary.first_bad = unravel(int(np.flatnonzero(bad.reshape(-1))[0]), summary.shape)
    return summary


__all__ = ["count", "unravel"]
