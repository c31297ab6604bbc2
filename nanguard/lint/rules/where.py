"""`where` does not stop NaN gradients: the single-where trap (NG501).

`torch.where(c, f(x), g)` evaluates f on *every* element and backward multiplies the
upstream gradient (0 where c is False) by f'(x). Where f'(x) is inf (log, sqrt, 1/x at 0;
acos at ±1; exp overflowing) the product is 0 * inf = NaN. The cure is a second, inner
where that replaces x by a safe value before f sees it: the "double where".
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import GRADIENT, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import (
    bounded_walk,
    const_value,
    describe,
    guarded_positive,
    is_eps_like,
    is_neg_inf,
    is_pos_inf,
    names_in,
    nonpositive_by_construction,
)
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key

SINGLE_WHERE = Rule(
    code="NG501",
    name="where-with-singular-branch",
    summary="`where(cond, f(x), y)` with f singular where cond is False (log, sqrt, 1/x, pow, acos, exp)",
    hazard=GRADIENT,
    hazards=("where_gradient",),
    explanation="""\
The NaN lands in x.grad although every forward value is finite (the seed stories:
`tf.where(x_ok, 1. / x, 0)`, `x.where(torch.isinf(exp), exp.log1p())`).

    y = torch.where(x > 0, torch.log(x), torch.zeros_like(x))           # NaN grad at x == 0
->  safe_x = torch.where(x > 0, x, torch.ones_like(x))                   # inner where
    y = torch.where(x > 0, torch.log(safe_x), torch.zeros_like(x))
    # or: y = nanguard.safe_where(x > 0, torch.log, x, other=0.0, safe=1.0)

