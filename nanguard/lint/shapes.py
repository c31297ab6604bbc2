"""Shapes of a computation: squares, sums of squares, Gram expansions, tensor ops.

`sum_of_squares` and `gram_expansion` recognise a hand-written norm and the
|a|² + |b|² − 2a·b expansion of squared distances (the roots rules, NG301/NG302); like every
predicate here they err on the side of not matching.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import (
    additive_terms,
    bounded_walk,
    callee_name,
    const_value,
    last_identifier,
    mult_factors,
)


def square_base(ctx: Analysis, expr: ast.expr) -> ast.expr | None:
    """The x of `x ** 2`, `x * x`, `x.pow(2)`, `torch.square(x)`; None otherwise."""
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Pow) and const_value(expr.right) == 2:
            return expr.left
        if isinstance(expr.op, ast.Mult) and ast.dump(expr.left) == ast.dump(expr.right) \
                and const_value(expr.left) is None:
            return expr.left
        return None
    oc = ctx.op(expr)
    if oc is None:
        return None
    if oc.op == "square":
        return oc.input
    if oc.op == "pow" and const_value(oc.operand(1, "exponent", "y")) == 2:
        return oc.input
    return None


def squared_vectors(ctx: Analysis, expr: ast.expr) -> list[ast.expr]:
    """The x of each square in a sum of squares (`(x**2).sum(-1)` -> [x], `dx**2 + dy**2` -> [dx, dy])."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None and oc.op in ("sum", "mean") and oc.input is not None:
        base = square_base(ctx, strip_wrappers(ctx, ctx.resolve(oc.input)))
        return [base] if base is not None else []
    bases = [square_base(ctx, t) for _, t in additive_terms(e)]
    return [b for b in bases if b is not None]


def difference_of_points(ctx: Analysis, expr: ast.expr) -> bool:
    """`a - b` (through a name holding one): exactly the zero vector where a == b, which
    identical points, a pair of a sample with itself or a converged prediction give."""
    e = _held_difference(ctx, expr)
    if isinstance(e, ast.Name):
        return ctx.value_of(e) is None and _named_difference(e.id)  # a parameter `dx`, `delta`, `pos_diff`
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) \
        and const_value(e.left) is None and const_value(e.right) is None \
        and not _across_an_edge_list(ctx, e.left, e.right) and not _parameters_across_edges(ctx, e.left, e.right)


def difference_along_edges(ctx: Analysis, expr: ast.expr) -> bool:
    """`pos[i] - pos[j]` over the edges `i, j` of a graph (see `_across_an_edge_list`), also
    `source - target` of parameters bound so at every call in the module (EGNN's
    `self.edge_model(x[row], x[col], ...)`)."""
    e = _held_difference(ctx, expr)
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and (
        _across_an_edge_list(ctx, e.left, e.right) or _parameters_across_edges(ctx, e.left, e.right))


