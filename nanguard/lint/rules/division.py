"""Division by a count that can be zero (NG401)."""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import is_count_name, is_mask_like, is_strong_count_name
from nanguard.lint.patterns import guarded_positive, strip_wrappers
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import const_value, describe

DIV_BY_COUNT = Rule(
    code="NG401",
    name="division-by-count",
    summary="`x / mask.sum()`, `s / lengths`, `/ len(x[mask])`: a count that can be 0",
    hazard=VALUE,
    confidence=POSSIBLE,
    hazards=("mean_empty",),
    explanation="""\
The NaN then spreads through every later layer and step (the seed story
`tf.reduce_sum(embedded) / tf.reduce_sum(tf.not_equal(input, pad))`).

    mean = (x * mask).sum(1) / mask.sum(1)
->  mean = nanguard.masked_mean(x, mask, dim=1)      # 0 (and zero gradient) for empty rows
    ratio = a / counts
->  ratio = nanguard.div(a, counts, fill=0.0)

Reported when the denominator is a sum/count of a mask-like tensor (a comparison, `~m`, a
name containing "mask"/"valid"), `len()` of a masked selection, or a count-like name
(`lengths`, `seq_lens`, `counts`, `num_valid`, `deg`) dividing a sum. Not reported when the
denominator is guarded: `clamp(min=1)`, `max(n, 1)`, `+ eps`, a `where`, an in-place fix
(`n[n == 0] = 1`), a test of it against 0 in the same function, or when the division sits
in a where branch (that is NG501's double-where).""",
)

RULES = [DIV_BY_COUNT]


def _is_sum(ctx: Analysis, expr: ast.expr) -> bool:
    oc = ctx.op(strip_wrappers(ctx, ctx.resolve(expr)))
    return oc is not None and oc.op == "sum"


def _masked_selection(ctx: Analysis, expr: ast.expr) -> bool:
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if isinstance(e, ast.Subscript):
        index = e.slice
        return is_mask_like(ctx, index)
    oc = ctx.op(e)
    return oc is not None and oc.node.func.attr in ("masked_select", "nonzero") \
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) else False


def _count_reason(ctx: Analysis, numerator: ast.expr, denominator: ast.expr) -> str | None:
    d = strip_wrappers(ctx, denominator)
    if const_value(d) is not None or guarded_positive(ctx, d):
        return None
    candidates = [d]
    if name_key(d) is not None:
        if ctx.zero_checked(d):
            return None
        value = ctx.value_of(d)
        if value is not None:
            value = strip_wrappers(ctx, value)
            if guarded_positive(ctx, value):
                return None
            candidates.append(value)
    for c in candidates:
        oc = ctx.op(c)
        if oc is not None and oc.op in ("sum", "count_nonzero") and oc.input is not None:
            mask = strip_wrappers(ctx, oc.input)
            if is_mask_like(ctx, mask) and not ctx.zero_checked(mask):
                return "counts a mask and is 0 when nothing is selected"
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "len" \
                and "len" not in ctx.imports.aliases and len(c.args) == 1 \
                and _is_sum(ctx, numerator) and _masked_selection(ctx, c.args[0]):
            return "is the size of a masked selection, 0 when nothing is selected"
    if isinstance(d, (ast.Name, ast.Attribute)) and (
            is_strong_count_name(d) or (is_count_name(d) and _is_sum(ctx, numerator))):
        return "is a count (0 for an empty sequence)"
    return None


def _operands(ctx: Analysis, target) -> tuple[ast.AST, ast.expr, ast.expr] | None:
    if isinstance(target, OpCall):
        if target.keyword("rounding_mode") is not None:
            return None  # integer-style division: a different story
        num, den = target.operand(0, "input", "x"), target.operand(1, "other", "y")
        if num is None or den is None:
            return None
        return target.node, num, den
    if isinstance(target, ast.BinOp):
        return target, target.left, target.right
    if isinstance(target, ast.AugAssign):
        return target, target.target, target.value
    return None


@checks("NG401")
def check_division(ctx: Analysis, target) -> None:
    found = _operands(ctx, target)
    if found is None:
        return
    node, num, den = found
    if id(node) in ctx.in_where or id(node) in ctx.sanitised or ctx.result_fixed_up(node):
        return
    reason = _count_reason(ctx, num, den)
    if reason is None:
        return
    ctx.report(DIV_BY_COUNT, node, f"division by `{describe(den, 40)}`, which {reason}", "mean_empty")


ON_CALL = {"div": [check_division]}
ON_DIVISION = [check_division]
