"""Names a value depends on, and the values they held: the small dataflow the rules share.

`tagged_names` says which bindings an expression reads (so a condition and a singular input
speak of the same value only when they read the same one), `value_nodes` follows names
through their assignments, and `counts_own_finite_entries` recognises a count of a tensor's
own non-NaN entries.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from nanguard.lint.names import WRAPPER_METHODS
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import NAN_TESTS, _bounded_walk, callee_name

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis


def names_in(ctx: Analysis, expr: ast.AST, expand: bool = True) -> set:
    """Variable names (and `self.x`) that `expr` depends on, one assignment deep."""
    out = set()
    for node in _bounded_walk(expr, 200):
        key = name_key(node)
        if key is None or key in ctx.imports.aliases or key in ("self", "True", "False", "None"):
            continue
        out.add(key)
        if expand:
            value = ctx.value_of(node)
            if value is not None:
                out |= names_in(ctx, value, expand=False)
    return out


def tagged_names(ctx: Analysis, expr: ast.AST, expand: bool = True) -> set[str]:
    """`names_in`, each name tagged with the binding it reads (`step@451`): the condition and
    the singular input speak of the same value only when they read the same binding, not a
    name reassigned in between (`step = ... + 1.` used in the exp's input, then `step = k + 1`
    compared in the condition)."""
    out = set()
    for node in _bounded_walk(expr, 200):
        key = name_key(node)
        if key is None or key in ctx.imports.aliases or key in ("self", "True", "False", "None"):
            continue
        out.add(_tag(ctx, key, node))
        if expand:
            value = ctx.value_of(node)
            if value is not None:
                out |= tagged_names(ctx, value, expand=False)
    return out


def _tag(ctx: Analysis, key: str, node: ast.AST) -> str:
    _, values = ctx.lookup(key)
    line = node.lineno  # type: ignore[attr-defined]
    prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
    return f"{key}@{prior[-1].lineno if prior else 0}"  # type: ignore[attr-defined]


# Grids and fills: a fixed table of values (`torch.arange(-6., 6., .01)`), and tables joined from
# them. Literal tensors (`torch.tensor([0., 100.])`) are left out: demos, seeds and the repro
# snippets of NaN reports feed them as data.
_FACTORIES = frozenset({"arange", "linspace", "logspace", "ones", "full", "eye", "cat", "concat", "concatenate",
                        "stack"})


def fixed_value(ctx: Analysis, expr: ast.AST, depth: int = 3, _open: frozenset[str] = frozenset()) -> bool:
    """Is `expr` computed from literals alone (`torch.log(torch.sigmoid(torch.arange(-6., 6., .01)))`,
    a local bound once to such a value, or rebound from itself and such values: `q =
    torch.linspace(.1, .9, 3); q = torch.cat([q, 1 - q])`)? Its value is the same on every run, whatever the data: nothing the
    code accepts can move it onto a singular point."""
    stack: list[ast.AST] = [expr]
    seen = 0
    while stack:
        n = stack.pop()
        seen += 1
        if seen > 120:
            return False
        if isinstance(n, (ast.Constant, ast.operator, ast.unaryop, ast.expr_context, ast.Slice, ast.keyword)):
            if isinstance(n, ast.keyword):
                stack.append(n.value)
            continue
        if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List)):
            stack.extend(ast.iter_child_nodes(n))
            continue
        if isinstance(n, ast.Attribute) and name_key(n.value) in ctx.imports.aliases:
            continue  # `math.pi`, `torch.float32`
        if isinstance(n, ast.Call):
            func = n.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            # `torch.log(...)`, `torch.nn.functional.kl_div(...)`: a function of an imported module
            module_call = isinstance(func, ast.Attribute) and ctx.imports.qualname(func.value) is not None
            # `torch.linspace(.1, .9, 3).view(3, 1)`: a dtype, device or shape change keeps it fixed
            layout = name in WRAPPER_METHODS and isinstance(func, ast.Attribute) and not module_call
            if not (name in _FACTORIES and module_call) and not layout and ctx.op(n) is None:
                return False
            if any(k.arg == "requires_grad" for k in n.keywords):
                return False  # a leaf made to be trained: its values move
            if not module_call:
                if not isinstance(func, ast.Attribute):
                    return False  # `sm(x)`: a module instance or a local function, not a constant
                stack.append(func.value)  # `x.log()`: x decides
            stack.extend(n.args)
            stack.extend(n.keywords)
            continue
        if isinstance(n, ast.Name) and n.id in _open:
            continue  # `q = torch.cat([q, q_])`: q's other values decide
        if isinstance(n, ast.Name) and depth > 0:
            _, values = ctx.lookup(n.id)
            if values and all(v is not None for v in values) and \
                    all(fixed_value(ctx, v, depth - 1, _open | {n.id}) for v in values):  # type: ignore[arg-type]
                continue
        return False
    return True


def value_nodes(ctx: Analysis, expr: ast.expr | str, depth: int = 3) -> list[ast.AST]:
    """The nodes of `expr` (or of the values of the name `expr`) and of the values its names
    held, following names `depth` assignments deep (every assignment of a reassigned name)."""
    out: list[ast.AST] = []
    if isinstance(expr, str):  # the name's values are one assignment in
        todo, seen, depth = [v for v in ctx.lookup(expr)[1] if v is not None], {expr}, depth - 1
    else:
        todo, seen = [expr], set()
    while todo and depth >= 0:
        depth -= 1
        nxt: list[ast.expr] = []
        for e in todo:
            for node in _bounded_walk(e, 100):
                out.append(node)
                key = name_key(node)
                if key is None or key in seen or key in ctx.imports.aliases:
                    continue
                seen.add(key)
                nxt.extend(v for v in ctx.lookup(key)[1] if v is not None)
        todo = nxt
    return out


def counts_own_finite_entries(ctx: Analysis, count: ast.expr | str, numerator: ast.expr) -> bool:
    """Is `count` a count of the finite (non-NaN) entries of the very tensor the numerator sums
    (`valid = ~isnan(x)`; `centered = where(valid, x - m, 0)`; `centered.sum() / valid.sum()`)?
    It is 0 only where every entry is already NaN: the division adds no NaN of its own."""
    own = {name_key(n) for n in value_nodes(ctx, numerator, 2)} - {None}
    for node in value_nodes(ctx, count, 2):
        oc = ctx.op(node) if isinstance(node, ast.Call) else None
        if oc is not None and oc.op == "isfinite" and oc.input is not None \
                and {name_key(n) for n in _bounded_walk(oc.input, 20)} & own:
            return True
    return False


def incremented_before(ctx: Analysis, name: ast.expr, line: int) -> bool:
    """Is the local `name` increased in place (`n += eps`, `probs_masked += probs * 1e-3`) after its
    last assignment and before `line`? Its value there is no longer what was assigned (a count
    of a mask plus something else is not a count of a mask)."""
    key = name_key(name)
    scope, _ = ctx.lookup(key) if key is not None else (None, [])
    if scope is None:
        return False
    last = ctx.last_value(name)
    since = last.lineno if last is not None else 0  # type: ignore[attr-defined]
    return any(isinstance(n.op, ast.Add) and since < n.lineno < line for n in scope.augmented.get(key, ()))


_LEAVES = (ast.Continue, ast.Break, ast.Return, ast.Raise)


def nan_handled_next(ctx: Analysis, node: ast.AST) -> bool:
    """Is the value `node` assigned to a name that the very next statement tests with isnan, isinf
    or isfinite, leaving the loop or the function when it is not finite (DomainBed's
    `loss_i = s / n` then `if torch.isnan(loss_i): nans += 1; continue`), or cleans with
    nan_to_num (SAM's `rate = hits.sum() / mask.sum()` then `return jnp.nan_to_num(rate)`)?
    The code handles it."""
    line = getattr(node, "lineno", 0)
    for block in _blocks(ctx.scope.node):
        for stmt, after in zip(block, block[1:]):
            if not (isinstance(stmt, ast.Assign) and stmt.lineno <= line <= (stmt.end_lineno or 0)
                    and len(stmt.targets) == 1 and any(n is node for n in _bounded_walk(stmt.value, 200))):
                continue
            key = name_key(stmt.targets[0])
            value = after.value if isinstance(after, (ast.Return, ast.Assign)) else None
            if isinstance(value, ast.Call) and callee_name(value.func) in ("nan_to_num", "nan_to_num_") \
                    and value.args and key is not None and name_key(value.args[0]) == key:
                return True  # the NaN reaches the name (through any arithmetic) and is cleaned there
            if stmt.value is not node or not isinstance(after, ast.If):
                return False
            tested = any(isinstance(c, ast.Call) and callee_name(c.func) in NAN_TESTS
                         and any(name_key(a) == key for a in [*c.args, getattr(c.func, "value", None)] if a is not None)
                         for c in ast.walk(after.test))
            return tested and isinstance(after.body[-1], _LEAVES)
    return False


def _blocks(root: ast.AST) -> Iterator[list]:
    for n in _bounded_walk(root, 4000):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and len(block) > 1:
                yield block


# Reductions that skip NaN entries, and cleaners that replace them: a NaN that only reaches
# these is the code's own "no value" marker, not a bug.
_NAN_SKIPPING = frozenset({"nanmean", "nanmin", "nanmax", "nansum", "nanmedian", "nanquantile", "nanstd",
                           "nanvar", "nanargmax", "nanargmin", "nan_to_num", "nan_to_num_"})


def returned_to_nan_skipping_callers(ctx: Analysis, node: ast.AST) -> bool:
    """Is `node` what a nested function returns, and does every call of that function in the
    enclosing function reach only NaN-skipping reductions (trl's `masked_seq_mean(x)` of a
    completion masked to nothing is NaN on purpose: `nanmin(gather(masked_seq_mean(x)))`)?"""
    scope = ctx.scope
    func, parent = scope.node, scope.parent
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or parent is None \
            or not isinstance(parent.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if not any(isinstance(s, ast.Return) and s.value is node for s in _bounded_walk(func, 2000)):
        return False
    statements = [s for s in _bounded_walk(parent.node, 4000)
                  if isinstance(s, (ast.Assign, ast.Expr, ast.Return, ast.AugAssign, ast.AnnAssign))]
    calls = [(stmt, c) for stmt in statements for c in _bounded_walk(stmt, 400)
             if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == func.name]
    return bool(calls) and all(_reaches_only_nan_skipping(stmt, call, statements) for stmt, call in calls)


def _skipped_ids(stmt: ast.AST) -> set[int]:
    return {id(n) for c in _bounded_walk(stmt, 400)
            if isinstance(c, ast.Call) and callee_name(c.func) in _NAN_SKIPPING
            for a in c.args for n in _bounded_walk(a, 200)}


def _reaches_only_nan_skipping(stmt: ast.AST, call: ast.Call, statements: list) -> bool:
    if id(call) in _skipped_ids(stmt):
        return True
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    uses = [(s, n) for s in statements if s.lineno > stmt.lineno for n in _bounded_walk(s, 400)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(id(n) in _skipped_ids(s) for s, n in uses)


def repaired_after_a_nan_test(ctx: Analysis, node: ast.AST) -> bool:
    """Is the value `node` assigned to a name that the code later tests with isnan/isfinite and
    then rewrites (torch-rechub's DIEN: `attn = softmax(scores)`, `nan_rows = attn.isnan().any(1)`,
    `attn[nan_rows] = 1 / T`; or `attn = where(isnan(attn), 0, attn)`)? The code expects the
    fully masked rows and repairs them."""
    key = ctx.assigned_to.get(id(node))
    line = getattr(node, "lineno", 0)
    if key is None or "." in key:
        return False
    _, values = ctx.lookup(key)
    rewritten = key in ctx.scope.mutations or any(v is not None and v.lineno > line for v in values)
    return rewritten and any(
        isinstance(c, ast.Call) and c.lineno > line and callee_name(c.func) in NAN_TESTS
        and any(name_key(a) == key for a in [*c.args, getattr(c.func, "value", None)] if a is not None)
        for c in _bounded_walk(ctx.scope.node, 4000))
