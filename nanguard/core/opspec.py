"""Readers of the op specification (:mod:`nanguard.core.opspec_table`): one fact in one place.

From the table come each backend's list of ops (:func:`op_names`, for ``__all__``), the
"Singular points" and "Args" sections of every op's docstring (:func:`document`), and the
check of each setting (``fill``, ``beta``, ``keepdims``...) by its kind
(:func:`check_setting`), so PyTorch, TensorFlow and JAX say the same thing in the same words.
No framework is imported.
"""

from __future__ import annotations

import textwrap
from typing import Callable, Dict, List, Tuple, TypeVar

from nanguard.core import arguments
from nanguard.core.opspec_table import SPECS
from nanguard.core.opspec_types import BACKENDS, Arg, OpSpec

_F = TypeVar("_F", bound=Callable[..., object])

# how each backend spells the table's words; `prefix` starts its error messages
WORDS: Dict[str, Dict[str, str]] = {
    "torch": {"tensor": "tensor", "axis": "dim", "axes": "dimensions", "keepdims": "keepdim", "framework": "torch",
              "where": "torch.where", "prefix": "nanguard"},
    "tf": {"tensor": "tensor", "axis": "axis", "axes": "axes", "keepdims": "keepdims", "framework": "TensorFlow",
           "where": "tf.where", "prefix": "nanguard.tf"},
    "jax": {"tensor": "array", "axis": "axis", "axes": "axes", "keepdims": "keepdims", "framework": "JAX",
            "where": "jnp.where", "prefix": "nanguard.jax"},
}

_BY_NAME: Dict[str, OpSpec] = {spec.name: spec for spec in SPECS}

# the lines of a docstring that the generated sections replace, by section
MARKERS: Dict[str, str] = {"summary": "{summary}", "formula": "{formula}", "singular": "{spec}", "args": "{args}"}


def spec(name: str) -> OpSpec:
    """The row of op ``name``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a safe op of the specification (nanguard.core.opspec_table)") from None


def op_names(backend: str = "torch") -> Tuple[str, ...]:
    """The public safe ops of ``backend``, in the table's (README's) order."""
    _check_backend(backend)
    return tuple(s.name for s in SPECS if backend in s.backends)


def arg_name(arg: Arg, backend: str) -> str:
    """``arg``'s name in ``backend``'s signature (torch says ``dim``/``keepdim``)."""
    return WORDS[backend]["axis" if arg.name == "axis" else "keepdims"] if arg.name in ("axis", "keepdims") \
        else arg.name


def args_of(name: str, backend: str) -> Tuple[Arg, ...]:
    """The arguments op ``name`` takes in ``backend``, in signature order."""
    return tuple(a for a in spec(name).args if backend in a.backends)


def _wrap(text: str, first: str, rest: str) -> List[str]:
    return textwrap.wrap(text, width=88, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def render(name: str, backend: str, section: str = "singular") -> str:
    """Docstring section ``section`` of op ``name`` for ``backend``, unindented: its
    ``"summary"`` line, its ``"formula"``, the conventions at its ``"singular"`` points, or
    its ``"args"``."""
    words = WORDS[backend]
    row = spec(name)
    if section == "summary":
        return row.summary.format_map(words)
    if section == "formula":
        return "\n".join([f".. math:: {row.formula[0]}"] + [f"          {line}" for line in row.formula[1:]])
    if section == "args":
        lines = ["Args:"]
        for arg in args_of(name, backend):
            lines += _wrap(f"{arg_name(arg, backend)}: {arg.doc.format_map(words)}", "    ", "        ")
        return "\n".join(lines)
    if not row.singular:
        return "\n".join(_wrap(row.heading, "", ""))
    lines = [f"{row.heading}:"]
    for bullet in row.singular:
        lines += _wrap(bullet.format_map(words), "    * ", "      ")
    return "\n".join(lines)


def document(name: str, backend: str) -> Callable[[_F], _F]:
    """Decorator: op ``name``'s generated sections where its docstring has the lines of
    :data:`MARKERS` (``{summary}`` first, ``{formula}``, ``{spec}`` for the conventions,
    ``{args}``), indented as those lines are."""
    def fill(fn: _F) -> _F:
        lines = (fn.__doc__ or "").split("\n")
        for section, marker in MARKERS.items():
            found = [i for i, line in enumerate(lines) if line.strip() == marker]
            if len(found) != 1:
                raise ValueError(f"{fn.__qualname__}: its docstring needs one line {marker!r}, has {len(found)}")
            line = lines[found[0]]
            indent = line[: len(line) - len(line.lstrip())]
            lines[found[0]] = "\n".join(f"{indent}{text}" if text else "" for text in
                                         render(name, backend, section).split("\n"))
        fn.__doc__ = "\n".join(lines)
        return fn
    return fill


def check_setting(value: object, name: str, op: str, backend: str) -> object:
    """Check setting ``name`` of op ``op`` by its kind in the table: a bool for a flag, a
    finite float for a number (> 0 for a positive one). The message names ``backend``'s op."""
    kinds = {arg_name(a, backend): a.kind for a in args_of(op, backend)}
    kind = kinds.get(name)
    where = f"{WORDS[backend]['prefix']}.{op}"
    if kind == "flag":
        return arguments.check_bool(value, name, where)
    if kind in ("number", "positive"):
        return arguments.check_number(value, name, where, positive=kind == "positive")
    raise KeyError(f"{where}: {name!r} is not a setting of the op in the specification (kind {kind})")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")


__all__ = ["WORDS", "MARKERS", "spec", "op_names", "arg_name", "args_of", "render", "document", "check_setting"]
