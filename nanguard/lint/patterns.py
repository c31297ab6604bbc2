"""Wrappers and sources: what a value is once dtype, device and shape changes are looked through.

`strip_wrappers` sees the mask in `m.float().unsqueeze(-1)`, `source_of` follows the names that
hold it, `selected_from` the tensor whose entries a gather picks; `local_constant` reads numbers
computed from literals. Each errs on the side of *not* matching. Whether a value is kept away
from zero is in `nanguard.lint.positive`, shapes of the computation (squares, Gram expansions)
in `nanguard.lint.shapes`, what names say (counts, masks, probabilities) in
`nanguard.lint.naming`, signs and upper bounds in `nanguard.lint.signs`, the names a value
depends on in `nanguard.lint.dataflow`.
"""

from __future__ import annotations

import ast
import math

from nanguard.lint.analysis import Analysis
from nanguard.lint.names import WRAPPER_METHODS
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import (
    _MAX_DEPTH,
    callee_name,
    const_value,
)


def strip_wrappers(ctx: Analysis, expr: ast.expr) -> ast.expr:
    """Look through dtype/device/shape changes: `m.float().unsqueeze(-1)`, `tf.cast(m, f32)`, `m[:, None]`."""
    for _ in range(_MAX_DEPTH):
        if isinstance(expr, ast.Call):
            func = expr.func
            oc = ctx.op(expr)
            if oc is not None and oc.op in ("cast", "reshape") and not oc.method and expr.args:
                expr = expr.args[0]
                continue
            copied = ctx.imports.qualname(func) in ("copy.deepcopy", "copy.copy") and len(expr.args) == 1
            if copied or isinstance(func, ast.Attribute) and func.attr in WRAPPER_METHODS and ctx.imports.qualname(func) is None:
                expr = expr.args[0] if copied else func.value  # `copy.deepcopy(mask)` is the mask too
                continue
        elif isinstance(expr, ast.Subscript) and _broadcast_index(expr.slice):
            expr = expr.value
            continue
        break
    return expr


def held_at(ctx: Analysis, expr: ast.expr) -> ast.expr:
    """What the name `expr` holds here: its one value, or the last one assigned before (as guards
    read names, erring towards silence); anything else as it is."""
    if isinstance(expr, ast.Name):
        value = ctx.value_of(expr) or ctx.last_value(expr)
        if value is not None:
            return value
    return expr


def source_of(ctx: Analysis, expr: ast.expr, depth: int = 4) -> ast.expr:
    """`expr` through wrappers and the names holding it (`mask = arange(T).unsqueeze(-1)`: the arange)."""
    for _ in range(depth):
        inner = held_at(ctx, strip_wrappers(ctx, expr))
        if inner is expr:
            break
        expr = inner
    return expr


def positions_from_zero(ctx: Analysis, expr: ast.expr) -> bool:
    """Positions 0..n-1: `arange(n)` or `arange(0, n)`, through wrappers, new axes and names
    (`idx[None, :]`; not `idx[1:]` or `arange(1, n + 1)`, which start at 1)."""
    src = source_of(ctx, expr)
    return isinstance(src, ast.Call) and callee_name(src.func) == "arange" and bool(src.args) \
        and (len(src.args) == 1 or const_value(src.args[0]) == 0)

# Methods that pick entries of a tensor without changing their values.
_SELECTING_METHODS = frozenset({"gather", "index_select", "take_along_dim", "take_along_axis", "select",
                                "masked_select", "diagonal", "diag", "narrow", "take"})


def selected_from(ctx: Analysis, expr: ast.expr) -> ast.expr:
    """The tensor whose entries `expr` picks (`p.gather(1, y)`, `torch.gather(p, 1, y)`,
    `p[range(n), y]`, `tf.gather(p, y)`), through dtype/shape changes, else `expr`: a log of
    the entries of a softmax is a log of a softmax."""
    for _ in range(_MAX_DEPTH):
        expr = strip_wrappers(ctx, expr)
        if isinstance(expr, ast.Subscript):
            expr = expr.value
            continue
        if isinstance(expr, ast.Call):
            func = expr.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _SELECTING_METHODS:
                module = isinstance(func, ast.Attribute) and ctx.imports.qualname(func) is not None
                if module and expr.args:
                    expr = expr.args[0]  # `torch.gather(p, 1, y)`
                    continue
                if isinstance(func, ast.Attribute) and not module:
                    expr = func.value  # `p.gather(1, y)`
                    continue
        break
    return expr


def _broadcast_index(index: ast.AST) -> bool:
    elts = index.elts if isinstance(index, ast.Tuple) else [index]
    for e in elts:
        if isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis):
            continue
        if isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
            continue
        return False
    return True


def tensor_literal(expr: ast.expr) -> ast.expr:
    """`torch.tensor(1e-8)` -> `1e-8`; anything else unchanged."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr in ("tensor", "constant", "as_tensor", "full_like") and expr.args:
        return expr.args[-1] if expr.func.attr == "full_like" else expr.args[0]
    return expr


_MATH = {"log": math.log, "log2": math.log2, "log10": math.log10, "exp": math.exp,
         "sqrt": math.sqrt}


def selection_bound(ctx: Analysis, x: ast.expr) -> tuple[ast.cmpop, float] | None:
    """`x[x > 0]`, or `x[t]` with `t = x < log(0.5)`: the entries of x picked by comparing x itself
    with a number; (the comparison, the number), else None."""
    if not isinstance(x, ast.Subscript):
        return None
    cond = ctx.value_of(x.slice) if isinstance(x.slice, ast.Name) else x.slice
    if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and ast.dump(cond.left) == ast.dump(x.value)):
        return None
    bound = local_constant(ctx, cond.comparators[0])
    return (cond.ops[0], bound) if bound is not None else None


def local_constant(ctx: Analysis, expr: ast.expr, depth: int = 3) -> float | None:
    """The value of a number computed from literals, `math.pi`/`math.log(...)` and local
    names bound once to such numbers (`min_log_mel = min_log_hz / linear_step`); else None."""

    def leaf(e: ast.AST) -> float | None:
        if depth <= 0:
            return None
        if isinstance(e, ast.Name):
            _, values = ctx.lookup(e.id)
            if len(values) == 1 and values[0] is not None:
                return local_constant(ctx, values[0], depth - 1)
            return None
        if isinstance(e, ast.Attribute) and e.attr in ("pi", "e") \
                and (name_key(e.value) == "math" or name_key(e.value) in ctx.imports.aliases):
            return getattr(math, e.attr)  # `math.pi`, `np.pi`, `jnp.e`
        if isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords:
            # `math.sqrt(3)`, `np.sqrt(5)`: a framework's function of a number is a number
            fn = e.func.attr if isinstance(e.func, ast.Attribute) and name_key(e.func.value) == "math" else \
                getattr(ctx.op(e), "op", None)
            if fn not in _MATH:
                return None
            a = local_constant(ctx, e.args[0], depth - 1)
            try:
                return None if a is None else _MATH[fn](a)
            except (ArithmeticError, ValueError):
                return None
        return None

    return const_value(expr, leaf)
