"""What a where condition compares (NG501's second half): which values it discards.

`condition_names` reads a condition into `Test`s (``x > 0``, ``~(x == 0)``,
``isinf(exp)``); `discards` says whether a singular point (0, ±1, +inf) falls in the region
the where throws away.
"""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.dataflow import names_in, tagged_names
from nanguard.lint.patterns import local_constant
from nanguard.lint.rules.where_singular import prior_values
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import additive_terms, callee_name, const_value, is_eps_like, is_neg_inf, is_pos_inf


def _literal(ctx: Analysis, expr: ast.expr) -> bool:
    if const_value(expr) is not None or is_eps_like(expr) or is_neg_inf(expr) or is_pos_inf(expr):
        return True
    if isinstance(expr, (ast.Name, ast.Call)) and local_constant(ctx, expr) is not None:
        return True  # `eps_cut`, `np.log(2)`: a number by its binding or its constant argument
    oc = ctx.op(expr)
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and oc is None \
        and expr.func.attr in ("tensor", "as_tensor", "zeros_like", "ones_like", "full_like") \
        and all(const_value(a) is not None for a in expr.args[1:] if expr.func.attr == "full_like")


_FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}


_AST_OPS = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}


_CALL_OPS = {"gt": "gt", "greater": "gt", "ge": "ge", "greater_equal": "ge", "lt": "lt", "less": "lt",
             "le": "le", "less_equal": "le", "eq": "eq", "equal": "eq", "ne": "ne", "not_equal": "ne"}


_FINITE_OPS = {"isinf": True, "is_inf": True, "isposinf": True, "isfinite": False, "is_finite": False,
               "isnan": False, "is_nan": False, "isneginf": False}


class Test:
    """One comparison in a condition: `subject op value` (value None: a finite unknown such as
    a threshold variable), possibly negated by `~`/`not`/`logical_not`."""

    __slots__ = ("names", "negated", "op", "value")

    def __init__(self, names: set[str], op: str, value: float | None, negated: bool) -> None:
        self.names, self.op, self.value, self.negated = names, op, value, negated

    def at(self, point: float) -> bool | None:
        """The test's truth value when its subject equals `point` (None: cannot tell)."""
        v = self.value
        if v is None:
            if abs(point) != float("inf"):
                return None
            v = 0.0  # any finite threshold compares like 0 against ±inf
        result = {"gt": point > v, "ge": point >= v, "lt": point < v, "le": point <= v,
                  "eq": point == v, "ne": point != v}[self.op]
        return result != self.negated


class Condition:
    """The comparisons a where/masked_fill condition makes, by variable name.

    Only the compared expressions' own names count (a condition `accept` built from
    `c = k * (r - f)` tests `c`, not `r`); a condition that is a name is read through its
    assignment. `finite` maps names tested with isinf/isnan/isfinite to the test's value for
    an infinite subject.
    """

    __slots__ = ("finite", "tests")

    def __init__(self) -> None:
        self.tests: list[Test] = []
        self.finite: dict[str, tuple[bool, bool]] = {}


def _direct_names(ctx: Analysis, expr: ast.expr) -> set[str]:
    return tagged_names(ctx, expr, expand=False)


