"""The singular ops a where branch evaluates everywhere (NG501's first half).

`singulars` finds, in a branch of `where`/`masked_fill`, the ops whose derivative is
infinite somewhere (log, sqrt, 1/x at 0; acos at ±1; exp overflowing), looking one
assignment deep and into local lambdas; `has_inner_guard` tells an input already made safe.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nanguard.lint.analysis import Analysis
from nanguard.lint.grad_reach import _NO_GRAD_FACTORIES
from nanguard.lint.blocks import dominates
from nanguard.lint.dataflow import tagged_names
from nanguard.lint.positive import guarded_positive
from nanguard.lint.shapes import python_number
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, const_value

_SINGULAR = {"log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt", "rsqrt": "rsqrt",
             "reciprocal": "reciprocal", "acos": "acos", "asin": "asin", "atanh": "atanh"}


_GUARDS = ("where", "masked_fill", "nan_to_num")


class Singular:
    """A singular op met in a branch: its input, extra names the input stands for (lambda
    arguments), and `via`, the branch variable it was reached through (`exp` in
    `exp = x.exp(); where(isinf(exp), x, exp.log1p())`)."""

    __slots__ = ("extra_names", "input", "label", "node", "via")

    def __init__(self, label: str, node: ast.AST, input_: ast.expr | None, extra_names: frozenset = frozenset()):
        self.label = label
        self.node = node
        self.input = input_
        self.extra_names = extra_names
        self.via: str | None = None


def _classify(ctx: Analysis, node: ast.AST) -> Singular | None:
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Div) and const_value(node.right) is None \
                and not python_number(ctx, node.right):
            # A Python number (`scores / math.sqrt(d_k)`) divides every entry alike: its
            # derivative is not infinite at the entries a where discards and finite elsewhere.
            return Singular("division", node, node.right)
        if isinstance(node.op, ast.Pow):
            p = const_value(node.right)
            if p is not None and (p < 0 or 0 < p < 1):
                return Singular(f"** {p:g}", node, node.left)
        return None
    oc = ctx.op(node)
    if oc is None:
        return None
    if oc.op in _SINGULAR:
        return Singular(_SINGULAR[oc.op], node, oc.input)
    if oc.op == "pow":
        p = const_value(oc.operand(1, "exponent", "y"))
        if p is not None and (p < 0 or 0 < p < 1):
            return Singular(f"pow(x, {p:g})", node, oc.input)
    if oc.op == "div" and oc.keyword("rounding_mode") is None:
        den = oc.operand(1, "other", "y")
        if den is not None and const_value(den) is None:
            return Singular("division", node, den)
    if oc.op in ("exp", "expm1"):
        return Singular("exp", node, oc.input)  # both overflow for inputs above ~88 (float32)
    if oc.op == "log1p" and isinstance(oc.input, ast.UnaryOp) and isinstance(oc.input.op, ast.USub):
        # log1p(-p) is log(1 - p): infinite derivative at p = 1 (a probability's binary cross-entropy);
        # log1p(-exp(z)) (log1mexp's second form) at z = 0, and wherever exp(z) rounds to 1
        # (|z| < 6e-8 in float32), where log(-expm1(z)) is still finite.
        inner = ctx.op(oc.input.operand)
        if inner is not None and inner.op == "exp" and inner.input is not None:
            return Singular("log1p", node, inner.input)
        if inner is None or inner.op != "expm1":
            return Singular("log1p(-x)", node, oc.input.operand)
    return None


def singulars(ctx: Analysis, branch: ast.expr) -> Iterator[Singular]:
    """Singular ops evaluated when `branch` is, looking one assignment deep and into local lambdas."""
    stack: list[tuple[ast.AST, str | None]] = [(branch, None)]
    seen = 0
    while stack and seen < 300:
        node, via = stack.pop()
        seen += 1
        if isinstance(node, (ast.Lambda, ast.Compare)):
            continue  # a comparison is a bool: no gradient flows back through it
        if isinstance(node, ast.Call):
            oc = ctx.op(node)
            if oc is not None and oc.op in _GUARDS:
                continue  # an inner where/masked_fill is a guard, not part of this hazard
            if oc is not None and oc.op in ("compare", "isfinite"):
                continue  # `tf.greater(x, b)`, `isnan(x)`: bools
            func = node.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _NO_GRAD_FACTORIES:
                continue  # `zeros_like(y)`: only y's shape and dtype are read, no gradient reaches y
            if oc is None and isinstance(node.func, ast.Name):
                for found in _lambdasingulars(ctx, node):
                    found.via = via
                    yield found
        found = _classify(ctx, node)
        if found is not None:
            found.via = via
            yield found
        key = name_key(node)
        if key is not None:
            if via is None:
                # Every value the name may hold here (`rhs = ...` in both arms of an if).
                stack.extend((v, key) for v in prior_values(ctx, node, branch))
            continue
        stack.extend((child, via) for child in ast.iter_child_nodes(node))


def _lambdasingulars(ctx: Analysis, call: ast.Call) -> Iterator[Singular]:
    """`f = lambda x: 1. / x; ... f(x)`: singular ops of the body, in terms of the call's arguments."""
    value = ctx.value_of(call.func)
    if not isinstance(value, ast.Lambda):
        return
    params = [a.arg for a in value.args.posonlyargs + value.args.args]
    binding: dict[str, ast.expr] = {p: a for p, a in zip(params, call.args)}
    for node in bounded_walk(value.body, 200):
        found = _classify(ctx, node)
        if found is None or found.input is None:
            continue
        used = {n.id for n in bounded_walk(found.input, 60) if isinstance(n, ast.Name)}
        args = [binding[p] for p in used if p in binding]
        if not args:
            continue
        if isinstance(found.input, ast.Name) and found.input.id in binding:
            found.input = binding[found.input.id]
            yield found
        else:
            extra = frozenset().union(*(tagged_names(ctx, a) for a in args))
            yield Singular(found.label, found.node, found.input, extra)


