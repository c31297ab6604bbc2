"""Softmax over scores masked with -inf (NG701)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, is_neg_inf

NEG_INF_SOFTMAX = Rule(
    code="NG701",
    name="softmax-of-neg-inf-mask",
    summary="`masked_fill(mask, -inf)` (or `where(m, x, -inf)`, `s[m] = -inf`) then `softmax`",
    hazard=VALUE,
    hazards=("softmax_masked_row",),
    explanation="""\
Filling masked scores with -inf works until a row is masked entirely; then the whole row is
NaN, and it poisons the attention output and every gradient that touches it.

    scores = scores.masked_fill(~keep, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
->  attn = nanguard.softmax(scores, dim=-1, mask=keep)     # fully masked rows -> all 0

A large finite fill (`torch.finfo(dtype).min`, -1e9) avoids the NaN but gives a fully
masked row a uniform distribution over padding. Causal masks (`triu`/`tril`, names with
"causal"/"subsequent") never mask a whole row and are not reported.""",
)

RULES = [NEG_INF_SOFTMAX]

_CAUSAL = re.compile(r"causal|subsequent|future|tril|triu|look_?ahead|autoregressive|square_mask", re.IGNORECASE)


def _causal(ctx: Analysis, mask: ast.expr | None) -> bool:
    if mask is None:
        return False
    for expr in (mask, ctx.value_of(mask)):
        if expr is None:
            continue
        for node in bounded_walk(expr, 80):
            if isinstance(node, ast.Name) and _CAUSAL.search(node.id):
                return True
            if isinstance(node, ast.Attribute) and _CAUSAL.search(node.attr):
                return True
    return False


def _fill(ctx: Analysis, node: ast.AST) -> ast.AST | None:
    """The -inf fill performed by `node` (masked_fill/where with -inf, non-causal), if any."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "masked_fill_" and len(node.args) == 2:
        if is_neg_inf(node.args[1]) and not _causal(ctx, node.args[0]):
            return node
        return None
    oc = ctx.op(node)
    if oc is None:
        return None
    if oc.op == "masked_fill":
        value = oc.operand(2, "value")
        if is_neg_inf(value) and not _causal(ctx, oc.operand(1, "mask")):
            return node
    elif oc.op == "where":
        if oc.method:
            cond, branches = oc.operand(1, "condition"), [oc.operand(2, "other", "y")]
        else:
            cond, branches = oc.operand(0, "condition"), [oc.operand(1, "input", "x"), oc.operand(2, "other", "y")]
        if any(is_neg_inf(b) for b in branches if b is not None) and not _causal(ctx, cond):
            return node
    return None


def _neg_inf_source(ctx: Analysis, expr: ast.expr, depth: int = 2) -> ast.AST | None:
    for node in bounded_walk(expr, 150):
        found = _fill(ctx, node)
        if found is not None:
            return found
        key = name_key(node)
        if key is None or depth == 0:
            continue
        scope, values = ctx.lookup(key)
        if scope is None:
            continue
        for m in scope.mutations.get(key, ()):
            if is_neg_inf(m):
                return m  # `scores[~mask] = float("-inf")`
            found = _fill(ctx, m)
            if found is not None:
                return found
        for v in values:
            if v is not None and v is not expr and v.lineno <= node.lineno:  # type: ignore[attr-defined]
                found = _neg_inf_source(ctx, v, depth - 1)
                if found is not None:
                    return found
    return None


@checks("NG701")
def check_masked_softmax(ctx: Analysis, oc: OpCall) -> None:
    x = oc.input
    if x is None or id(oc.node) in ctx.sanitised:
        return
    source = _neg_inf_source(ctx, x)
    if source is None:
        return
    where = f" (filled on line {source.lineno})" if source.lineno != oc.node.lineno else ""  # type: ignore
    fn = "nanguard.log_softmax" if oc.op == "log_softmax" else "nanguard.softmax"
    ctx.report(NEG_INF_SOFTMAX, oc.node, f"`{oc.op}` over scores masked with -inf{where}", "softmax_masked_row",
               op=oc.op, fn=fn)


ON_CALL = {"softmax": [check_masked_softmax], "log_softmax": [check_masked_softmax]}