def _held_difference(ctx: Analysis, expr: ast.expr) -> ast.expr:
    """What `expr` holds through wrappers and names: a name assigned once, or the last value of one
    rebound after this use (`coord_diff = coord[row] - coord[col]`, later `coord_diff / norm`); a
    name with no value before (a parameter) as it is."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if isinstance(e, ast.Name) and ctx.value_of(e) is None:
        last = ctx.last_value(e)
        if last is not None:
            return strip_wrappers(ctx, last)
    return e


def _parameters_across_edges(ctx: Analysis, left: ast.expr, right: ast.expr) -> bool:
    fn = ctx.scope.node
    if not (isinstance(left, ast.Name) and isinstance(right, ast.Name)
            and ctx.parameter_scope(left) is ctx.scope and ctx.parameter_scope(right) is ctx.scope):
        return False
    calls = ctx.autodiff.calls_in_module(fn)
    saved = ctx.scope
    try:
        for call, caller in calls:
            bound = [ctx.autodiff.bound_argument(fn, call, p.id) for p in (left, right)]
            ctx.scope = ctx.scope_of.get(id(caller), ctx.module_scope) if caller is not None else ctx.module_scope
            if bound[0] is None or bound[1] is None or not _across_an_edge_list(ctx, bound[0], bound[1]):
                return False
    finally:
        ctx.scope = saved
    return bool(calls)


_SELECTIONS = frozenset({"gather", "index_select", "take"})
_SELF_LOOP_WORDS = ("self_loop", "selfloop")


def _selection(ctx: Analysis, expr: ast.expr) -> tuple[str, ast.expr] | None:
    """(the selected tensor, as dumped; the index) of `pos[i]`, `pos[edge_index[0]]`,
    `tf.gather(R, idx_i)`, `x.index_select(0, i)`, `jnp.take(x, i, axis=0)`."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if isinstance(e, ast.Subscript):
        index = e.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        if any(isinstance(p, ast.Constant) or const_value(p) is not None or _literal_list(p) for p in parts) \
                or all(isinstance(p, ast.Slice) for p in parts):
            return None  # `x[:, None]`, `x[:, [0]]`: a broadcast or fixed coordinates, not an edge list
        return ast.dump(e.value), index
    if isinstance(e, ast.Call) and callee_name(e.func) in _SELECTIONS and e.args:
        method = isinstance(e.func, ast.Attribute) and ctx.imports.qualname(e.func) is None
        base = e.func.value if method else e.args[0]  # type: ignore[attr-defined]
        rest = e.args if method else e.args[1:]
        return (ast.dump(base), rest[-1]) if rest else None
    return None


def _literal_list(expr: ast.expr) -> bool:
    return isinstance(expr, (ast.List, ast.Tuple)) and all(const_value(x) is not None for x in expr.elts)


def _across_an_edge_list(ctx: Analysis, left: ast.expr, right: ast.expr) -> bool:
    """`pos[i] - pos[j]` (`tf.gather(R, idx_i) - tf.gather(R, idx_j)`) with `i, j` index
    tensors: the difference along each edge of a graph, the zero vector only on an edge from a
    node to itself. Whether the graph has such self-loops is the data's (a radius graph has
    none); where the function adds them (`add_self_loops`, `loop=True`) or `i, j` run over the
    same range (every pair, the diagonal included) it is certain."""
    a, b = _selection(ctx, left), _selection(ctx, right)
    if a is None or b is None or a[0] != b[0] or ast.dump(a[1]) == ast.dump(b[1]):
        return False
    ranges = ctx.scope.range_bound
    if any(isinstance(i, ast.Name) and i.id in ranges for i in (a[1], b[1])):
        return False  # `for i in range(n): for j in range(n):` reaches i == j
    for node in bounded_walk(ctx.scope.node, 4000):
        if isinstance(node, ast.Call):
            if any(w in callee_name(node.func).lower() for w in _SELF_LOOP_WORDS):
                return False
            if any(k.arg in ("loop", "self_loops", "add_self_loops") and isinstance(k.value, ast.Constant)
                   and k.value.value is True for k in node.keywords):
                return False
    return True


# Whole words of a name that say "a difference of two points" (`dx`, `delta_pos`, `xy_diff`).
_DIFFERENCE_TOKENS = frozenset({"dx", "dy", "dz", "diff", "diffs", "delta", "deltas", "difference",
                                "differences", "displacement"})


def _named_difference(ident: str) -> bool:
    return any(t in _DIFFERENCE_TOKENS for t in re.split(r"[_\d]+", ident.lower()) if t)


