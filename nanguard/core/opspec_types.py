"""The two records of the op specification: :class:`Arg` and :class:`OpSpec` (the table is
:mod:`nanguard.core.opspec_table`, its readers :mod:`nanguard.core.opspec`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

BACKENDS: Tuple[str, ...] = ("torch", "tf", "jax")

# What an argument may be; the kinds that are settings (plain Python values) carry their
# valid range here, so every backend refuses the same values with the same words.
ARG_KINDS = {
    "tensor": "a floating-point tensor",
    "operand": "a floating-point tensor or a real number (NaN and inf are data)",
    "optional": "a floating-point tensor or None",
    "bool": "a bool tensor",
    "mask": "an optional bool tensor (True = keep)",
    "axis": "one axis",
    "axes": "an axis, a sequence of axes, or None for all",
    "flag": "True or False",
    "number": "a finite real number",
    "positive": "a finite real number > 0",
    "nonnegative": "a finite real number >= 0",
    "callable": "a function of a tensor",
    "value": "a tensor, a number or (for ``other``) a callable",
}

# the settings: checked by `nanguard.core.opspec.check_setting` from their kind
SETTING_KINDS = ("flag", "number", "positive", "nonnegative")


@dataclass(frozen=True)
class Arg:
    """One argument of a safe op: its (numpy-spelled) name, kind, one-line doc and the
    backends that take it (``where``/``ddof`` are JAX's and numpy's aliases)."""

    name: str
    kind: str
    doc: str
    backends: Tuple[str, ...] = BACKENDS

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise ValueError(f"argument {self.name!r}: unknown kind {self.kind!r}")


@dataclass(frozen=True)
class OpSpec:
    """One public safe op: name, the module of its family (``<backend>/ops/<family>.py``),
    the first line of its docstring, its formula (LaTeX lines, read as they are), arguments
    in signature order, and its conventions at the singular points (one bullet each;
    ``heading`` titles them in the docstring)."""

    name: str
    family: str
    summary: str
    formula: Tuple[str, ...]
    args: Tuple[Arg, ...]
    singular: Tuple[str, ...]
    heading: str = "Singular points"
    backends: Tuple[str, ...] = BACKENDS
