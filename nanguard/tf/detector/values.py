"""Eager values: which tensors are checked, the rule that decides a finding, and exact summaries.

"Made non-finite" is the rule of `nanguard.core.nonfinite`, the torch detector's: NaN in an
output while no input holds NaN, or ±Inf in an output while every input is finite and there is
at least one (a constant or a fill of ``-inf`` is deliberate); `judge` reads its flags here.
Eager tensors on the CPU are read through ``numpy()`` without a copy, so a check is one
vectorised pass and runs no TensorFlow op (it never re-enters the callback).
"""

from __future__ import annotations

from typing import AbstractSet, Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from nanguard.core.dtypes import limits
from nanguard.core.nonfinite import INF, NAN, Flags, Verdict, made, rounded_extreme
from nanguard.core.summary import TensorSummary
from nanguard._host_arrays import count, unravel


def is_float(t: Any) -> bool:
    """A floating (or complex) eager tensor, the only kind that can hold NaN/Inf."""
    dtype = getattr(t, "dtype", None)
    return dtype is not None and isinstance(dtype, tf.dtypes.DType) and (dtype.is_floating or dtype.is_complex)


def as_array(t: Any) -> np.ndarray:
    arr = np.asarray(t.numpy())
    if arr.dtype.kind == "V" or arr.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        arr = arr.astype(np.float32)  # ml_dtypes: exact for every value they hold
    return arr


def all_finite(t: Any) -> bool:
    return bool(np.isfinite(as_array(t)).all())


def has_nan(t: Any) -> bool:
    return bool(np.isnan(as_array(t)).any())


def has_inf(t: Any) -> bool:
    return bool(np.isinf(as_array(t)).any())


def judge(inputs: Sequence[Any], outputs: Sequence[Any], check: AbstractSet[str]) -> Optional[Verdict]:
    """`nanguard.core.nonfinite.made` on an op whose output is known to be non-finite (None: no
    finding). The flags are read lazily, as the torch detector reads them; an op without a
    floating input (a constant, a fill, a ``tf.data`` batch) makes no infinity of its own."""
    out_nan = NAN in check and any(has_nan(o) for o in outputs)
    in_nan = out_nan and any(has_nan(t) for t in inputs)
    out_inf = not out_nan and INF in check and any(has_inf(o) for o in outputs)
    in_finite = out_inf and bool(inputs) and all(all_finite(t) for t in inputs)
    rounded = in_finite and _rounded(inputs, outputs)
    return made(Flags(out_nan=out_nan, out_inf=out_inf, in_nan=in_nan, in_finite=in_finite,
                      rounded_extreme=rounded), check)


def _rounded(inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    """`nanguard.core.nonfinite.rounded_extreme` read off eager tensors: ``finfo(dtype).min``
    masks (``scores + min`` in float16 is ``-inf``) are deliberate."""
    outs = [as_array(o) for o in outputs]
    out_pos = any(bool((a == np.inf).any()) for a in outs)
    out_neg = any(bool((a == -np.inf).any()) for a in outs)
    signs = [_extreme_signs(t) for t in inputs]
    return rounded_extreme(out_pos, out_neg, any(p for p, _ in signs), any(n for _, n in signs))


def _extreme_signs(t: Any) -> Tuple[bool, bool]:
    """Whether finite ``t`` holds its dtype's largest value, and its most negative one."""
    found = limits(t.dtype.name)
    arr = as_array(t)
    if found is None or arr.size == 0 or arr.dtype.kind != "f":
        return False, False
    return float(arr.max()) == found.max, float(arr.min()) == -found.max


def float_tensors(values: Iterable[Any]) -> List[Any]:
    return [v for v in values if v is not None and is_float(v)]


def summarize(t: Any, name: str, role: str = "input") -> TensorSummary:
    """Exact statistics of an eager tensor (computed only once something was found)."""
    shape = tuple(int(s) for s in t.shape)
    device = getattr(t, "device", "") or ""
    summary = TensorSummary(name=name, shape=shape, dtype=t.dtype.name, device=device.rsplit("device:", 1)[-1],
                            numel=int(np.prod(shape)) if shape else 1, role=role)
    return count(summary, as_array(t))


def summary_from_stats(name: str, role: str, dtype: str, shape: Tuple[int, ...], stats: Sequence[float]) -> TensorSummary:
    """A summary from the statistics an in-graph check stored (see `nanguard.tf.detector.graph`)."""
    numel, lo, hi, nan, posinf, neginf, zeros, negative, first = (float(s) for s in stats)
    summary = TensorSummary(name=name, shape=shape, dtype=dtype, device="", numel=int(numel), role=role,
                            nan=int(nan), posinf=int(posinf), neginf=int(neginf), zeros=int(zeros),
                            negative=int(negative))
    if np.isfinite(lo) and np.isfinite(hi) and lo <= hi:
        summary.min, summary.max = lo, hi
    if first >= 0 and shape and all(s > 0 for s in shape):
        summary.first_bad = unravel(int(first), shape)
    return summary


def summary_of_shape(name: str, role: str, dtype: str, shape: Tuple[int, ...]) -> TensorSummary:
    """A summary of a tensor whose values were not read (a check compiled by XLA)."""
    return TensorSummary(name=name, shape=shape, dtype=dtype, device="", numel=int(np.prod(shape)) if shape else 1,
                         role=role, counted=False)


__all__ = ["INF", "NAN", "Verdict", "all_finite", "as_array", "float_tensors", "has_inf", "has_nan", "is_float",
           "judge", "summarize", "summary_from_stats", "summary_of_shape"]