def sum_of_squares(ctx: Analysis, expr: ast.expr) -> bool:
    """`(x**2).sum(-1)`, `torch.sum(x*x, 1)`, `tf.reduce_sum(tf.square(x))`, `dx**2 + dy**2`."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None and oc.op in ("sum", "mean") and oc.input is not None:
        inner = strip_wrappers(ctx, ctx.resolve(oc.input))
        return square_base(ctx, inner) is not None
    terms = additive_terms(e)
    return len(terms) >= 2 and all(s > 0 and square_base(ctx, t) is not None for s, t in terms)


def gram_expansion(ctx: Analysis, expr: ast.expr) -> bool:
    """`a2 + b2 - 2 * a @ b.T`, `x_sq - 2 * torch.mm(x, y.t()) + y_sq`, `addmm(..., alpha=-2)`."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None and oc.op == "addmm":
        alpha = oc.keyword("alpha")
        if alpha is not None:
            return const_value(alpha) == -2
        return any(const_value(a) == -2 for a in oc.node.args)
    terms = additive_terms(e)
    if len(terms) < 3:
        return False
    positives = [t for s, t in terms if s > 0 and const_value(t) is None]
    if len(positives) < 2:
        return False  # |a|² + |b|² - 2ab needs both squared norms
    for sign, term in terms:
        factors = mult_factors(term)
        if len(factors) < 2:
            continue
        coeff = 1.0
        symbolic: list[ast.expr] = []
        for f in factors:
            v = const_value(f)
            if v is None:
                symbolic.append(f)
            else:
                coeff *= v
        if symbolic and sign * coeff == -2 and _inner_product(ctx, term, symbolic):
            return True
    return False


_GRAM_WORDS = ("gram", "dot", "inner", "prod", "xy", "xtx", "ata", "cross", "sim", "mm")


def _inner_product(ctx: Analysis, term: ast.expr, symbolic: list[ast.expr]) -> bool:
    """Does the `2 * ...` term multiply two vectors (`a * b`, `a @ b.T`, `torch.mm`, `gram`)?"""
    if len(symbolic) >= 2:
        return True
    for node in bounded_walk(term, 40):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
    only = strip_wrappers(ctx, symbolic[0])
    for candidate in (only, ctx.value_of(only)):
        if candidate is None:
            continue
        oc = ctx.op(candidate)
        if oc is not None and oc.op in ("matmul", "addmm"):
            return True
        if isinstance(candidate, ast.BinOp) and isinstance(candidate.op, (ast.MatMult, ast.Mult)):
            return True
        ident = last_identifier(candidate)
        if ident is not None and any(w in ident.lower() for w in _GRAM_WORDS):
            return True
    return False


def has_tensor_op(ctx: Analysis, expr: ast.expr) -> bool:
    """Evidence that `expr` is a tensor computation: a recognised torch/tf op or tensor method
    in it, or in the value of a name it uses (Python floats have neither)."""
    for node in bounded_walk(expr, 120):
        if isinstance(node, ast.Call) and ctx.op(node) is not None:
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            value = ctx.value_of(node)
            if value is not None:
                for inner in bounded_walk(value, 60):
                    if isinstance(inner, ast.Call) and ctx.op(inner) is not None:
                        return True
    return False


_PY_NUMBER_CALLS = frozenset({"int", "float", "len", "round", "abs"})


def python_number(ctx: Analysis, expr: ast.expr, depth: int = 4, _open: frozenset[str] = frozenset()) -> bool:
    """A Python number, not a tensor: `t.item()`, `int(...)`, `float(...)`, `len(...)`, a literal,
    `min`/`max` of those, an arithmetic of those, a parameter annotated `int` or `float`, or a name
    last assigned one (`end_frame = min(end_frame, total - 1)` of an `end_frame: int`). Dividing
    two of them by 0 raises ZeroDivisionError: loud, never a NaN."""
    e = expr
    if const_value(e) is not None:
        return True
    if isinstance(e, ast.BinOp):
        return python_number(ctx, e.left, depth, _open) and python_number(ctx, e.right, depth, _open)
    if isinstance(e, ast.UnaryOp):
        return python_number(ctx, e.operand, depth, _open)
    if isinstance(e, ast.Call):
        func = e.func
        if isinstance(func, ast.Attribute) and func.attr == "item" and not e.args:
            return True
        if isinstance(func, ast.Attribute) and func.attr in ("size", "dim", "numel", "nelement") \
                and ctx.imports.qualname(func) is None:
            return True  # `x.size(1)`, `x.numel()`: Python ints
        if ((ctx.imports.qualname(func) or "").startswith("math.") or isinstance(func, ast.Name) and func.id in (
                "min", "max") and func.id not in ctx.imports.aliases) and e.args and not e.keywords:
            return all(python_number(ctx, a, depth, _open) for a in e.args)  # `math.sqrt(d_k)`, `min(n, k)`
        return isinstance(func, ast.Name) and func.id in _PY_NUMBER_CALLS and func.id not in ctx.imports.aliases
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
        return True  # `x.shape[1]`
    key = name_key(e)
    if key is not None and key in _open:
        # `start_frame = max(0, start_frame)`: the value before this one decides, the parameter's
        return isinstance(e, ast.Name) and _annotated_number(ctx, e.id)
    if depth > 0 and key is not None:
        value = ctx.last_value(e)
        if value is None and isinstance(e, ast.Name):
            return _unpacked_from_shape(ctx, e.id) or _annotated_number(ctx, e.id)
        return value is not None and python_number(ctx, value, depth - 1, _open | {key})
    return False


