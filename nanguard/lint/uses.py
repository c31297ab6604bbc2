"""Where a value goes: uses that end its gradient, and names used as indices.

A gradient hazard matters only if a gradient reaches the op. Two facts read from how a value
is used answer part of that: a value whose every later use prints, logs, formats or compares
it (or takes its argmax) is never differentiated, and of `values, indices = x.min(-1)` only
the values carry x's gradient; a name used as a subscript index is an integer or a bool mask.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nanguard.lint.autodiff_markers import FUNCS
from nanguard.lint.syntax import bounded_walk, callee_name

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis
    from nanguard.lint.scope import Scope

# Calls that only show a value or read it without a gradient: printing, logging, formatting,
# leaving the framework, index- and bool-valued results (argmax, bucketize, isnan: no gradient).
_SINK_CALLS = frozenset({"print", "info", "debug", "warning", "warn", "log", "log_metrics", "log_dict",
                         "add_scalar", "add_scalars", "add_summary", "add_histogram", "scalar", "log_scalar",
                         "log_metric", "record_local_metric", "set_postfix", "set_description", "format",
                         "item", "tolist", "numpy", "float", "int", "bool", "write",
                         "argmax", "argmin", "argsort", "nonzero", "count_nonzero", "argwhere",
                         "bucketize", "searchsorted", "digitize", "isnan", "isinf", "isfinite", "isclose",
                         "allclose"})
# Of these, the ones a framework also spells as a tensor op, whose result is still not differentiable.
_INDEX_OPS = frozenset({"argmax", "argmin", "argsort", "nonzero", "count_nonzero", "argwhere", "bucketize",
                        "searchsorted", "digitize", "isnan", "isinf", "isfinite", "isclose", "allclose"})
# What is read off a tensor without its values: `x.shape`, `x.size(0)`;
# `.indices` of a sort, top-k or max result: integers, whatever the values were.
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "size", "dim", "numel", "get_shape",
                       "indices"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Reductions that return (values, indices) when unpacked in two: only the values carry a gradient.
_VALUES_AND_INDICES = frozenset({"min", "max", "topk", "top_k", "sort", "kthvalue", "median", "mode",
                                 "cummax", "cummin"})
# Calls that differentiate, run or keep what they are given: the value does not end in their
# result (TF1's `opt.minimize(cost)` then `sess.run([train_op, cost])`, `losses.append(d)`).
_ESCAPES = frozenset({"minimize", "backward", "grad", "gradient", "gradients", "value_and_grad", "vjp", "jvp",
                      "apply_gradients", "compute_gradients", "run", "append", "extend", "insert", "add",
                      "update", "put", "setdefault", "assign", "add_loss", "register_buffer",
                      "register_parameter", "save", "step", "fit", "train_on_batch"})


class _Uses:
    """Per scope: the loads of each local name, the ids of loads that end in a sink (a reporting
    call, an f-string, a comparison, an index-valued reduction, a shape read), which assignment's
    targets each node's value flows to (with the assignment's last line and the loop around it),
    and the nodes returned."""

    __slots__ = ("escaped", "loads", "loop_of", "owner", "returned", "shown", "sunk")

    def __init__(self, ctx: Analysis, scope_node: ast.AST) -> None:
        self.loads: dict[str, list[ast.Name]] = {}
        self.sunk: set[int] = set()
        # ... of which, those where a NaN in the value ends too: compared, shown, a shape read (not
        # `.item()`, a metric logger, argmin or isnan, which carry it on or act on it)
        self.shown: set[int] = set()
        self.escaped: set[int] = set()  # passed to code that differentiates, runs or keeps it
        self.owner: dict[int, tuple[tuple[str, ...], int, int]] = {}  # -> (targets, last line, id(stmt))
        self.loop_of: dict[int, ast.AST] = {}  # id(assignment) -> the innermost loop around it
        self.returned: set[int] = set()
        for n in bounded_walk(scope_node, 8000):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads.setdefault(n.id, []).append(n)
            elif isinstance(n, (ast.JoinedStr, ast.Compare)):
                ids = {id(m) for m in bounded_walk(n, 200)}
                self.sunk.update(ids)
                self.shown.update(ids)
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                names = _target_names(n)
                if len(names) == 2 and isinstance(n.value, ast.Call) \
                        and callee_name(n.value.func) in _VALUES_AND_INDICES:
                    names = names[:1]  # `d_min, idx = dist.min(-1)`: the gradient flows through d_min only
                if names:
                    for m in bounded_walk(n.value, 400):
                        self.owner.setdefault(id(m), (names, getattr(n, "end_lineno", n.lineno), id(n)))
            elif isinstance(n, ast.Return) and n.value is not None:
                self.returned.update(id(m) for m in bounded_walk(n.value, 400))
            elif isinstance(n, _LOOPS):
                for m in bounded_walk(n, 4000):
                    if isinstance(m, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                        self.loop_of[id(m)] = n  # pre-order: the innermost loop is seen last
            elif isinstance(n, ast.Subscript) and _indices_of(ctx, n):
                self.sunk.update(id(m) for m in bounded_walk(n.value, 200))  # `d.topk(k)[1]`: integers
            elif isinstance(n, ast.Attribute) and n.attr in _METADATA and isinstance(n.ctx, ast.Load):
                ids = {id(m) for m in bounded_walk(n.value, 200)}  # `x.shape`: no value of x is read
                self.sunk.update(ids)
                self.shown.update(ids)
            elif isinstance(n, ast.Call):
                func = n.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in _SINK_CALLS and (ctx.op(n) is None or name in _INDEX_OPS):
                    parts = [*n.args, *(k.value for k in n.keywords)]
                    if isinstance(func, ast.Attribute) and name in _INDEX_OPS | {"item", "tolist", "numpy"}:
                        parts.append(func.value)
                    for part in parts:
                        ids = {id(m) for m in bounded_walk(part, 200)}
                        self.sunk.update(ids)
                        if name in _SHOWING_CALLS:
                            self.shown.update(ids)
                elif name in _ESCAPES or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                        and func.value.id == "self" and ctx.op(n) is None):
                    for part in [*n.args, *(k.value for k in n.keywords)]:
                        self.escaped.update(id(m) for m in bounded_walk(part, 200))

    def loads_after(self, key: str, line: int, loop: ast.AST | None) -> list[ast.Name]:
        """Loads of `key` that can read a value assigned on `line`: later lines, and anywhere in
        the loop around the assignment (the next iteration reads it too)."""
        inside = {id(m) for m in bounded_walk(loop, 4000)} if loop is not None else set()
        return [n for n in self.loads.get(key, ()) if n.lineno > line or id(n) in inside]


def _indices_of(ctx: Analysis, node: ast.Subscript) -> bool:
    """`d.topk(k, largest=False)[1]`, `torch.max(s, -1)[1]`: the indices of a (values, indices)
    result, integers whatever the values were. Not `np.sort(x)[1]` (an array's second entry) or
    `torch.max(a, b)[1]` (an elementwise maximum's second row)."""
    call = node.value
    if not (isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) and node.slice.value == 1
            and isinstance(call, ast.Call) and callee_name(call.func) in _VALUES_AND_INDICES):
        return False
    qualname = ctx.imports.qualname(call.func)
    method = qualname is None and isinstance(call.func, ast.Attribute)
    if not method and not (qualname or "").startswith(("torch.", "tensorflow.", "jax.lax.")):
        return False
    if callee_name(call.func) not in ("min", "max"):
        return True
    dims = [k.value for k in call.keywords if k.arg in ("dim", "axis")]
    dims += call.args[:1] if method else call.args[1:2]
    return any(isinstance(d, ast.Constant) and isinstance(d.value, int) for d in dims)


def _target_names(node: ast.AST) -> tuple[str, ...]:
    """The names an assignment binds (`a = ...`, `a, _ = ...`, `a += ...`); () when any target is
    not a plain name (an attribute or subscript keeps the value somewhere else)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    names: list[str] = []
    for t in targets:
        for part in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
            if not isinstance(part, ast.Name):
                return ()
            names.append(part.id)
    return tuple(names)


def _uses_of(ctx: Analysis, scope_node: ast.AST) -> _Uses:
    memo_key = f"uses:{id(scope_node)}"
    if memo_key not in ctx.memo:
        ctx.memo[memo_key] = _Uses(ctx, scope_node)
    return ctx.memo[memo_key]  # type: ignore[no-any-return]


def _dead(uses: _Uses, node: ast.AST, seen: set[tuple[str, int]], depth: int, local: bool,
          value: bool = False) -> bool:
    """Does the value of `node` end, on every path, in a sink: shown, compared, reduced to an
    index, or assigned only to names whose every later read does (transitively, `depth` names)?
    A name never read again ends it too, in a function (`local`): nothing outside sees it."""
    if id(node) in (uses.shown if value else uses.sunk):
        return True  # a sink inside an escape ends the value first: `weights.append(w * rmse.item())`
    if id(node) in uses.escaped:
        return False  # `optimizer.minimize(cost)`, `sess.run([train_op, cost])`, `losses.append(d)`
    owned = uses.owner.get(id(node))
    if owned is None or depth <= 0:
        return False
    names, line, stmt = owned
    for key in names:
        if (key, line) in seen:
            continue  # `d = where(m, d, inf)`: the later reads of the new `d` are checked once
        seen.add((key, line))
        loads = uses.loads_after(key, line, uses.loop_of.get(stmt))
        if not loads and not (local or key.startswith("_")):
            return False
        if not all(_dead(uses, n, seen, depth - 1, local, value) for n in loads):
            return False
    return True


def only_reported(ctx: Analysis, node: ast.AST) -> bool:
    """Does the value of `node` only reach sinks: shown, compared, reduced to an index or a
    shape (`rmse = sqrt(mse)` then `print(f"{rmse:.2f}")`; `d = sqrt(...)` then `d < r`;
    `argsort(where(m, d, inf))`), through local names and, for a value a private or nested
    function returns, through every call of it in the module? No gradient is taken through
    such a value."""
    return _only_reported(ctx, node, ctx.scope, 2)


def value_only_reported(ctx: Analysis, node: ast.AST) -> bool:
    """`only_reported` for a NaN in the value itself: only comparisons, shape reads and what is
    shown (printed, formatted) end it. A conversion or a metric logger (`scores.append(score.item())`,
    `metrics.log_scalar("nll", x)`) carries the NaN on; argmin picks it and isnan sees it."""
    return _only_reported(ctx, node, ctx.scope, 2, value=True)


def _only_reported(ctx: Analysis, node: ast.AST, scope: Scope, calls_depth: int, value: bool = False) -> bool:
    local = isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    uses = _uses_of(ctx, scope.node)
    if id(node) not in uses.owner and id(node) not in uses.sunk:
        if id(node) in uses.returned and calls_depth > 0 and isinstance(scope.node, FUNCS):
            return _result_only_reported(ctx, scope.node, calls_depth - 1, value)
        return False
    owned = uses.owner.get(id(node))
    if owned is not None:
        names, line, stmt = owned
        loads = [n for key in names for n in uses.loads_after(key, line, uses.loop_of.get(stmt))]
        if not loads:
            return False  # the value of the finding itself is never read: dead code, or read elsewhere
    return _dead(uses, node, set(), 4, local, value)


def _result_only_reported(ctx: Analysis, fn: ast.AST, calls_depth: int, value: bool = False) -> bool:
    """Is every call of the private or nested function `fn` in this module a value that only
    reaches sinks (`dists = distances(p)` then `dists < r`)?"""
    refs = ctx.autodiff.calls_of(fn)
    if not refs:
        return False
    for call, caller in refs:
        scope = ctx.scope_of.get(id(caller)) if caller is not None else ctx.module_scope
        if scope is None or not _only_reported(ctx, call, scope, calls_depth, value):
            return False
    return True


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


_SHOWING_CALLS = frozenset({"print", "info", "debug", "warning", "warn", "set_postfix", "set_description", "write",
                            "format"})


def shown_in_place(ctx: Analysis, node: ast.AST) -> bool:
    """Is `node` written where it is only shown: inside an f-string, `str.format` or a `%` format, or an argument
    of `print`/a logger (`print(f"ratio: {masked.sum() / valid.count_nonzero():.4f}")`)? A NaN
    there is printed, and nothing computes with it."""
    memo_key = f"shown:{id(ctx.scope.node)}"
    shown = ctx.memo.get(memo_key)
    if shown is None:
        shown = set()
        for n in bounded_walk(ctx.scope.node, 8000):
            if isinstance(n, ast.JoinedStr):
                shown.update(id(m) for m in bounded_walk(n, 200))
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and isinstance(n.left, ast.Constant) \
                    and isinstance(n.left.value, str):
                shown.update(id(m) for m in bounded_walk(n.right, 200))  # `"Average: %.2f" % (n / m)`
            elif isinstance(n, ast.Call) and ctx.op(n) is None and callee_name(n.func) in _SHOWING_CALLS:
                for part in [*n.args, *(k.value for k in n.keywords)]:
                    shown.update(id(m) for m in bounded_walk(part, 200))
        ctx.memo[memo_key] = shown
    return id(node) in shown
