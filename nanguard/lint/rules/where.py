"""`where` does not stop NaN gradients: the single-where trap (NG501).

`torch.where(c, f(x), g)` evaluates f on *every* element and backward multiplies the
upstream gradient (0 where c is False) by f'(x). Where f'(x) is inf (log, sqrt, 1/x at 0;
acos at ±1; exp overflowing) the product is 0 * inf = NaN. The cure is a second, inner
where that replaces x by a safe value before f sees it: the "double where".
"""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import GRADIENT, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.dataflow import counts_own_finite_entries, tagged_names
from nanguard.lint.patterns import local_constant, strip_wrappers
from nanguard.lint.positive import guarded_positive
from nanguard.lint.scope import name_key
from nanguard.lint.signs import nonpositive_by_construction
from nanguard.lint.rules.base import checks
from nanguard.lint.rules.where_condition import Condition, additive_names, condition_names, discards, sign
from nanguard.lint.rules.where_singular import INDEPENDENT, Singular, has_inner_guard, prior_values, singulars, zero_tied
from nanguard.lint.syntax import bounded_walk, callee_name, const_value, describe, is_eps_like, is_neg_inf, is_pos_inf

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
pow with a negative or fractional (0 < p < 1) exponent, acos/asin/atanh, log1p(-p) at p = 1
(and log1p(-exp(z)) at z = 0), and exp/expm1 (overflow; not where the kept branch overflows
at the same input, as in `where(s < .5, expm1(s), exp(s) - 1)`). Reported only when the condition compares the singular input's variable with a
constant (or tests the exp's result for inf) such that the singular point, 0, ±1 or +inf,
falls in the region the where discards: `where(x > 0, log(x), 0)` and `where(x == 0, 1,
sin(x) / x)` are reported, `where(x != 0, exp(x), 0)` is not. Not reported when the input
is itself guarded (an inner where, a positive clamp, `+ eps`, a name like `safe_x`).
Lambdas assigned to a local name are looked into, as in the seed story.
A gradient hazard: not reported inside `torch.no_grad()`, nor when no gradient can reach the
singular op (every operand a count or mask built from comparisons, also spelled `torch.eq`
or `logical_and`, a parameter named as a mask, a random draw, a factory tensor, or
detached): `where(area_u > 0, area_i / area_u, 1.0)` with `area_i`, `area_u` counted from
`logits > t` is not reported, `where(n > 0, x.sum() / n, 0)` is.""",
)


RULES = [SINGLE_WHERE]


def _inside_unit_interval(ctx: Analysis, expr: ast.expr) -> bool:
    oc = ctx.op(expr)
    if oc is None or oc.op != "clamp":
        return False
    lo, hi = oc.operand(1, "min", "clip_value_min"), oc.operand(2, "max", "clip_value_max")
    lv, hv = const_value(lo), const_value(hi)
    return lv is not None and hv is not None and -1 < lv and hv < 1


_NAN_MODULES = frozenset({"math", "np", "numpy", "torch", "jnp", "tf"})
# Calls whose value is their argument's, only typed or shaped: `dtype(np.nan)`,
# `tf.constant(np.inf, dtype)`, `tf.cast(np.nan, dtype)`, `torch.tensor(float("nan"))`;
# and fills, whose value is their last argument: `tf.fill(shape, inf)`, `torch.full_like(x, nan)`.
_FILLS = frozenset({"fill", "full", "full_like"})
_TYPINGS = frozenset({"constant", "cast", "tensor", "as_tensor", "array", "asarray", "convert_to_tensor",
                      "broadcast_to"})


def _infinite(expr: ast.expr, depth: int = 3) -> bool:
    """A non-finite constant: `torch.inf`, `-math.inf`, `float("inf")`, a bare `inf`, NaN
    (`np.nan`, `float("nan")`), also typed or broadcast (`dtype(np.nan)`, `tf.cast(np.nan, dt)`,
    `tf.constant(np.inf, dt)`, `tf.fill(shape, inf)`, `torch.full_like(x, float("nan"))`,
    `np.nan * torch.ones_like(x)`)."""
    e = expr.operand if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub) else expr
    if is_pos_inf(expr) or is_neg_inf(expr) or (isinstance(e, ast.Name) and e.id in ("inf", "nan")):
        return True
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and depth > 0:
        return _infinite(e.left, depth - 1) or _infinite(e.right, depth - 1)  # `np.nan * torch.ones_like(xi)`
    if isinstance(e, ast.Attribute) and e.attr in ("nan", "NaN", "NAN") and isinstance(e.value, ast.Name) \
            and e.value.id in _NAN_MODULES:
        return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "float" and len(e.args) == 1 \
            and isinstance(e.args[0], ast.Constant) and str(e.args[0].value).strip().lower().lstrip("+-") == "nan":
        return True
    if isinstance(e, ast.Call) and e.args and depth > 0:
        func = e.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _FILLS:
            return _infinite(e.args[-1], depth - 1)
        if isinstance(func, ast.Call) or name in _TYPINGS or name.lower().endswith("dtype") \
                or name.startswith(("float", "bfloat")):
            return _infinite(e.args[0], depth - 1)
    return False


def _zero_of(ctx: Analysis, inp: ast.expr) -> float:
    """Where the compared variable puts a singular input at 0: `1 - x` is 0 at x = 1, `c - 1.`
    at c = 1, `x + 2` at x = -2; anything else is read at 0 (`x`, `x * y`, `norm(x)`)."""
    e = strip_wrappers(ctx, inp)  # not through a name: `denom = z - 1` tested as `denom != 0` is 0 at 0
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        left, right = const_value(e.left), const_value(e.right)
        if right is not None and left is None:
            return right if isinstance(e.op, ast.Sub) else -right  # x - k, x + k
        if left is not None and right is None:
            return left if isinstance(e.op, ast.Sub) else -left  # k - x, k + x
    return 0.0


def _numerator_guarded(ctx: Analysis, numerator: ast.expr, c: Condition) -> bool:
    """Is the numerator of the discarded division already cut off where the condition discards
    it? `summed = where(counts == 0, zeros, summed)` then `where(counts == 0, summed, summed / counts)`
    (jax#1052): the inner where sends no gradient to the original numerator there. Also a
    count of the numerator's own finite entries (`n = (~isnan(f)).sum(1)`, then `f.sum(1) / n`):
    it is 0 only where every entry already is NaN."""
    tested = set().union(*(t.names for t in c.tests))
    for value in [numerator, *prior_values(ctx, numerator, numerator)]:
        oc = ctx.op(value)
        if oc is not None and oc.op in ("where", "masked_fill"):
            parts = where_parts(oc)
            if parts is not None and condition_names(ctx, parts[0]).tests and \
                    set().union(*(t.names for t in condition_names(ctx, parts[0]).tests)) & tested:
                return True
    return any(counts_own_finite_entries(ctx, name.split("@", 1)[0], numerator) for name in tested)


def _factors_guarded(ctx: Analysis, inp: ast.expr, c: Condition) -> bool:
    """A product whose every factor is either kept from 0 or has zeros unrelated to the tested
    variables: `mx / (mx_norm * sqrt_c)` with `mx_norm` clamped and `where(mx == 0, 0, ...)`
    (hgcn's Möbius matvec) is finite where the where discards it; `sqrt_c`'s own zero is not
    the where's business."""
    e = strip_wrappers(ctx, inp)
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult)):
        return False
    factors, stack = [], [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            stack.extend((n.left, n.right))
        else:
            factors.append(n)
    tested = set().union(*(t.names for t in c.tests))
    return all(guarded_positive(ctx, f) or zero_tied(ctx, f, tested) == INDEPENDENT for f in factors)


def _negative_bound(ctx: Analysis, bound: ast.expr | None) -> bool:
    """`-1e-7`, `-eps`, `-jnp.finfo(x.dtype).eps`: a number below 0."""
    if bound is None:
        return False
    v = local_constant(ctx, bound)
    if v is not None:
        return v < 0
    return isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub) and is_eps_like(bound.operand)


def _held_below_zero(ctx: Analysis, expr: ast.expr) -> bool:
    """`x = jnp.minimum(x, -eps)` before `log1p(-exp(x))` (blackjax's log1mexp): exp(x) stays below
    1 by a representable step, so log1p(-exp(x)) and its derivative stay finite."""
    value = ctx.last_value(expr) if name_key(expr) is not None else expr
    value = strip_wrappers(ctx, value) if value is not None else None
    if not isinstance(value, ast.Call):
        return False
    name = callee_name(value.func)
    if name in ("minimum", "fmin") and len(value.args) == 2:
        return any(_negative_bound(ctx, a) for a in value.args)
    oc = ctx.op(value)
    if oc is not None and oc.op == "clamp":  # `x.clamp(max=-eps)`, `jnp.clip(x, None, -eps)`
        return _negative_bound(ctx, oc.operand(2, "max", "a_max", "clip_value_max", "max_value"))
    if name == "clamp_max" and value.args:
        return _negative_bound(ctx, value.args[-1])
    return False


def _feeds_another(s: Singular, ss: list[Singular]) -> bool:
    """Is the op `s` inside another singular op of the branch (the exp of `log1p(-exp(x))`, which
    is -inf where exp(x) rounds to 1, whatever the exp's own overflow)?"""
    return any(o is not s and o.node is not s.node and any(n is s.node for n in ast.walk(o.node)) for o in ss)


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
    for branch, _kept in branches:
        for n in bounded_walk(branch, 200):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and const_value(n.right) == 0:
                # `where(b, a / 0, c)`: inf everywhere, so the discarded half's gradient is 0·inf = NaN.
                ctx.report(SINGLE_WHERE, oc.node, f"`{oc.op}` still differentiates `{describe(n, 40)}`, which is "
                           "inf everywhere", "where_gradient", subject=n.left)
                return
    c = condition_names(ctx, cond)
    if not (c.tests or c.finite):
        return
    if any(_infinite(b) or _infinite(ctx.resolve(b)) for b, _ in branches):
        return  # `where(c > 1, rate / (c - 1), inf)`, `dtype(np.nan)`: non-finite on purpose, not a silent NaN
    found = [(kept, list(singulars(ctx, branch))) for branch, kept in branches]
    # `where(c, -fu, fu)`: an op evaluated for both branches is kept on one side or the other.
    both = set.intersection(*({id(s.node) for s in ss} for _, ss in found)) if len(found) > 1 else set()
    # `where(s < 0.5, expm1(s), exp(s) - 1)`: where the discarded exp overflows, the kept one does
    # too; the value is already inf there, the NaN gradient adds nothing.
    overflows = [{ast.dump(s.input) for s in ss if s.label == "exp" and s.input is not None} for _, ss in found]
    for i, (kept_when_true, ss) in enumerate(found):
        for s in ss:
            if id(s.node) in both:
                continue
            if s.label == "exp" and s.input is not None and not _feeds_another(s, ss) and any(
                    ast.dump(s.input) in o for j, o in enumerate(overflows) if j != i):
                continue
            inp = s.input
            if inp is None:
                continue
            inp_names = tagged_names(ctx, inp) | s.extra_names
            # Is the op's singular point in the discarded region? 0 for log/sqrt/1/x/pow,
            # ±1 for acos/asin/atanh, +inf (overflow) for exp.
            if s.label == "exp":
                if nonpositive_by_construction(ctx, inp) or _held_below_zero(ctx, inp):
                    continue
                # `isinf(exp)` on the branch's own exp: the author expects it to overflow.
                finite = next((v for k, v in c.finite.items() if k.split("@", 1)[0] == s.via), None) \
                    if s.via is not None else None
                by_result = finite is not None and (finite[0] != finite[1]) != kept_when_true
                point = float("inf") * sign(ctx, inp)  # exp(-x) overflows as x -> -inf
                if not (by_result or discards(c, inp_names, (point,), kept_when_true)):
                    continue
            elif s.label in ("acos", "asin", "atanh"):
                if not discards(c, inp_names, (1.0, -1.0), kept_when_true, additive_names(ctx, inp)):
                    continue
            elif s.label == "log1p" and _held_below_zero(ctx, inp):
                continue
            elif s.label == "log1p(-x)":
                if not discards(c, inp_names, (1.0,), kept_when_true, additive_names(ctx, inp)):
                    continue
            elif not discards(c, inp_names, (_zero_of(ctx, inp),), kept_when_true, additive_names(ctx, inp)):
                continue
            elif zero_tied(ctx, inp, set().union(*(t.names for t in c.tests))) == INDEPENDENT:
                continue  # `where(eig != 0, g1 / g2, b)` with g2 = sum(-2 / (b + 2 * eig) ** 3): g2 is not 0 there
            if guarded_positive(ctx, inp) or has_inner_guard(ctx, inp) or _factors_guarded(ctx, inp, c):
                continue
            if s.label == "division" and isinstance(s.node, ast.BinOp) and _numerator_guarded(ctx, s.node.left, c):
                continue
            if ctx.gradient_free(s.node):
                continue  # counts, masks, random draws: no gradient reaches the singular op
            if s.label in ("acos", "asin", "atanh") and _inside_unit_interval(ctx, ctx.resolve(inp)):
                continue
            kind = "masked_fill" if oc.op == "masked_fill" else "where"
            ctx.report(SINGLE_WHERE, oc.node,
                       f"`{kind}` still differentiates `{describe(s.node, 40)}` where the condition discards it",
                       "where_gradient", subject=inp, root=s.node)
            return


def _note_select(ctx: Analysis, node: ast.AST, entry: tuple) -> None:
    ctx.in_where.setdefault(id(node), entry)  # type: ignore[arg-type]
    ctx.selected_by.setdefault(id(node), []).append(entry)  # type: ignore[arg-type]


def _mark_selected_values(ctx: Analysis, name: ast.AST, at: ast.AST, entry: tuple, depth: int) -> None:
    """The values `name` held before `at` are selected by the where too; through a chain of
    selects on the same name (`a = softmax(s); a = a.masked_fill(m1, 0); a = a.masked_fill(m2, 0)`)
    the first value is reached as well."""
    for value in prior_values(ctx, name, at):
        for inner in bounded_walk(value, 200):
            _note_select(ctx, inner, entry)
        oc = ctx.op(value)
        if depth > 0 and oc is not None and oc.op in ("where", "masked_fill"):
            parts = where_parts(oc)
            for branch, _ in parts[1] if parts is not None else []:
                if name_key(branch) is not None and name_key(branch) == name_key(name):
                    _mark_selected_values(ctx, branch, value, entry, depth - 1)


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
            _note_select(ctx, node, entry)
            if isinstance(node, (ast.Name, ast.Attribute)):
                # `rhs = log1p(exp(x)); where(x > t, x, rhs)`: rhs's value is selected too.
                _mark_selected_values(ctx, node, oc.node, entry, 3)


ON_CALL = {"where": [check_where], "masked_fill": [check_where]}
