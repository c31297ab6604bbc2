"""The plumbing every rule family shares: the `checks` decorator and small message helpers."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TypeVar

from nanguard.lint.analysis import Analysis

F = TypeVar("F", bound=Callable[..., None])


def checks(*codes: str) -> Callable[[F], F]:
    """Mark a check function with the rule codes it can report (so disabled rules cost nothing)."""

    def mark(func: F) -> F:
        func.codes = frozenset(codes)  # type: ignore[attr-defined]
        return func

    return mark


def via(ctx: Analysis, expr: ast.AST | None, value: ast.AST | None) -> str:
    """' (`p` is assigned on line 12)' when a rule looked through a name, else ''."""
    if value is None or expr is None or value is expr:
        return ""
    name = ast.unparse(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else "it"
    return f" (`{name}` is assigned on line {value.lineno})"  # type: ignore[attr-defined]
