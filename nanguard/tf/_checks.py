"""Argument checks shared by the TensorFlow API: fail early, in words a user understands.

Shapes are checked on their static part (what TensorFlow knows while tracing); a dimension
that is only known at run time is left to TensorFlow's own checks.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from nanguard.core import arguments

Axis = Union[int, Sequence[int], None]

FLOATING = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
_HALF = (tf.float16, tf.bfloat16)


def _is_tensor_like(x: object) -> bool:
    return tf.is_tensor(x) or isinstance(x, (tf.Variable, np.ndarray)) or hasattr(x, "__tf_tensor__")


def check_tensor(x: object, name: str, op: str) -> tf.Tensor:
    if not _is_tensor_like(x):
        raise TypeError(f"nanguard.tf.{op}: `{name}` must be a tf.Tensor (or tf.Variable, numpy array), "
                        f"got {type(x).__name__}")
    return tf.convert_to_tensor(x)


def check_floating(x: object, name: str, op: str) -> tf.Tensor:
    """A real floating-point tensor; integer, bool and complex tensors are refused."""
    t = check_tensor(x, name, op)
    if t.dtype not in FLOATING:
        raise TypeError(
            f"nanguard.tf.{op}: `{name}` must be a floating-point tensor "
            f"(float16, bfloat16, float32 or float64), got dtype {t.dtype.name}; "
            f"convert it first, e.g. `tf.cast({name}, tf.float32)`"
        )
    return t


def check_real(x: object, name: str, op: str) -> float:
    """A real number (NaN and inf allowed: they are data, not a configuration error)."""
    return arguments.check_real(x, name, f"nanguard.tf.{op}", tensor="a tensor")


def as_floating(x: object, name: str, op: str) -> Union[tf.Tensor, float]:
    """A floating tensor, or a Python number for the second operand of a binary op."""
    if _is_tensor_like(x):
        return check_floating(x, name, op)
    return check_real(x, name, op)


def check_number(value: object, name: str, op: str, *, positive: bool = False) -> float:
    return arguments.check_number(value, name, f"nanguard.tf.{op}", positive=positive)


def check_bool(value: object, name: str, op: str) -> bool:
    return arguments.check_bool(value, name, f"nanguard.tf.{op}")


def _shape(x) -> tf.TensorShape:
    return x if isinstance(x, tf.TensorShape) else x.shape


def static_rank(x: tf.Tensor, op: str) -> int:
    rank = _shape(x).rank
    if rank is None:
        raise ValueError(f"nanguard.tf.{op}: the input's rank must be known (got a tensor of unknown rank); "
                         f"give the tf.function an input_signature with a rank")
    return rank


def check_axis(x: tf.Tensor, axis: Axis, op: str, *, allow_none: bool = True) -> Optional[Tuple[int, ...]]:
    """Normalise `axis` to a sorted tuple of non-negative axes (None = all axes, when allowed)."""
    if axis is None:
        if not allow_none:
            raise TypeError(f"nanguard.tf.{op}: `axis` is required")
        return None
    if isinstance(axis, (bool, str)) or not isinstance(axis, (int, np.integer, Sequence)):
        raise TypeError(f"nanguard.tf.{op}: `axis` must be an int or a sequence of ints, got {axis!r}")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    rank = static_rank(x, op)
    ndim = max(rank, 1)  # a scalar accepts axis 0 / -1, as reductions do
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"nanguard.tf.{op}: `axis` must be an int or a sequence of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(
                f"nanguard.tf.{op}: axis {a} is out of range for a tensor with {rank} dimension(s) "
                f"(shape {_shape(x)}); valid axes are {-ndim}..{ndim - 1}"
            )
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"nanguard.tf.{op}: `axis` repeats an axis: {axis!r}")
    if not out:
        raise ValueError(f"nanguard.tf.{op}: `axis` must name at least one axis (or be None for all), got {axis!r}")
    return tuple(sorted(out))


def check_single_axis(x: tf.Tensor, axis: object, op: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"nanguard.tf.{op}: `axis` must be an int, got {axis!r}")
    (a,) = check_axis(x, int(axis), op)
    return a


def broadcast_static(a: tf.TensorShape, b: tf.TensorShape, op: str, names: Tuple[str, str]) -> tf.TensorShape:
    try:
        return tf.broadcast_static_shape(a, b)
    except ValueError:
        raise ValueError(f"nanguard.tf.{op}: shapes {a} (`{names[0]}`) and {b} (`{names[1]}`) do not broadcast") from None


def check_mask(mask: object, x: tf.Tensor, op: str) -> tf.Tensor:
    """A boolean mask (True = keep) that broadcasts to `x` without changing x's shape."""
    m = check_tensor(mask, "mask", op)
    if m.dtype != tf.bool:
        raise TypeError(f"nanguard.tf.{op}: `mask` must be a bool tensor (True = keep), got dtype {m.dtype.name}; "
                        f"use e.g. `tf.not_equal(mask, 0)`")
    shape = None
    try:
        shape = tf.broadcast_static_shape(m.shape, x.shape)
    except ValueError:
        pass
    if shape is None or (shape.rank is not None and x.shape.rank is not None
                         and not shape.is_compatible_with(x.shape)) or (
            shape.rank is not None and x.shape.rank is not None and shape.rank != x.shape.rank):
        raise ValueError(f"nanguard.tf.{op}: `mask` of shape {m.shape} does not broadcast to the input's shape {x.shape}")
    if shape.rank is not None and x.shape.rank is not None:
        for ms, xs in zip(shape.as_list(), x.shape.as_list()):
            if ms is not None and xs is not None and ms != xs:
                raise ValueError(
                    f"nanguard.tf.{op}: `mask` of shape {m.shape} does not broadcast to the input's shape {x.shape}")
    return m


def compute_dtype(dtype: tf.DType) -> tf.DType:
    """float16/bfloat16 are computed in float32, as torch's kernels accumulate."""
    return tf.float32 if dtype in _HALF else dtype


def promote(a: tf.DType, b: tf.DType) -> tf.DType:
    """torch.promote_types for the floating dtypes: the wider one; float16 with bfloat16 is float32."""
    if a == b:
        return a
    if {a, b} == {tf.float16, tf.bfloat16}:
        return tf.float32
    return a if a.size > b.size else b