Singular functions: log, log2, log10, sqrt, rsqrt, reciprocal, division by a variable,
pow with a negative or fractional (0 < p < 1) exponent, acos/asin/atanh, and exp/expm1
(overflow). Reported only when the condition compares the singular input's variable with a
constant (or tests the exp's result for inf) such that the singular point, 0, ±1 or +inf,
falls in the region the where discards: `where(x > 0, log(x), 0)` and `where(x == 0, 1,
sin(x) / x)` are reported, `where(x != 0, exp(x), 0)` is not. Not reported when the input
is itself guarded (an inner where, a positive clamp, `+ eps`, a name like `safe_x`).
Lambdas assigned to a local name are looked into, as in the seed story.
A gradient hazard: not reported inside `torch.no_grad()`.""",
)

RULES = [SINGLE_WHERE]

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
        if isinstance(node.op, ast.Div) and const_value(node.right) is None:
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
    return None


def _singulars(ctx: Analysis, branch: ast.expr) -> Iterator[Singular]:
    """Singular ops evaluated when `branch` is, looking one assignment deep and into local lambdas."""
    stack: list[tuple[ast.AST, str | None]] = [(branch, None)]
    seen = 0
    while stack and seen < 300:
        node, via = stack.pop()
        seen += 1
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            oc = ctx.op(node)
            if oc is not None and oc.op in _GUARDS:
                continue  # an inner where/masked_fill is a guard, not part of this hazard
            if oc is None and isinstance(node.func, ast.Name):
                for found in _lambda_singulars(ctx, node):
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


def _lambda_singulars(ctx: Analysis, call: ast.Call) -> Iterator[Singular]:
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
            extra = frozenset().union(*(names_in(ctx, a) for a in args))
            yield Singular(found.label, found.node, found.input, extra)


def prior_values(ctx: Analysis, name: ast.AST, at: ast.AST) -> list[ast.expr]:
    """Values assigned to `name` (a Name or `self.x`) before the line of `at`."""
    key = name_key(name)
    if key is None:
        return []
    _, values = ctx.lookup(key)
    line = at.lineno  # type: ignore[attr-defined]
    return [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]


def _literal(ctx: Analysis, expr: ast.expr) -> bool:
    if const_value(expr) is not None or is_eps_like(expr) or is_neg_inf(expr) or is_pos_inf(expr):
        return True
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
    return names_in(ctx, expr, expand=False)


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
                value = const_value(literal) if _literal(ctx, literal) else None
                if value is None and is_eps_like(literal):
                    value = 1e-30  # `x.abs() < eps`: a tiny positive threshold
                out.tests.append(Test(names, o, value, neg))
        if not pairs:
            stack.extend((child, neg) for child in ast.iter_child_nodes(node))
    return out


def _sign(expr: ast.expr) -> float:
    """-1 when `expr` is visibly a negation of its variables (`-x`, `-2 * x`), else +1."""
    sign = 1.0
    while isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        if isinstance(expr.op, ast.USub):
            sign = -sign
        expr = expr.operand
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        for side in (expr.left, expr.right):
            v = const_value(side)
            if v is not None and v < 0:
                sign = -sign
    return sign


def discards(cond: Condition, names: set[str], points: tuple[float, ...], kept_when_true: bool) -> bool:
    """Does some comparison of `names` put one of `points` in the region the where discards?"""
    for test in cond.tests:
        if not test.names & names:
            continue
        for point in points:
            truth = test.at(point)
            if truth is not None and truth != kept_when_true:
                return True
    return False


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


def _inside_unit_interval(ctx: Analysis, expr: ast.expr) -> bool:
    oc = ctx.op(expr)
    if oc is None or oc.op != "clamp":
        return False
    lo, hi = oc.operand(1, "min", "clip_value_min"), oc.operand(2, "max", "clip_value_max")
    lv, hv = const_value(lo), const_value(hi)
    return lv is not None and hv is not None and -1 < lv and hv < 1


def where_parts(oc: OpCall) -> tuple[ast.expr, list[tuple[ast.expr, bool]]] | None:
    """(condition, [(branch, kept where the condition is True?)]) of where/masked_fill.

    Every branch is evaluated everywhere; each is kept only on one side of the condition.
    None for other forms (one-argument where is nonzero()).
    """
    if oc.op == "where":
        if oc.method:
            cond, other = oc.operand(1, "condition"), oc.operand(2, "other", "y")
            if cond is None or other is None:
                return None
            return cond, [(oc.node.func.value, True), (other, False)]  # type: ignore[attr-defined]
        cond = oc.operand(0, "condition")
        a, b = oc.operand(1, "input", "x", "self"), oc.operand(2, "other", "y")
        if cond is None or a is None or b is None:
            return None
        return cond, [(a, True), (b, False)]
    if oc.op == "masked_fill":
        cond, x = oc.operand(1, "mask"), oc.operand(0, "input", "self")
        if cond is None or x is None:
            return None
        return cond, [(x, False)]  # replaced where the mask is True
    return None


@checks("NG501")
def check_where(ctx: Analysis, oc: OpCall) -> None:
    parts = where_parts(oc)
    if parts is None:
        return
    cond, branches = parts
    c = condition_names(ctx, cond)
    if not (c.tests or c.finite):
        return
    for branch, kept_when_true in branches:
        for s in _singulars(ctx, branch):
            inp = s.input
            if inp is None:
                continue
            inp_names = names_in(ctx, inp) | s.extra_names
            # Is the op's singular point in the discarded region? 0 for log/sqrt/1/x/pow,
            # ±1 for acos/asin/atanh, +inf (overflow) for exp.
            if s.label == "exp":
                if nonpositive_by_construction(ctx, inp):
                    continue
                # `isinf(exp)` on the branch's own exp: the author expects it to overflow.
                finite = c.finite.get(s.via) if s.via is not None else None
                by_result = finite is not None and (finite[0] != finite[1]) != kept_when_true
                point = float("inf") * _sign(inp)  # exp(-x) overflows as x -> -inf
                if not (by_result or discards(c, inp_names, (point,), kept_when_true)):
                    continue
            elif s.label in ("acos", "asin", "atanh"):
                if not discards(c, inp_names, (1.0, -1.0), kept_when_true):
                    continue
            elif not discards(c, inp_names, (0.0,), kept_when_true):
                continue
            if guarded_positive(ctx, inp) or has_inner_guard(ctx, inp):
                continue
            if s.label in ("acos", "asin", "atanh") and _inside_unit_interval(ctx, ctx.resolve(inp)):
                continue
            kind = "masked_fill" if oc.op == "masked_fill" else "where"
            ctx.report(SINGLE_WHERE, oc.node,
                       f"`{kind}` still differentiates `{describe(s.node, 40)}` where the condition discards it",
                       "where_gradient", subject=inp)
            return


def mark_branches(ctx: Analysis, oc: OpCall) -> None:
    """Pre-pass: remember which nodes sit in a where/masked_fill branch or under nan_to_num,
    so that value rules (NG104, NG401, ...) leave the handled value to NG501."""
    if oc.op == "nan_to_num":
        if oc.input is not None:
            for node in bounded_walk(oc.input, 400):
                ctx.sanitised.add(id(node))
        return
    parts = where_parts(oc)
    if parts is None:
        return
    cond, branches = parts
    entry = (oc.node, cond)
    for branch, _kept_when_true in branches:
        for node in bounded_walk(branch, 400):
            ctx.in_where.setdefault(id(node), entry)  # type: ignore[arg-type]
            if isinstance(node, (ast.Name, ast.Attribute)):
                # `rhs = log1p(exp(x)); where(x > t, x, rhs)`: rhs's value is selected too.
                for value in prior_values(ctx, node, oc.node):
                    for inner in bounded_walk(value, 200):
                        ctx.in_where.setdefault(id(inner), entry)  # type: ignore[arg-type]


ON_CALL = {"where": [check_where], "masked_fill": [check_where]}
