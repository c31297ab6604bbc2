"""Argument checks of the TensorFlow ops: the adapter to :mod:`nanguard.core.op_checks`.

What is TensorFlow's here is how to recognise a tensor and read its dtype and static shape;
the rules and the words are core's, shared with JAX. Shapes are checked on their static part
(what TensorFlow knows while tracing); a dimension only known at run time is left to
TensorFlow's own checks.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from nanguard.core import arguments, op_checks

Axis = Union[int, Sequence[int], None]

_HALF = (tf.float16, tf.bfloat16)
SPELLING = op_checks.Spelling("tf", "a tf.Tensor (or tf.Variable, numpy array)", "", "tf.cast({name}, tf.float32)",
                              "tf.not_equal(mask, 0)")


def _is_tensor_like(x: object) -> bool:
    return tf.is_tensor(x) or isinstance(x, (tf.Variable, np.ndarray)) or hasattr(x, "__tf_tensor__")


def check_tensor(x: object, name: str, op: str) -> tf.Tensor:
    if not _is_tensor_like(x):
        raise op_checks.refuse_type(x, name, op, SPELLING)
    return tf.convert_to_tensor(x)


def check_floating(x: object, name: str, op: str) -> tf.Tensor:
    """A real floating-point tensor; integer, bool and complex tensors are refused."""
    t = check_tensor(x, name, op)
    op_checks.check_float_dtype(t.dtype.name, name, op, SPELLING)
    return t


def check_real(x: object, name: str, op: str) -> float:
    """A real number (NaN and inf allowed: they are data, not a configuration error)."""
    return arguments.check_real(x, name, SPELLING.where(op), tensor="a tensor")


def as_floating(x: object, name: str, op: str) -> Union[tf.Tensor, float]:
    """A floating tensor, or a Python number for the second operand of a binary op."""
    if _is_tensor_like(x):
        return check_floating(x, name, op)
    return check_real(x, name, op)


def setting(value: object, name: str, op: str):
    """A setting of ``op`` (``fill``, ``beta``, ``keepdims``...), checked by its kind in the op table."""
    return op_checks.setting(value, name, op, SPELLING)


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
        return op_checks.axes(None, 0, "", op, SPELLING, allow_none=allow_none)
    return op_checks.axes(axis, static_rank(x, op), str(_shape(x)), op, SPELLING, allow_none=allow_none)


def check_single_axis(x: tf.Tensor, axis: object, op: str) -> int:
    return op_checks.single_axis(axis, static_rank(x, op), str(_shape(x)), op, SPELLING)


def broadcast_static(a: tf.TensorShape, b: tf.TensorShape, op: str, names: Tuple[str, str]) -> tf.TensorShape:
    try:
        return tf.broadcast_static_shape(a, b)
    except ValueError:
        raise op_checks.no_broadcast((str(a), str(b)), names, op, SPELLING) from None


def check_cond(cond: object, op: str) -> tf.Tensor:
    """``safe_where``'s condition: a bool tensor."""
    c = check_tensor(cond, "cond", op)
    op_checks.check_bool_dtype(c.dtype.name, "cond", op, SPELLING)
    return c


def check_mask(mask: object, x: tf.Tensor, op: str) -> tf.Tensor:
    """A boolean mask (True = keep) that broadcasts to `x` without changing x's shape.

    Dimensions unknown while tracing pass here and are left to TensorFlow's own checks."""
    m = check_tensor(mask, "mask", op)
    op_checks.check_bool_dtype(m.dtype.name, "mask", op, SPELLING)
    try:
        shape = tf.broadcast_static_shape(m.shape, x.shape)
    except ValueError:
        raise op_checks.mask_misfit(str(m.shape), str(x.shape), op, SPELLING) from None
    if shape.rank is not None and x.shape.rank is not None and (
            shape.rank != x.shape.rank or any(ms is not None and xs is not None and ms != xs
                                              for ms, xs in zip(shape.as_list(), x.shape.as_list()))):
        raise op_checks.mask_misfit(str(m.shape), str(x.shape), op, SPELLING)
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
