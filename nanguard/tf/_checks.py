"""Argument checks of the TensorFlow ops: the adapter to :mod:`nanguard.core.op_checks`.

What is TensorFlow's here is how to recognise a tensor and read its dtype and static shape;
the rules and the words are core's, shared with JAX. Shapes are checked on their static part
(what TensorFlow knows while tracing); a dimension only known at run time is left to
TensorFlow's own checks.
"""

from __future__ import annotations

from typing import Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from nanguard.core import op_checks

Axis = Union[int, Sequence[int], None]

_HALF = (tf.float16, tf.bfloat16)
SPELLING = op_checks.Spelling("tf", "a tf.Tensor (or tf.Variable, numpy array)", "tf.constant({name})",
                              "tf.cast({name}, tf.float32)",
                              "tf.not_equal(mask, 0)")


def _is_tensor_like(x: object) -> bool:
    return tf.is_tensor(x) or isinstance(x, (tf.Variable, np.ndarray)) or hasattr(x, "__tf_tensor__")


def _shape(x) -> tf.TensorShape:
    return x if isinstance(x, tf.TensorShape) else x.shape


def static_rank(x: tf.Tensor, op: str) -> int:
    rank = _shape(x).rank
    if rank is None:
        raise ValueError(f"nanguard.tf.{op}: the input's rank must be known (got a tensor of unknown rank); "
                         f"give the tf.function an input_signature with a rank")
    return rank


CHECKS = op_checks.Checks(SPELLING, _is_tensor_like, tf.convert_to_tensor, lambda t: t.dtype.name,
                          lambda x, op: (static_rank(x, op), str(_shape(x))))
check_tensor, check_floating, check_real, as_floating = CHECKS.tensor, CHECKS.floating, CHECKS.real, CHECKS.operand
setting, check_cond, check_axis, check_single_axis = CHECKS.setting, CHECKS.cond, CHECKS.axis, CHECKS.single_axis


def broadcast_static(a: tf.TensorShape, b: tf.TensorShape, op: str, names: Tuple[str, str]) -> tf.TensorShape:
    try:
        return tf.broadcast_static_shape(a, b)
    except ValueError:
        raise op_checks.no_broadcast((str(a), str(b)), names, op, SPELLING) from None


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
