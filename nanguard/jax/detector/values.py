"""Values, as the detector sees them: which leaves can hold NaN/Inf, the cheap check of a
call's outputs, and exact summaries (`nanguard.core.summary.TensorSummary`) after a finding.

The cheap check is one jitted reduction over every floating leaf of an output (one fused
pass, one host sync, a few bytes back); exact statistics are computed only for a report.
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from nanguard.core.dtypes import is_extreme
from nanguard.core.nonfinite import INF, NAN, rounded_extreme
from nanguard.core.summary import TensorSummary
from nanguard._host_arrays import count


_INEXACT: dict = {}   # dtype -> floating or complex (every output leaf asks, every call)


def is_float(x: Any) -> bool:
    """A JAX or NumPy array (or scalar) of a floating or complex dtype."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return isinstance(x, float)
    known = _INEXACT.get(dtype)
    if known is None:
        try:
            known = bool(jnp.issubdtype(dtype, jnp.inexact))
        except TypeError:  # float0 and other exotic dtypes
            known = False
        try:
            _INEXACT[dtype] = known
        except TypeError:  # an unhashable dtype-like
            pass
    return known


def float_leaves(tree: Any) -> List[Any]:
    """The floating leaves of a pytree that hold data (arrays and Python floats)."""
    return [leaf for leaf in jax.tree_util.tree_leaves(tree) if is_float(leaf) and _has_data(leaf)]


def _has_data(x: Any) -> bool:
    if isinstance(x, jax.Array):
        try:
            return not x.is_deleted()
        except AttributeError:
            return True
    return True


@jax.jit
def _any_special(leaves: Sequence[jax.Array]) -> jax.Array:
    # one add-reduction per leaf: the sum of a leaf holding NaN or ±Inf is not finite. A finite
    # sum that overflows is a false alarm, settled by `_special_flags` on that leaf alone (half
    # precision is summed in float32, so its sums do not overflow). Measured on the 1.6 M
    # float32 outputs of a transformer's optax step: 0.38 ms, against 0.50-0.53 ms for
    # isnan(sum(x * 0)) and 3.6-4.7 ms per 7 M floats for isnan/isinf reductions.
    return jnp.stack([~jnp.isfinite(jnp.sum(x, dtype=_accumulator(x.dtype))) for x in leaves])


def _accumulator(dtype: Any) -> Any:
    return jnp.float32 if jnp.dtype(dtype).itemsize == 2 else None  # float16, bfloat16


@jax.jit
def _special_flags(leaves: Sequence[jax.Array]) -> jax.Array:
    # one row per leaf: (any NaN, any ±Inf); XLA fuses both reductions into one pass
    rows = [jnp.stack([jnp.isnan(x).any(), jnp.isinf(x).any()]) for x in leaves]
    return jnp.stack(rows) if rows else jnp.zeros((0, 2), bool)


def special_flags(leaves: Sequence[Any]) -> np.ndarray:
    """A ``(len(leaves), 2)`` bool array: whether each leaf holds NaN, and ±Inf."""
    if not leaves:
        return np.zeros((0, 2), bool)
    arrays = [x for x in leaves if isinstance(x, jax.Array)]
    if len(arrays) == len(leaves) and sum(x.size for x in arrays) > 4096:
        out = np.zeros((len(leaves), 2), bool)
        hit = np.flatnonzero(np.asarray(_any_special(list(arrays))))
        if hit.size:  # rare: then tell NaN from Inf, for the hit leaves only
            out[hit] = np.asarray(_special_flags([arrays[i] for i in hit]))
        return out
    # small or host values: NumPy on the host costs less than a dispatch
    out = np.zeros((len(leaves), 2), bool)
    for i, x in enumerate(leaves):
        a = np.asarray(x)
        if a.dtype.kind not in "fc":
            a = a.astype(np.float32)
        out[i] = (bool(np.isnan(a).any()), bool(np.isinf(a).any()))
    return out


def flags_of(x: Any) -> Tuple[bool, bool]:
    """(holds NaN, holds ±Inf) for one value; (False, False) for non-floating values."""
    if not is_float(x) or not _has_data(x):
        return False, False
    a = _host(x)
    return bool(np.isnan(a).any()), bool(np.isinf(a).any())


def extreme_signs(x: Any) -> Tuple[bool, bool]:
    """Whether ``x`` holds its dtype's largest finite value, and its most negative one (for a
    Python float: any dtype's), the ``finfo(dtype).min`` of masks (`nanguard.core.dtypes`)."""
    if not is_float(x) or not _has_data(x):
        return False, False
    a = _host(x)
    if a.dtype.kind != "f":
        return False, False
    a = a[np.isfinite(a)]
    if a.size == 0:
        return False, False
    top, bottom = float(a.max()), float(a.min())
    name = dtype_name(x) if getattr(x, "dtype", None) is not None else None
    return top > 0 and is_extreme(top, name), bottom < 0 and is_extreme(bottom, name)


def inf_signs(x: Any) -> Tuple[bool, bool]:
    """Whether ``x`` holds ``+inf``, and ``-inf``."""
    if not is_float(x) or not _has_data(x):
        return False, False
    a = _host(x)
    return bool((a == math.inf).any()), bool((a == -math.inf).any())


def rounded(inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    """`nanguard.core.nonfinite.rounded_extreme` read off values: every sign of infinity in
    ``outputs`` has an input holding its dtype's extreme of that sign."""
    out = [inf_signs(o) for o in outputs]
    signs = [extreme_signs(x) for x in inputs]
    return rounded_extreme(any(p for p, _ in out), any(n for _, n in out), any(p for p, _ in signs),
                           any(n for _, n in signs))


def _host(x: Any) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "fciub":  # bfloat16 and other ml_dtypes: widen to float32
        a = a.astype(np.float32)
    return a


def host(x: Any) -> Optional[np.ndarray]:
    """A NumPy copy of ``x`` (float32 for bfloat16), or None when it has no data."""
    if not _has_data(x):
        return None
    try:
        return _host(x)
    except Exception:  # noqa: BLE001  (a value we cannot read is simply not summarised)
        return None


def dtype_name(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    return str(np.dtype(dtype)) if dtype is not None else type(x).__name__


def device_name(x: Any) -> str:
    try:
        return next(iter(x.devices())).platform
    except (AttributeError, StopIteration, TypeError):
        return "cpu"


def summarize(x: Any, name: str, role: str = "input") -> TensorSummary:
    """Exact statistics of ``x`` (only after a detection)."""
    shape = tuple(getattr(x, "shape", ()))
    summary = TensorSummary(name=name, shape=shape, dtype=dtype_name(x), device=device_name(x),
                            numel=int(np.prod(shape)) if shape else 1, role=role)
    a = host(x)
    return summary if a is None else count(summary, a)


__all__ = ["INF", "NAN", "extreme_signs", "flags_of", "float_leaves", "host", "inf_signs", "is_float", "rounded", "special_flags",
           "summarize"]