def prior_values(ctx: Analysis, name: ast.AST, at: ast.AST) -> list[ast.expr]:
    """Values assigned to `name` (a Name or `self.x`) before the line of `at` that can reach it:
    all of them, unless the last one is a plain statement of a block that `at` is in, further
    down (`d = a / n` then `d = where(n == 0, 0, d)`): that one overwrote the others."""
    key = name_key(name)
    if key is None:
        return []
    scope, values = ctx.lookup(key)
    line = at.lineno  # type: ignore[attr-defined]
    prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
    if len(prior) > 1 and scope is not None and dominates(ctx, scope.node, prior[-1].lineno, line):
        return prior[-1:]
    return prior


def has_inner_guard(ctx: Analysis, expr: ast.expr) -> bool:
    """The input already went through a guard: an inner where/masked_fill/nan_to_num, a
    positive clamp, or a name holding one (`safe_x = where(ok, x, 1)`) or called `safe*`."""
    for node in bounded_walk(expr, 150):
        if isinstance(node, ast.Call):
            oc = ctx.op(node)
            if oc is not None and (oc.op in _GUARDS or (
                    oc.op in ("clamp", "clamp_min", "maximum") and guarded_positive(ctx, node, 0))):
                return True
        key = name_key(node)
        if key is None:
            continue
        if "safe" in key.lower():
            return True
        _, values = ctx.lookup(key)
        for v in values:
            if v is None:
                continue
            oc = ctx.op(v)
            if oc is not None and (oc.op in _GUARDS or (
                    oc.op in ("clamp", "clamp_min", "maximum") and guarded_positive(ctx, v, 0))):
                return True
    return False


# f(0) = 0: a zero of the argument is a zero of the result (reductions and reshapes included).
_ZERO_PRESERVING = frozenset({
    "abs", "sum", "mean", "norm", "sqrt", "square", "relu", "sin", "tan", "tanh", "sinh", "asinh",
    "atan", "atanh", "asin", "expm1", "log1p", "neg", "negative", "cumsum", "matmul", "mul", "multiply",
    "reshape", "view", "squeeze", "unsqueeze", "expand_dims", "transpose", "permute", "flatten",
    "broadcast_to", "clone", "float", "astype", "cast", "to", "real", "conj", "max", "amax",
})
# f(0) != 0: the result stays away from 0 where the argument is 0.
_ZERO_LIFTING = frozenset({"exp", "cos", "cosh", "sigmoid", "softplus", "log", "erfc"})

