"""Argument checks of the JAX ops: the adapter to :mod:`nanguard.core.op_checks`.

What is JAX's here is how to recognise an array and read its dtype and shape; the rules and
the words are core's, shared with TensorFlow. Everything checked is static under ``jit``
(dtypes, shapes, Python numbers), so the checks run once while tracing and cost nothing in
the compiled program.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from nanguard.core import arguments, op_checks

Axis = Union[int, Sequence[int], None]

_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))
SPELLING = op_checks.Spelling("jax", "a JAX array (or numpy array)", "jnp.asarray({name})",
                              "{name}.astype(jnp.float32)", "mask != 0")


def is_array_like(x: object) -> bool:
    return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "__jax_array__")


def check_array(x: object, name: str, op: str) -> jax.Array:
    if not is_array_like(x):
        raise op_checks.refuse_type(x, name, op, SPELLING)
    return jnp.asarray(x)


def check_floating(x: object, name: str, op: str) -> jax.Array:
    """A real floating-point array; integer, bool and complex arrays are refused."""
    a = check_array(x, name, op)
    op_checks.check_float_dtype(str(a.dtype), name, op, SPELLING)
    return a


def check_real(x: object, name: str, op: str) -> float:
    """A real number (NaN and inf allowed: they are data, not a configuration error)."""
    return arguments.check_real(x, name, SPELLING.where(op), tensor="an array")


def as_floating(x: object, name: str, op: str) -> Union[jax.Array, float]:
    """A floating array, or a Python number for an operand of a binary op."""
    if is_array_like(x):
        return check_floating(x, name, op)
    return check_real(x, name, op)


def setting(value: object, name: str, op: str):
    """A setting of ``op`` (``fill``, ``beta``, ``keepdims``...), checked by its kind in the op table."""
    return op_checks.setting(value, name, op, SPELLING)


def _shape(x) -> Tuple[int, ...]:
    return tuple(x) if isinstance(x, tuple) else tuple(x.shape)


def check_axis(x, axis: Axis, op: str) -> Optional[Tuple[int, ...]]:
    """Normalise `axis` to a sorted tuple of non-negative axes (None = all axes)."""
    shape = _shape(x)
    return op_checks.axes(axis, len(shape), str(shape), op, SPELLING)


def check_single_axis(x, axis: object, op: str) -> int:
    shape = _shape(x)
    return op_checks.single_axis(axis, len(shape), str(shape), op, SPELLING)


def broadcast_static(a, b, op: str, names: Tuple[str, str]) -> Tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(_shape(a), _shape(b)))
    except ValueError:
        raise op_checks.no_broadcast((str(_shape(a)), str(_shape(b))), names, op, SPELLING) from None


def pick_mask(mask: object, where: object, op: str) -> object:
    """``mask`` or its jax.nn spelling ``where``; both at once is a mistake."""
    return op_checks.pick_mask(mask, where, op, SPELLING)


def check_cond(cond: object, op: str) -> jax.Array:
    """``safe_where``'s condition: a bool array."""
    c = check_array(cond, "cond", op)
    op_checks.check_bool_dtype(str(c.dtype), "cond", op, SPELLING)
    return c


def check_mask(mask: object, x: jax.Array, op: str) -> jax.Array:
    """A boolean mask (True = keep) that broadcasts to `x` without changing x's shape."""
    m = check_array(mask, "mask", op)
    op_checks.check_bool_dtype(str(m.dtype), "mask", op, SPELLING)
    try:
        fits = tuple(np.broadcast_shapes(m.shape, x.shape)) == tuple(x.shape)
    except ValueError:
        fits = False
    if not fits:
        raise op_checks.mask_misfit(str(m.shape), str(x.shape), op, SPELLING)
    return m


def compute_dtype(dtype) -> jnp.dtype:
    """float16/bfloat16 are computed in float32, as torch's kernels accumulate."""
    dtype = jnp.dtype(dtype)
    return jnp.dtype(jnp.float32) if dtype in _HALF else dtype


def promote(a, b) -> jnp.dtype:
    """The wider floating dtype; float16 with bfloat16 is float32 (jnp.promote_types, as torch)."""
    return jnp.promote_types(a, b)
