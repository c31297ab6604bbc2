"""Checks of configuration arguments (numbers and flags), shared by every backend.

Each backend's ``_checks`` module names its own tensors ("a torch.Tensor", "a JAX array")
and calls these for the arguments that are plain Python values, so that one wrong
``beta`` or ``keepdims`` gets the same words in PyTorch, TensorFlow and JAX. No framework
and no NumPy is imported: NumPy's scalar types register themselves with :mod:`numbers`,
which is how ``np.float32(0.5)`` counts as a real number here.
"""

from __future__ import annotations

import math
import numbers
from typing import SupportsFloat, cast


def is_real_number(value: object) -> bool:
    """A Python int or float, or a NumPy real scalar; not a bool (``True`` is no number here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not _is_numpy_bool(value)


def _is_numpy_bool(value: object) -> bool:
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")


def check_real(value: object, name: str, where: str, *, tensor: str = "a tensor") -> float:
    """A real number as a float (NaN and inf allowed: as an operand they are data, not a mistake).

    ``where`` is the public name of the function (``"nanguard.tf.div"``) and ``tensor`` what
    else the argument may be, for the message.
    """
    if not is_real_number(value):
        raise TypeError(f"{where}: `{name}` must be {tensor} or a real number, got {type(value).__name__}")
    return _as_float(value, name, where)


def _as_float(value: object, name: str, where: str) -> float:
    """``float(value)`` of a value `is_real_number` accepted."""
    try:
        return float(cast(SupportsFloat, value))
    except OverflowError:  # an int beyond the float range, such as 10**400
        raise ValueError(f"{where}: `{name}` is too large for a float, got {value}") from None


def check_number(value: object, name: str, where: str, *, positive: bool = False) -> float:
    """A finite real number as a float (``positive``: also > 0); a setting, so NaN and inf are refused."""
    if not is_real_number(value):
        raise TypeError(f"{where}: `{name}` must be a real number, got {type(value).__name__}")
    value = _as_float(value, name, where)
    if not math.isfinite(value):
        raise ValueError(f"{where}: `{name}` must be finite, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{where}: `{name}` must be > 0, got {value}")
    return value


def check_bool(value: object, name: str, where: str) -> bool:
    """True or False (a NumPy bool too); 0, 1 and strings are refused rather than guessed."""
    if not (isinstance(value, bool) or _is_numpy_bool(value)):
        raise TypeError(f"{where}: `{name}` must be True or False, got {value!r}")
    return bool(value)
