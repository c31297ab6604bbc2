"""Where a value goes: uses that end its gradient, and names used as indices.

A gradient hazard matters only if a gradient reaches the op. Two facts read from how a value
is used answer part of that: a value whose every later use prints, logs, formats or compares
it (or takes its argmax) is never differentiated; a name used as a subscript index is an
integer or a bool mask.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nanguard.lint.syntax import bounded_walk

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis
    from nanguard.lint.scope import Scope

# Calls that only show a value or read it without a gradient: printing, logging, formatting,
# leaving the framework, and index-valued reductions (argmax's result carries no gradient).
_SINK_CALLS = frozenset({"print", "info", "debug", "warning", "warn", "log", "log_metrics", "log_dict",
                         "add_scalar", "add_scalars", "set_postfix", "set_description", "format",
                         "item", "tolist", "numpy", "float", "int", "bool", "write",
                         "argmax", "argmin", "argsort", "nonzero", "count_nonzero"})


class _Uses:
    """Per scope: the loads of each local name, the ids of loads that end in a sink (a reporting
    call, an f-string, a comparison, an index-valued reduction), and which assignment's
    right-hand side each node belongs to."""

    __slots__ = ("loads", "owner", "sunk")

    def __init__(self, ctx: Analysis, scope_node: ast.AST) -> None:
        self.loads: dict[str, list[ast.Name]] = {}
        self.sunk: set[int] = set()
        self.owner: dict[int, str] = {}
        for n in bounded_walk(scope_node, 8000):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads.setdefault(n.id, []).append(n)
            elif isinstance(n, (ast.JoinedStr, ast.Compare)):
                self.sunk.update(id(m) for m in bounded_walk(n, 200))
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                for m in bounded_walk(n.value, 400):
                    self.owner.setdefault(id(m), n.targets[0].id)
            elif isinstance(n, ast.Call):
                func = n.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in _SINK_CALLS and (ctx.op(n) is None or name in ("argmax", "argmin", "argsort")):
                    parts = [*n.args, *(k.value for k in n.keywords)]
                    if isinstance(func, ast.Attribute) and name in ("item", "tolist", "numpy", "argmax", "argmin",
                                                                     "argsort", "nonzero", "count_nonzero"):
                        parts.append(func.value)
                    for part in parts:
                        self.sunk.update(id(m) for m in bounded_walk(part, 200))


def only_reported(ctx: Analysis, node: ast.AST) -> bool:
    """Is `node` part of the value of a local name whose every later use only shows or
    compares it (`rmse = sqrt(mse)` then `print(f"{rmse:.2f}")`; `d = sqrt(...)` then
    `d < r`; `argmin(d)`)? No gradient is taken through such a value."""
    scope_node = ctx.scope.node
    memo_key = f"uses:{id(scope_node)}"
    if memo_key not in ctx.memo:
        ctx.memo[memo_key] = _Uses(ctx, scope_node)
    uses_index: _Uses = ctx.memo[memo_key]
    if id(node) in uses_index.sunk:
        return True  # `print("RMSE: {}".format(jnp.sqrt(mse)))`
    key = uses_index.owner.get(id(node))
    line = getattr(node, "end_lineno", None)
    if key is None or line is None:
        return False
    uses = [n for n in uses_index.loads.get(key, ()) if n.lineno > line]
    return bool(uses) and all(id(n) in uses_index.sunk for n in uses)


def index_names(ctx: Analysis, scope: Scope) -> frozenset[str]:
    """Names that `scope` uses as a subscript index (`table[k]`, `x[i, j]`, `x.at[idx]`):
    integers or bool masks, so no gradient flows through them."""
    key = f"index_names:{id(scope.node)}"
    if key not in ctx.memo:
        names = set()
        for node in bounded_walk(scope.node, 6000):
            if isinstance(node, ast.Subscript):
                index = node.slice
                for part in index.elts if isinstance(index, ast.Tuple) else [index]:
                    if isinstance(part, ast.Name):
                        names.add(part.id)
        ctx.memo[key] = frozenset(names)
    return ctx.memo[key]  # type: ignore[no-any-return]