ZERO, INDEPENDENT, UNKNOWN = "zero", "independent", "unknown"


def zero_tied(ctx: Analysis, expr: ast.AST, names: set[str], depth: int = 3) -> str:
    """Is `expr` 0 wherever the compared variables `names` are 0 (ZERO), is its own zero set
    unrelated to theirs (INDEPENDENT: `b + 2 * eig` with `b` free is `b` there, not 0), or
    can it not be told (UNKNOWN)? A where that discards `eig == 0` does not guard a division
    by `sum(1 / (b + 2 * eig) ** 3)`; it does guard one by `eig.norm()` or `eig * w`."""
    if depth < 0:
        return UNKNOWN
    v = const_value(expr)
    if v is not None:
        return ZERO if v == 0 else INDEPENDENT
    if isinstance(expr, ast.Attribute) and expr.attr in ("shape", "ndim", "dtype", "size"):
        return INDEPENDENT  # `eig.shape[0]`: a size, whatever the values
    if isinstance(expr, ast.Subscript):
        return zero_tied(ctx, expr.value, names, depth)  # an entry of x is 0 where x is
    key = name_key(expr)
    if key is not None:
        if not (tagged_names(ctx, expr, expand=False) - names) and tagged_names(ctx, expr, expand=False):
            return ZERO
        value = ctx.value_of(expr)
        if value is not None:
            return zero_tied(ctx, value, names, depth - 1)
        return INDEPENDENT if not (tagged_names(ctx, expr) & names) else UNKNOWN
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return zero_tied(ctx, expr.operand, names, depth)
    if isinstance(expr, ast.BinOp):
        a, b = zero_tied(ctx, expr.left, names, depth), zero_tied(ctx, expr.right, names, depth)
        if UNKNOWN in (a, b):
            return ZERO if isinstance(expr.op, ast.Mult) and ZERO in (a, b) else UNKNOWN
        if isinstance(expr.op, (ast.Add, ast.Sub)):
            if a == b == ZERO:
                return ZERO
            if const_value(expr.left) is not None or const_value(expr.right) is not None:
                return UNKNOWN  # `c - 1.` is 0 where `c > 1.` puts it: the test may compare with that offset
            return INDEPENDENT
        if isinstance(expr.op, (ast.Mult, ast.MatMult)):
            return ZERO if ZERO in (a, b) else INDEPENDENT
        if isinstance(expr.op, ast.Div):
            return a  # 0 / y is 0; x / 0 is inf, not 0
        if isinstance(expr.op, ast.Pow):
            p = const_value(expr.right)
            return a if p is not None and p > 0 and b == INDEPENDENT else (INDEPENDENT if a == b == INDEPENDENT
                                                                          else UNKNOWN)
        return UNKNOWN
    if not (tagged_names(ctx, expr) & names):
        return INDEPENDENT
    if isinstance(expr, ast.Call) and (getattr(expr.func, "attr", None) or getattr(expr.func, "id", None)) \
            in ("ones", "ones_like", "full", "full_like", "eye"):
        return INDEPENDENT  # `jnp.ones(shape, dtype=eig.dtype)`: a constant fill
    oc = ctx.op(expr)
    if oc is None or oc.input is None:
        return UNKNOWN
    a = zero_tied(ctx, oc.input, names, depth)
    if a == INDEPENDENT:
        others = [x for x in oc.positional[1:] if const_value(x) is None and name_key(x) is not None]
        return INDEPENDENT if all(zero_tied(ctx, x, names, depth) == INDEPENDENT for x in others) else UNKNOWN
    if a == ZERO:
        if oc.op in _ZERO_PRESERVING:
            return ZERO
        if oc.op in _ZERO_LIFTING:
            return INDEPENDENT
    return UNKNOWN
