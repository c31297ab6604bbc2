"""Syntax helpers every rule shares: numeric constants, eps and infinity literals, the terms
of a sum and the factors of a product, bounded walks, and short renderings for messages.

They read the AST alone (no scopes, no imports): `nanguard.lint.patterns` and the rules
build on them.
"""

from __future__ import annotations

import ast
import re
from typing import Callable

_MAX_DEPTH = 40


def const_value(expr: ast.AST | None,
                leaf: Callable[[ast.AST], float | None] | None = None) -> float | None:
    """The value of a numeric literal expression (`2`, `-0.5`, `1/3`, `1e-10`), else None.

    `leaf`, when given, values the operands that are not literals (a name bound to a number,
    `math.pi`); arithmetic over them is evaluated the same way."""
    if expr is None:
        return None
    if isinstance(expr, ast.Constant):
        v = expr.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        try:
            return float(v)
        except OverflowError:  # an int beyond float range (e.g. 10**400 written out)
            return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        v = const_value(expr.operand, leaf)
        if v is None:
            return None
        return -v if isinstance(expr.op, ast.USub) else v
    if isinstance(expr, ast.BinOp):
        a, b = const_value(expr.left, leaf), const_value(expr.right, leaf)
        if a is None or b is None:
            return None
        try:
            if isinstance(expr.op, ast.Add):
                return a + b
            if isinstance(expr.op, ast.Sub):
                return a - b
            if isinstance(expr.op, ast.Mult):
                return a * b
            if isinstance(expr.op, ast.Div):
                return a / b
            if isinstance(expr.op, ast.Pow) and abs(b) < 64:
                return float(a ** b)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError):
            return None
    return leaf(expr) if leaf is not None else None


_EPS_WORD = re.compile(r"(^|_)(eps|epsilon|tiny|min_value|clamp_min|min_val)(_|$)|eps$|^eps", re.IGNORECASE)


def last_identifier(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


# Calls that test for NaN or inf (torch, NumPy, JAX, TensorFlow spellings): bool results.
NAN_TESTS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf", "is_nan", "is_inf", "is_finite"})


def spelled_out_call(node: ast.AST) -> bool:
    """A call written in full where it is used: with arguments (`torch.sum(m, 0)`) or a method of
    an expression (`(gt == i).sum()`), not `m.sum()` of a name that may hold another value by then."""
    return isinstance(node, ast.Call) and (bool(node.args) or isinstance(node.func, ast.Attribute)
                                           and not isinstance(node.func.value, ast.Name))


def callee_name(func: ast.AST) -> str:
    """The last identifier of a called expression (`torch.cumsum` -> 'cumsum'), or ''."""
    return last_identifier(func) or ""


def is_eps_like(expr: ast.AST | None) -> bool:
    """A small positive constant by name: `eps`, `self.eps`, `torch.finfo(t).tiny`, `K.epsilon()`."""
    if expr is None:
        return False
    if isinstance(expr, ast.Call) and not expr.args:
        expr = expr.func  # `K.epsilon()`
    ident = last_identifier(expr)
    return ident is not None and bool(_EPS_WORD.search(ident))


def is_positive_const(expr: ast.AST | None) -> bool:
    v = const_value(expr)
    if v is not None:
        return v > 0
    return is_eps_like(expr)


def _is_inf_literal(expr: ast.AST) -> int | None:
    """+1 / -1 for an infinity literal (`float('-inf')`, `math.inf`, `-np.inf`, `-torch.inf`)."""
    sign = 1
    while isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        if isinstance(expr.op, ast.USub):
            sign = -sign
        expr = expr.operand
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "float" \
            and len(expr.args) == 1 and isinstance(expr.args[0], ast.Constant) \
            and isinstance(expr.args[0].value, str):
        text = expr.args[0].value.strip().lower()
        if text.lstrip("+-") in ("inf", "infinity"):
            return -sign if text.startswith("-") else sign
        return None
    if isinstance(expr, ast.Attribute) and expr.attr in ("inf", "Inf", "infty", "PINF") \
            and isinstance(expr.value, ast.Name) and expr.value.id in ("math", "np", "numpy", "torch", "jnp"):
        return sign
    if isinstance(expr, ast.Attribute) and expr.attr == "NINF" and isinstance(expr.value, ast.Name):
        return -sign
    return None


def is_neg_inf(expr: ast.AST | None) -> bool:
    return expr is not None and _is_inf_literal(expr) == -1


def is_pos_inf(expr: ast.AST | None) -> bool:
    return expr is not None and _is_inf_literal(expr) == 1


def additive_terms(expr: ast.expr) -> list[tuple[int, ast.expr]]:
    """`a + b - 2*c` -> [(+1, a), (+1, b), (-1, 2*c)]; a single term otherwise."""
    out: list[tuple[int, ast.expr]] = []
    stack: list[tuple[int, ast.expr]] = [(1, expr)]
    while stack and len(out) < 64:
        sign, e = stack.pop()
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            stack.append((sign if isinstance(e.op, ast.Add) else -sign, e.right))
            stack.append((sign, e.left))
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and const_value(e) is None:
            stack.append((-sign, e.operand))
        else:
            out.append((sign, e))
    return out


def mult_factors(expr: ast.expr, ops: tuple = (ast.Mult, ast.MatMult)) -> list[ast.expr]:
    """`2 * a @ b.T` -> [2, a, b.T] (products and matrix products flattened; `ops` says which)."""
    out: list[ast.expr] = []
    stack = [expr]
    while stack and len(out) < 64:
        e = stack.pop()
        if isinstance(e, ast.BinOp) and isinstance(e.op, ops):
            stack.append(e.right)
            stack.append(e.left)
        else:
            out.append(e)
    return out


def parameter_default(fn: ast.AST, name: str) -> ast.expr | None:
    """The default value of parameter `name` of function `fn` (`timescale=1000` -> 1000), else None."""
    args = getattr(fn, "args", None)
    if args is None:
        return None
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return next((d for a, d in pairs if a.arg == name), None)


def _bounded_walk(expr: ast.AST, limit: int) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = [expr]
    while stack and len(out) < limit:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def bounded_walk(expr: ast.AST, limit: int = 200) -> list[ast.AST]:
    """Nodes of `expr` (pre-order, not entering lambdas), at most `limit` of them."""
    return _bounded_walk(expr, limit)


def describe(node: ast.AST, limit: int = 48) -> str:
    """A short source-like rendering for messages: `torch.log(F.softmax(...))`."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001  # pragma: no cover - ast.unparse handles every parsed node
        return "expression"
    text = " ".join(text.split())
    if len(text) > limit:
        if isinstance(node, ast.Call):
            head = describe(node.func, limit)
            return f"{head}(...)"
        return text[: limit - 3] + "..."
    return text
