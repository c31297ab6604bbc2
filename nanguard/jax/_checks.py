"""Argument checks shared by the JAX safe ops: fail early, in words a user understands.

Everything checked here is static under ``jit`` (dtypes, shapes, Python numbers), so the
checks run once while tracing and cost nothing in the compiled program.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from nanguard.core import arguments

Axis = Union[int, Sequence[int], None]

FLOATING = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32), jnp.dtype(jnp.float64))
_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def is_array_like(x: object) -> bool:
    return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "__jax_array__")


def check_array(x: object, name: str, op: str) -> jax.Array:
    if not is_array_like(x):
        raise TypeError(f"nanguard.jax.{op}: `{name}` must be a JAX array (or numpy array), "
                        f"got {type(x).__name__}; wrap it first, e.g. `jnp.asarray({name})`")
    return jnp.asarray(x)


def check_floating(x: object, name: str, op: str) -> jax.Array:
    """A real floating-point array; integer, bool and complex arrays are refused."""
    a = check_array(x, name, op)
    if a.dtype not in FLOATING:
        raise TypeError(
            f"nanguard.jax.{op}: `{name}` must be a floating-point array "
            f"(float16, bfloat16, float32 or float64), got dtype {a.dtype}; "
            f"convert it first, e.g. `{name}.astype(jnp.float32)`"
        )
    return a


def check_real(x: object, name: str, op: str) -> float:
    """A real number (NaN and inf allowed: they are data, not a configuration error)."""
    return arguments.check_real(x, name, f"nanguard.jax.{op}", tensor="an array")


def as_floating(x: object, name: str, op: str) -> Union[jax.Array, float]:
    """A floating array, or a Python number for an operand of a binary op."""
    if is_array_like(x):
        return check_floating(x, name, op)
    return check_real(x, name, op)


def check_number(value: object, name: str, op: str, *, positive: bool = False) -> float:
    return arguments.check_number(value, name, f"nanguard.jax.{op}", positive=positive)


def check_bool(value: object, name: str, op: str) -> bool:
    return arguments.check_bool(value, name, f"nanguard.jax.{op}")


def _shape(x) -> Tuple[int, ...]:
    return tuple(x) if isinstance(x, tuple) else tuple(x.shape)


def check_axis(x, axis: Axis, op: str) -> Optional[Tuple[int, ...]]:
    """Normalise `axis` to a sorted tuple of non-negative axes (None = all axes)."""
    if axis is None:
        return None
    if isinstance(axis, (bool, str)) or not isinstance(axis, (int, np.integer, Sequence)):
        raise TypeError(f"nanguard.jax.{op}: `axis` must be an int or a sequence of ints, got {axis!r}")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shape = _shape(x)
    rank = len(shape)
    ndim = max(rank, 1)  # a scalar accepts axis 0 / -1, as reductions do
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"nanguard.jax.{op}: `axis` must be an int or a sequence of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(
                f"nanguard.jax.{op}: axis {a} is out of range for an array with {rank} dimension(s) "
                f"(shape {shape}); valid axes are {-ndim}..{ndim - 1}"
            )
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"nanguard.jax.{op}: `axis` repeats an axis: {axis!r}")
    if not out:
        raise ValueError(f"nanguard.jax.{op}: `axis` must name at least one axis (or be None for all), got {axis!r}")
    return tuple(sorted(out))


def check_single_axis(x, axis: object, op: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"nanguard.jax.{op}: `axis` must be an int, got {axis!r}")
    (a,) = check_axis(x, int(axis), op)
    return a


def broadcast_static(a, b, op: str, names: Tuple[str, str]) -> Tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(_shape(a), _shape(b)))
    except ValueError:
        raise ValueError(f"nanguard.jax.{op}: shapes {_shape(a)} (`{names[0]}`) and {_shape(b)} (`{names[1]}`) "
                         f"do not broadcast") from None


def pick_mask(mask: object, where: object, op: str) -> object:
    """``mask`` or its jax.nn spelling ``where``; both at once is a mistake."""
    if mask is not None and where is not None:
        raise ValueError(f"nanguard.jax.{op}: give `mask` or its jax.nn name `where`, not both (they mean the same)")
    return where if mask is None else mask


def check_mask(mask: object, x: jax.Array, op: str) -> jax.Array:
    """A boolean mask (True = keep) that broadcasts to `x` without changing x's shape."""
    m = check_array(mask, "mask", op)
    if m.dtype != jnp.bool_:
        raise TypeError(f"nanguard.jax.{op}: `mask` must be a bool array (True = keep), got dtype {m.dtype}; "
                        f"use e.g. `mask != 0`")
    try:
        shape = np.broadcast_shapes(m.shape, x.shape)
    except ValueError:
        shape = None
    if shape is None or tuple(shape) != tuple(x.shape):
        raise ValueError(f"nanguard.jax.{op}: `mask` of shape {m.shape} does not broadcast to the input's shape "
                         f"{x.shape}")
    return m


def compute_dtype(dtype) -> jnp.dtype:
    """float16/bfloat16 are computed in float32, as torch's kernels accumulate."""
    dtype = jnp.dtype(dtype)
    return jnp.dtype(jnp.float32) if dtype in _HALF else dtype


def promote(a, b) -> jnp.dtype:
    """The wider floating dtype; float16 with bfloat16 is float32 (jnp.promote_types, as torch)."""
    return jnp.promote_types(a, b)
