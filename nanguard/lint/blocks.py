"""The block structure of a scope body: which statement runs before which, under which `if`.

Built lazily per function (or module) body the first time a rule asks, from the statements
alone: `dominates` says that an assignment runs, in straight-line order, before every
execution of a later line (so it overwrote the earlier values of its name there), and
`conditions_at` lists the `if` tests known to hold (or to fail) at a line.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis

_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


class Entry(NamedTuple):
    first: int
    last: int
    block: int   # id of the statement list it is in
    index: int   # its position there
    parent: int  # position of the enclosing statement in the table, -1 at the top
    stmt: ast.stmt
    field: str   # the enclosing statement's field holding it ("body", "orelse", ...)


def _table(root: ast.AST) -> list[Entry]:
    out: list[Entry] = []
    body = getattr(root, "body", None)
    if not isinstance(body, list):
        return out
    stack: list[tuple[list, int, str]] = [(body, -1, "body")]
    while stack:
        block, parent, field = stack.pop()
        for i, stmt in enumerate(block):
            if not isinstance(stmt, ast.stmt):
                continue
            pos = len(out)
            out.append(Entry(stmt.lineno, stmt.end_lineno or stmt.lineno, id(block), i, parent, stmt, field))
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # their bodies are scopes of their own
            for name in _BLOCK_FIELDS:
                inner = getattr(stmt, name, None)
                if not inner:
                    continue
                if name in ("handlers", "cases"):
                    for h in inner:
                        stack.append((h.body, pos, name))
                else:
                    stack.append((inner, pos, name))
    return out


def table(ctx: Analysis, root: ast.AST) -> list[Entry]:
    tables = ctx.__dict__.setdefault("_block_tables", {})
    found = tables.get(id(root))
    if found is None:
        found = tables[id(root)] = _table(root)
    return found


def innermost(entries: list[Entry], line: int) -> int:
    """Position of the innermost statement spanning `line`, -1 if none."""
    best, span = -1, None
    for pos, e in enumerate(entries):
        if e.first <= line <= e.last and (span is None or e.last - e.first <= span):
            best, span = pos, e.last - e.first
    return best


def dominates(ctx: Analysis, root: ast.AST, assigned: int, used: int) -> bool:
    """Does the simple statement at line `assigned` run before every execution of line `used`
    in the body of `root`: it is in the same block as `used` or in a block around it, earlier?"""
    entries = table(ctx, root)
    a, u = innermost(entries, assigned), innermost(entries, used)
    if a < 0 or u < 0 or entries[a].last >= used:
        return False
    while u >= 0:
        e = entries[u]
        if e.block == entries[a].block and e.index > entries[a].index:
            return True
        u = e.parent
    return False


def conditions_at(ctx: Analysis, root: ast.AST, line: int) -> list[tuple[ast.expr, bool]]:
    """The tests of the `if`s around `line` in the body of `root`, with whether each holds there
    (True in the `if` body, False in its `else`)."""
    entries = table(ctx, root)
    u = innermost(entries, line)
    out: list[tuple[ast.expr, bool]] = []
    while u >= 0:
        e = entries[u]
        if e.parent >= 0:
            p = entries[e.parent].stmt
            if isinstance(p, ast.If) and e.field in ("body", "orelse"):
                out.append((p.test, e.field == "body"))
        u = e.parent
    return out


def in_a_loop(ctx: Analysis, root: ast.AST, line: int) -> bool:
    """Is the statement at `line` inside a `for` or `while` of the body of `root` (not counting
    nested functions, which are scopes of their own)?"""
    entries = table(ctx, root)
    u = innermost(entries, line)
    while u >= 0:
        u = entries[u].parent
        if u >= 0 and isinstance(entries[u].stmt, (ast.For, ast.AsyncFor, ast.While)):
            return True
    return False
