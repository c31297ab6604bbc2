"""Argument checks of the JAX ops: the adapter to :mod:`nanguard.core.op_checks`.

What is JAX's here is how to recognise an array and read its dtype and shape; the rules and
the words are core's, shared with TensorFlow. Everything checked is static under ``jit``
(dtypes, shapes, Python numbers), so the checks run once while tracing and cost nothing in
the compiled program.
"""

from __future__ import annotations

from typing import Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from nanguard.core import op_checks

Axis = Union[int, Sequence[int], None]

_HALF = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))
SPELLING = op_checks.Spelling("jax", "a JAX array (or numpy array)", "jnp.asarray({name})",
                              "{name}.astype(jnp.float32)", "mask != 0")


def is_array_like(x: object) -> bool:
    return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "__jax_array__")


def _shape(x) -> Tuple[int, ...]:
    return tuple(x) if isinstance(x, tuple) else tuple(x.shape)


CHECKS = op_checks.Checks(SPELLING, is_array_like, jnp.asarray, lambda a: str(a.dtype),
                          lambda x, op: (len(_shape(x)), str(_shape(x))))
check_array, check_floating, check_real, as_floating = CHECKS.tensor, CHECKS.floating, CHECKS.real, CHECKS.operand
setting, check_cond, check_axis, check_single_axis = CHECKS.setting, CHECKS.cond, CHECKS.axis, CHECKS.single_axis


def broadcast_static(a, b, op: str, names: Tuple[str, str]) -> Tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(_shape(a), _shape(b)))
    except ValueError:
        raise op_checks.no_broadcast((str(_shape(a)), str(_shape(b))), names, op, SPELLING) from None


def pick_mask(mask: object, where: object, op: str) -> object:
    """``mask`` or its jax.nn spelling ``where``; both at once is a mistake."""
    return op_checks.pick_mask(mask, where, op, SPELLING)


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
