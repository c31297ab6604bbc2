"""Readers of the op specification (:mod:`nanguard.core.opspec_table`): one fact in one place.

From the table come each backend's list of ops (:func:`op_names`, for ``__all__``), the
summary, formula, "Singular points" and "Args" of every op's docstring (:func:`document`),
and the check of each setting (``fill``, ``beta``, ``keepdims``...) by its kind
(:func:`check_setting`), so PyTorch, TensorFlow and JAX say the same thing in the same words.
No framework is imported.
"""

from __future__ import annotations

import inspect
import math
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
    return WORDS[backend][arg.name] if arg.name in ("axis", "keepdims") else arg.name


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


# the sections of an op's own docstring that come after the generated ones
_CLOSING = ("Returns:", "Example:")


def document(name: str, backend: str) -> Callable[[_F], _F]:
    """Decorator: the docstring of op ``name`` in ``backend``, from the table and the op's own.

    The op's own docstring says what is particular to the backend (why the framework's
    function fails, notes on its dtypes, an example); the table adds the rest, so the
    docstring reads: summary, formula, the op's own text, the conventions at the singular
    points, the arguments, then the op's closing sections (``Returns:``, ``Example:``).
    """
    def fill(fn: _F) -> _F:
        own = inspect.cleandoc(fn.__doc__ or "").split("\n")
        cut = next((i for i, line in enumerate(own) if line in _CLOSING), len(own))
        prose, closing = "\n".join(own[:cut]).strip(), "\n".join(own[cut:]).strip()
        parts = [render(name, backend, section) for section in ("summary", "formula")]
        parts += [prose] if prose else []
        parts += [render(name, backend, section) for section in ("singular", "args")]
        parts += [closing] if closing else []
        first, _, rest = "\n\n".join(parts).partition("\n")
        fn.__doc__ = first + "\n" + textwrap.indent(rest, "    ") + "\n"
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
    if kind == "nonnegative":
        if not arguments.is_real_number(value):
            raise TypeError(f"{where}: `{name}` must be a number, got {type(value).__name__}")
        if not 0 <= float(value) < math.inf:  # type: ignore[arg-type]
            raise ValueError(f"{where}: `{name}` must be a finite number >= 0, got {value}")
        return float(value)  # type: ignore[arg-type]
    raise KeyError(f"{where}: {name!r} is not a setting of the op in the specification (kind {kind})")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")


__all__ = ["WORDS", "spec", "op_names", "arg_name", "args_of", "render", "document", "check_setting"]