def python_accumulator(ctx: Analysis, expr: ast.expr) -> bool:
    """`n = 0` ... `n += len(t)`: a name only ever bound to Python numbers and grown by them."""
    if not isinstance(expr, ast.Name):
        return False
    scope, values = ctx.lookup(expr.id)
    known = [v for v in values or [] if v is not None]
    if scope is None or not known or not all(python_number(ctx, v, 0) for v in known):
        return False
    grown = [n.value for n in scope.augmented.get(expr.id, ())]
    return len(known) + len(grown) == len(values) and all(python_number(ctx, g, 1) for g in grown)


def _annotated_number(ctx: Analysis, name: str) -> bool:
    """A parameter annotated `int` or `float` (`end_frame: int`)."""
    scope, _ = ctx.lookup(name)
    fn = scope.node if scope is not None else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = fn.args
    arg = next((a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg == name), None)
    return arg is not None and isinstance(arg.annotation, ast.Name) and arg.annotation.id in ("int", "float")


def _unpacked_from_shape(ctx: Analysis, name: str) -> bool:
    """`n, c, h, w = video.shape`: every binding of `name` is an entry of a shape (an int)."""
    scope, values = ctx.lookup(name)
    if scope is None or any(v is not None for v in values):
        return False
    kinds = scope.tuple_bound.get(name, [])
    return bool(kinds) and all(k is not None for k in kinds) and len(kinds) == len(values)


# Calls that turn a number into an array or another number type (`jnp.array(x.size, jnp.float32)`).
NUMBER_WRAPPERS = frozenset({"array", "asarray", "tensor", "as_tensor", "cast", "float", "float32"})
# ... and those that carry the numbers of a shape through unchanged (`torch.Tensor(list(x.shape))`).
_SHAPE_WRAPPERS = NUMBER_WRAPPERS | {"list", "tuple", "Tensor", "FloatTensor"}


def shape_owner(expr: ast.expr) -> ast.expr | None:
    """The tensor of `x.shape`, `x.shape[1:]`, `list(x.shape)`, `torch.Tensor(list(x.shape))`."""
    while isinstance(expr, ast.Call) and len(expr.args) == 1 \
            and callee_name(expr.func) in _SHAPE_WRAPPERS:
        expr = expr.args[0]
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        expr = expr.value
    return expr.value if isinstance(expr, ast.Attribute) and expr.attr == "shape" else None


def unpacked_shape_of(ctx: Analysis, name: str) -> ast.expr | None:
    """The one tensor whose shape every binding of `name` unpacks (`n, c = x.shape`), else None."""
    scope, values = ctx.lookup(name)
    if scope is None or not values or any(v is not None for v in values):
        return None
    owners = scope.tuple_bound.get(name, [])
    if len(owners) != len(values) or any(o is None for o in owners):
        return None
    spelled = {ast.dump(o) for o in owners if o is not None}
    return owners[0] if len(spelled) == 1 else None