def condition_names(ctx: Analysis, cond: ast.expr, depth: int = 1, negated: bool = False,
                    out: Condition | None = None) -> Condition:
    out = out if out is not None else Condition()
    stack: list[tuple[ast.AST, bool]] = [(cond, negated)]
    seen = 0
    while stack and seen < 150:
        node, neg = stack.pop()
        seen += 1
        pairs: list[tuple[ast.expr, str, ast.expr]] = []
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
            stack.append((node.operand, not neg))
            continue
        if isinstance(node, ast.Compare):
            operands = [node.left] + list(node.comparators)
            pairs = [(operands[i], _AST_OPS.get(type(op), ""), operands[i + 1])
                     for i, op in enumerate(node.ops)]
        elif isinstance(node, ast.Call):
            oc = ctx.op(node)
            name = oc.qualname.rsplit(".", 1)[-1] if oc is not None and oc.qualname else (
                node.func.attr if isinstance(node.func, ast.Attribute) else "")
            if oc is not None and oc.op == "isfinite" and oc.input is not None:
                for n in _direct_names(ctx, oc.input):
                    out.finite[n] = (_FINITE_OPS.get(name, False), neg)
                continue
            if oc is not None and oc.op == "compare":
                if name == "logical_not" and oc.positional:
                    stack.append((oc.positional[0], not neg))
                    continue
                pos = list(oc.positional) + [k.value for k in node.keywords if k.arg in ("other", "y")]
                if name in _CALL_OPS and len(pos) == 2:
                    pairs = [(pos[0], _CALL_OPS[name], pos[1])]
        elif isinstance(node, (ast.Name, ast.Attribute)) and name_key(node) is not None:
            if depth > 0:
                for value in prior_values(ctx, node, cond):
                    condition_names(ctx, value, depth - 1, neg, out)
            continue
        for left, op, right in pairs:
            if not op:
                continue
            for subject, literal, o in ((left, right, op), (right, left, _FLIP[op])):
                if _literal(ctx, subject):
                    continue
                names = _direct_names(ctx, subject)
                if not names:
                    continue
                value = local_constant(ctx, literal) if _literal(ctx, literal) else None
                if value is None and is_eps_like(literal):
                    value = 1e-30  # `x.abs() < eps`: a tiny positive threshold
                out.tests.append(Test(names, o, value, neg))
        if not pairs:
            stack.extend((child, neg) for child in ast.iter_child_nodes(node))
    return out


def sign(ctx: Analysis, expr: ast.expr) -> float:
    """-1 when `expr` is visibly a negation of its variables (`-x`, `-2 * x`, `x.neg()`,
    `torch.neg(x)`, `-dr / decay`, `-1.0 * p * (r - 1)`), else +1."""
    direction = 1.0
    while True:
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            if isinstance(expr.op, ast.USub):
                direction = -direction
            expr = expr.operand
        elif isinstance(expr, ast.Call) and callee_name(expr.func) in ("neg", "negative") and (
                expr.args or isinstance(expr.func, ast.Attribute)):
            direction = -direction
            expr = expr.args[0] if expr.args else expr.func.value  # type: ignore[attr-defined]
        else:
            break
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        if isinstance(expr.op, ast.Div) and names_in(ctx, expr.left, expand=False) & names_in(ctx, expr.right, expand=False):
            # `-(d ** 2) / ((1 - d) * (1 + d))`: the variable's sign in the divisor decides, not the
            # numerator's negation (SpookyNet's envelope overflows as d -> 1 from above)
            return direction * _constant_sign(expr)
        for side in (expr.left, expr.right):
            v = const_value(side)
            direction *= (-1.0 if v < 0 else 1.0) if v is not None else sign(ctx, side)  # `-dr / decay`
    return direction


def _constant_sign(expr: ast.BinOp) -> float:
    """The sign of the negative numbers among the factors of a product or ratio."""
    negative = [const_value(side) for side in (expr.left, expr.right)]
    return -1.0 if sum(1 for v in negative if v is not None and v < 0) % 2 else 1.0


def discards(cond: Condition, names: set[str], points: tuple[float, ...], kept_when_true: bool,
             terms: list[set[str]] | None = None) -> bool:
    """Does some comparison of `names` put one of `points` in the region the where discards?

    `terms` are the tagged names of each additive term of the singular input (`a1 + a2 - inter`
    -> [{a1}, {a2}, {inter}]): at a finite point the input equals that point only when every
    term moves with the compared variable; `inter == 0` says nothing about `a1 + a2 - inter`
    being 0 (an IoU's union)."""
    for test in cond.tests:
        if not test.names & names:
            continue
        for point in points:
            if terms and abs(point) != float("inf") and any(t and not t & test.names for t in terms):
                continue
            truth = test.at(point)
            if truth is not None and truth != kept_when_true:
                return True
    return False


def additive_names(ctx: Analysis, expr: ast.expr) -> list[set[str]]:
    """Tagged names of each non-constant additive term of `expr`, or of the value of the name it
    is (one assignment deep); [] when it is a single term."""
    e = expr
    if name_key(e) is not None:
        value = ctx.value_of(e)
        if value is not None:
            e = value
    terms = [t for _, t in additive_terms(e) if const_value(t) is None]
    if len(terms) < 2:
        return []
    return [tagged_names(ctx, t) for t in terms]
