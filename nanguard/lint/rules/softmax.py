"""Softmax written as `exp(x) / exp(x).sum()` without subtracting the maximum (NG901)."""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.signs import nonpositive_by_construction
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, last_identifier

NAIVE_SOFTMAX = Rule(
    code="NG901",
    name="hand-written-softmax",
    summary="`exp(x) / exp(x).sum(dim)` without subtracting max(x)",
    hazard=VALUE,
    hazards=("softmax_overflow",),
    explanation="""\
    e = torch.exp(scores)
    p = e / e.sum(dim=-1, keepdim=True)
->  p = torch.softmax(scores, dim=-1)          # nanguard.softmax(scores, -1, mask=m) with a mask

Not reported when the exponent has the maximum subtracted (`x - x.max(-1, keepdim=True)
.values`, `x - m`), or is otherwise bounded above.""",
)

RULES = [NAIVE_SOFTMAX]


def _exp_of(ctx: Analysis, expr: ast.expr) -> OpCall | None:
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    return oc if oc is not None and oc.op == "exp" else None


@checks("NG901")
def check_naive_softmax(ctx: Analysis, node) -> None:
    if isinstance(node, ast.BinOp):
        left, right = node.left, node.right
    elif isinstance(node, ast.AugAssign) and name_key(node.target) is not None:
        left, right = node.target, node.value  # `e /= e.sum(-1, keepdim=True)`
    else:
        return
    numerator = _exp_of(ctx, left)
    if numerator is None and isinstance(node, ast.AugAssign):
        # `e = exp(x); e /= ...` binds `e` twice; the value divided is the last one before.
        _, values = ctx.lookup(name_key(left))  # type: ignore[arg-type]
        prior = [v for v in values if v is not None and v.lineno < node.lineno]
        numerator = _exp_of(ctx, prior[-1]) if prior else None
    if numerator is None or numerator.input is None:
        return
    den = strip_wrappers(ctx, ctx.resolve(right))
    total = ctx.op(den)
    if total is None or total.op != "sum" or total.input is None:
        return
    inner = strip_wrappers(ctx, total.input)
    same_name = name_key(inner) is not None and name_key(inner) == name_key(left)
    if not same_name:
        denominator_exp = _exp_of(ctx, inner)
        if denominator_exp is None or denominator_exp.input is None:
            return
        if ast.dump(denominator_exp.input) != ast.dump(numerator.input):
            return
    if nonpositive_by_construction(ctx, numerator.input) or _grid(ctx, numerator.input):
        return
    if isinstance(node, ast.AugAssign) and _normalised_before(ctx, node, numerator):
        return  # `Q /= Q.sum(); Q /= Q.sum(1)` (Sinkhorn): only the first division can meet an inf
    ctx.report(NAIVE_SOFTMAX, node, "softmax by hand without subtracting the max", "softmax_overflow")


def _grid(ctx: Analysis, expr: ast.expr) -> bool:
    """`exp(linspace(-eta, 0, n))`: fixed weights over a grid, not data."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    return isinstance(e, ast.Call) and last_identifier(e.func) in ("linspace", "arange", "logspace")


def _normalised_before(ctx: Analysis, node: ast.AugAssign, exp: OpCall) -> bool:
    """Was the name already divided in place between its exp and `node`?"""
    key = name_key(node.target)
    start = exp.node.lineno
    return any(isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and name_key(n.target) == key
               and start <= n.lineno < node.lineno for n in bounded_walk(ctx.scope.node, 4000))


ON_DIVISION = [check_naive_softmax]
