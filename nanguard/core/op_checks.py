"""The safe ops' argument checks, framework-free: one set of rules and words for every backend.

A backend's ``_checks`` module is a thin adapter: it knows how to recognise its tensors and
read their dtype and shape, and hands those facts (names, ints, strings) to the functions
here, which decide and phrase the error. So a string instead of a tensor, an integer dtype,
an axis out of range or a negative ``beta`` get the same message in TensorFlow and JAX,
up to the name of the framework's own type and a hint in its own spelling.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple, cast

from nanguard.core import arguments
from nanguard.core.opspec import WORDS, check_setting

FLOATING_NAMES: Tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Spelling:
    """How a backend's messages name its things: ``tensor`` what a tensor argument may be,
    ``wrap`` a hint to make one (``{name}``: the argument), ``cast`` how to convert to float32,
    ``nonzero`` how to turn a number mask into a bool one."""

    backend: str
    tensor: str
    wrap: str
    cast: str
    nonzero: str

    def where(self, op: str) -> str:
        """The public name of op ``op`` in this backend: ``nanguard.tf.div``."""
        return f"{WORDS[self.backend]['prefix']}.{op}"

    @property
    def noun(self) -> str:
        """``tensor`` or ``array``."""
        return WORDS[self.backend]["tensor"]

    @property
    def a_noun(self) -> str:
        return ("an " if self.noun[0] in "aeiou" else "a ") + self.noun


def refuse_type(value: object, name: str, op: str, sp: Spelling) -> TypeError:
    """The error for a non-tensor ``value`` given as tensor argument ``name``."""
    hint = f"; wrap it first, e.g. `{sp.wrap.format(name=name)}`" if sp.wrap else ""
    return TypeError(f"{sp.where(op)}: `{name}` must be {sp.tensor}, got {type(value).__name__}{hint}")


def check_float_dtype(dtype: str, name: str, op: str, sp: Spelling) -> None:
    """Refuse a tensor of dtype ``dtype`` (its name) unless it is a real floating type."""
    if dtype not in FLOATING_NAMES:
        raise TypeError(
            f"{sp.where(op)}: `{name}` must be a floating-point {sp.noun} "
            f"(float16, bfloat16, float32 or float64), got dtype {dtype}; "
            f"convert it first, e.g. `{sp.cast.format(name=name)}`")


def check_bool_dtype(dtype: str, name: str, op: str, sp: Spelling) -> None:
    """Refuse a mask (``mask``, ``cond``) whose dtype is not bool."""
    if dtype != "bool":
        keep = " (True = keep)" if name == "mask" else ""
        hint = f"; use e.g. `{sp.nonzero}`" if name == "mask" else ""
        raise TypeError(f"{sp.where(op)}: `{name}` must be a bool {sp.noun}{keep}, got dtype {dtype}{hint}")


def setting(value: object, name: str, op: str, sp: Spelling) -> object:
    """A setting (``fill``, ``beta``, ``keepdims``...), checked by its kind in the op table."""
    return check_setting(value, name, op, sp.backend)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def axes(axis: object, rank: int, shape: str, op: str, sp: Spelling, *,
         allow_none: bool = True) -> Optional[Tuple[int, ...]]:
    """Normalise ``axis`` to a sorted tuple of non-negative axes of a ``rank``-dimensional
    input (``shape``: its shape, for the message); None means all axes, when allowed."""
    where = sp.where(op)
    if axis is None:
        if not allow_none:
            raise TypeError(f"{where}: `axis` is required")
        return None
    wrong = TypeError(f"{where}: `axis` must be an int or a sequence of ints, got {axis!r}")
    if isinstance(axis, (bool, str)) or not (_is_int(axis) or isinstance(axis, Sequence)):
        raise wrong
    given = (axis,) if _is_int(axis) else tuple(axis)  # type: ignore[arg-type]
    ndim = max(rank, 1)  # a scalar accepts axis 0 / -1, as reductions do
    out = []
    for item in given:
        if not _is_int(item):
            raise wrong
        a = int(cast(numbers.Integral, item))
        if not -ndim <= a < ndim:
            raise ValueError(f"{where}: axis {a} is out of range for {sp.a_noun} with {rank} dimension(s) "
                             f"(shape {shape}); valid axes are {-ndim}..{ndim - 1}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: `axis` repeats an axis: {axis!r}")
    if not out:
        raise ValueError(f"{where}: `axis` must name at least one axis (or be None for all), got {axis!r}")
    return tuple(sorted(out))


def single_axis(axis: object, rank: int, shape: str, op: str, sp: Spelling) -> int:
    """One axis (an int), normalised to non-negative."""
    if not _is_int(axis):
        raise TypeError(f"{sp.where(op)}: `axis` must be an int, got {axis!r}")
    (a,) = axes(int(cast(numbers.Integral, axis)), rank, shape, op, sp) or (0,)
    return a


def no_broadcast(shapes: Tuple[str, str], names: Tuple[str, str], op: str, sp: Spelling) -> ValueError:
    """The error for two arguments whose shapes do not broadcast."""
    return ValueError(f"{sp.where(op)}: shapes {shapes[0]} (`{names[0]}`) and {shapes[1]} (`{names[1]}`) "
                      f"do not broadcast")


def mask_misfit(mask_shape: str, x_shape: str, op: str, sp: Spelling) -> ValueError:
    """The error for a mask that does not broadcast to the input without changing its shape."""
    return ValueError(f"{sp.where(op)}: `mask` of shape {mask_shape} does not broadcast to the input's shape "
                      f"{x_shape}")


def pick_mask(mask: object, where: object, op: str, sp: Spelling) -> object:
    """``mask`` or its jax.nn/numpy spelling ``where``; both at once is a mistake."""
    if mask is not None and where is not None:
        raise ValueError(f"{sp.where(op)}: give `mask` or its jax.nn name `where`, not both (they mean the same)")
    return where if mask is None else mask


def correction(value: object, ddof: object, op: str, sp: Spelling) -> float:
    """``std``/``var``'s ``correction``, or numpy's name for it, ``ddof`` (not both)."""
    if ddof is not None:
        if value != 1:
            raise ValueError(f"{sp.where(op)}: give `correction` or its numpy name `ddof`, not both")
        value = ddof
    return float(cast(float, setting(value, "correction", op, sp)))


def need_rank(rank: Optional[int], least: int, what: str, shape: str, op: str, sp: Spelling) -> None:
    """Refuse an input of (static) rank below ``least``: ``what`` names it (```x```, ``inputs``)."""
    if rank is not None and rank >= least:
        return
    if least == 1:
        raise ValueError(f"{sp.where(op)}: {what} must have at least one dimension")
    raise ValueError(f"{sp.where(op)}: {what} must have shape (..., rows, features), got shape {shape}")


def rows_and_features(x: Optional[Tuple[Optional[int], ...]], y: Optional[Tuple[Optional[int], ...]], op: str,
                      sp: Spelling) -> None:
    """``distance_matrix``'s inputs: shapes ``(..., n, d)`` and ``(..., m, d)`` whose batch
    dimensions broadcast (a shape is None where its rank is unknown; a dimension None where
    only the run knows it: those are left to the framework)."""
    where = sp.where(op)
    for name, shape in (("x", x), ("y", y)):
        if shape is None or len(shape) < 2:
            raise ValueError(f"{where}: `{name}` must have shape (..., rows, features), got shape {shape}")
    assert x is not None and y is not None
    if None not in (x[-1], y[-1]) and x[-1] != y[-1]:
        raise ValueError(f"{where}: x and y need the same number of features (last dimension), "
                         f"got {x[-1]} and {y[-1]}")
    for a, b in zip(reversed(x[:-2]), reversed(y[:-2])):
        if None not in (a, b) and a != b and 1 not in (a, b):
            raise ValueError(f"{where}: batch dimensions {x[:-2]} and {y[:-2]} do not broadcast")


def need_callable(fn: object, name: str, op: str, sp: Spelling) -> None:
    """Refuse an argument ``name`` that should be a function."""
    if not callable(fn):
        raise TypeError(f"{sp.where(op)}: `{name}` must be callable, got {type(fn).__name__}")


def branch_value(value: object, name: str, op: str, sp: Spelling, is_tensor: Callable[[object], bool]) -> object:
    """``safe_where``'s ``safe``, ``other`` (already called when a callable) or ``fn``'s result
    (``name`` ``"fn"``): a tensor, returned as it is, or for ``safe``/``other`` a real number,
    returned as a float."""
    if is_tensor(value):
        return value
    if name == "fn":
        raise TypeError(f"{sp.where(op)}: `fn` must return {sp.a_noun}, got {type(value).__name__}")
    if not arguments.is_real_number(value):
        what = f"a number or {sp.noun}" if name == "safe" else f"{sp.a_noun}, number or callable"
        raise TypeError(f"{sp.where(op)}: `{name}` must be {what}, got {type(value).__name__}")
    return float(cast(float, value))


class Checks:
    """The argument checks of one backend, from how it reads its tensors.

    ``is_tensor`` tells a tensor of the framework (or one it converts, a numpy array),
    ``convert`` makes it one, ``dtype`` names a tensor's dtype (``"float32"``), and ``shape``
    gives its static rank and shape text, raising where the rank is unknown.
    """

    def __init__(self, spelling: Spelling, is_tensor: Callable[[object], bool], convert: Callable[[Any], Any],
                 dtype: Callable[[Any], str], shape: Callable[[Any, str], Tuple[int, str]]) -> None:
        self.spelling, self.is_tensor, self._convert, self._dtype, self._shape = (
            spelling, is_tensor, convert, dtype, shape)

    def tensor(self, x: object, name: str, op: str) -> Any:
        """``x`` as a tensor of the framework; anything else is refused."""
        if not self.is_tensor(x):
            raise refuse_type(x, name, op, self.spelling)
        return self._convert(x)

    def floating(self, x: object, name: str, op: str) -> Any:
        """A real floating-point tensor; integer, bool and complex tensors are refused."""
        t = self.tensor(x, name, op)
        check_float_dtype(self._dtype(t), name, op, self.spelling)
        return t

    def real(self, x: object, name: str, op: str) -> float:
        """A real number (NaN and inf allowed: they are data, not a configuration error)."""
        return arguments.check_real(x, name, self.spelling.where(op), tensor=self.spelling.a_noun)

    def operand(self, x: object, name: str, op: str) -> Any:
        """A floating tensor, or a Python number for an operand of a binary op."""
        return self.floating(x, name, op) if self.is_tensor(x) else self.real(x, name, op)

    def setting(self, value: object, name: str, op: str) -> Any:
        """A setting of ``op`` (``fill``, ``beta``, ``keepdims``...), checked by its kind in the op table."""
        return setting(value, name, op, self.spelling)

    def cond(self, cond: object, op: str) -> Any:
        """``safe_where``'s condition: a bool tensor."""
        c = self.tensor(cond, "cond", op)
        check_bool_dtype(self._dtype(c), "cond", op, self.spelling)
        return c

    def axis(self, x: Any, axis: object, op: str, *, allow_none: bool = True) -> Optional[Tuple[int, ...]]:
        """Normalise ``axis`` to a sorted tuple of non-negative axes of ``x`` (None = all, when allowed)."""
        if axis is None:
            return axes(None, 0, "", op, self.spelling, allow_none=allow_none)
        return axes(axis, *self._shape(x, op), op, self.spelling, allow_none=allow_none)

    def single_axis(self, x: Any, axis: object, op: str) -> int:
        """One axis of ``x`` (an int), normalised to non-negative."""
        return single_axis(axis, *self._shape(x, op), op, self.spelling)

    def correction(self, value: object, ddof: object, op: str) -> float:
        return correction(value, ddof, op, self.spelling)

    def rank(self, x: Any, least: int, what: str, op: str) -> None:
        """Refuse ``x`` (a tensor or a shape) unless its static rank is at least ``least``."""
        try:
            rank, shape = self._shape(x, op)
        except ValueError:  # a rank unknown while tracing: left to the framework's own checks
            return
        need_rank(rank, least, what, shape, op, self.spelling)


__all__ = ["Checks", "FLOATING_NAMES", "Spelling", "axes", "branch_value", "check_bool_dtype", "check_float_dtype",
           "correction", "mask_misfit", "need_callable", "need_rank", "no_broadcast", "pick_mask", "refuse_type",
           "rows_and_features", "setting", "single_axis"]
