"""Softmax over scores masked with -inf (NG701)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import is_mask_like
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, is_neg_inf

NEG_INF_SOFTMAX = Rule(
    code="NG701",
    name="softmax-of-neg-inf-mask",
    summary="`masked_fill(mask, -inf)` (or `where(m, x, -inf)`, `s[m] = -inf`) then `softmax`",
    hazard=VALUE,
    confidence=POSSIBLE,  # a row is emptied only by data (a fully padded sequence)
    hazards=("softmax_masked_row",),
    explanation="""\
Filling masked scores with -inf works until a row is masked entirely; then the whole row is
NaN, and it poisons the attention output and every gradient that touches it.

    scores = scores.masked_fill(~keep, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
->  attn = nanguard.softmax(scores, dim=-1, mask=keep)     # fully masked rows -> all 0

A large finite fill (`torch.finfo(dtype).min`, -1e9) avoids the NaN but gives a fully
masked row a uniform distribution over padding. Causal masks (`triu`/`tril`, a buffer
registered from `torch.tril`, names with "causal"/"subsequent") keep the diagonal, and top-k /
top-p sampling masks keep at least one logit: neither empties a row, and neither is reported.
A fill after the softmax, or in the other arm of an `if`, is not "masked then softmaxed".
Only a mask from data can empty a row, so findings are POSSIBLE (`--confidence all`).""",
)

RULES = [NEG_INF_SOFTMAX]

_CAUSAL = re.compile(r"causal|subsequent|future|tril|triu|look_?ahead|autoregressive|square_mask"
                     # top-k / top-p sampling: at least one logit survives
                     r"|top_?k|top_?p|nucleus|to_remove|kth|cutoff", re.IGNORECASE)


def _from_topk(ctx: Analysis, name: str) -> bool:
    """`v, _ = torch.topk(logits, k)`: a threshold that keeps k >= 1 entries of every row."""
    scope, _ = ctx.lookup(name)
    for call in (scope.unpacked.get(name, ()) if scope is not None else ()):
        func = call.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Attribute) and func.attr in ("topk", "sort", "kthvalue", "top_k"):
            return True
    return False


def _registered_causal(ctx: Analysis, attr: str) -> bool:
    """`self.register_buffer("bias", torch.tril(...))` (nanoGPT): `self.bias` is a causal mask."""
    for call, _scope, _ng in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "register_buffer" and len(call.args) >= 2:
            name = call.args[0]
            if isinstance(name, ast.Constant) and name.value == attr:
                return any(isinstance(n, (ast.Name, ast.Attribute)) and _CAUSAL.search(
                    n.id if isinstance(n, ast.Name) else n.attr) for n in bounded_walk(call.args[1], 60))
    return False


def _causal(ctx: Analysis, mask: ast.expr | None) -> bool:
    if mask is None:
        return False
    for expr in (mask, ctx.value_of(mask)):
        if expr is None:
            continue
        for node in bounded_walk(expr, 80):
            if isinstance(node, ast.Name) and (_CAUSAL.search(node.id) or _from_topk(ctx, node.id)):
                return True
            if isinstance(node, ast.Attribute) and _CAUSAL.search(node.attr):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "topk", "kthvalue", "sort", "cumsum"):
                return True
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and _registered_causal(ctx, node.attr):
                return True
    return False


def _fill(ctx: Analysis, node: ast.AST) -> ast.AST | None:
    """The -inf fill performed by `node` (masked_fill/where with -inf, non-causal), if any."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for term in (node.left, node.right):
            log = ctx.op(term)
            # `vector + mask.log()` (allennlp's masked_log_softmax): log 0 = -inf where the mask is 0.
            if log is not None and log.op == "log" and log.input is not None and is_mask_like(ctx, log.input) \
                    and not _causal(ctx, log.input):
                return node
        return None
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


def neg_inf_source(ctx: Analysis, expr: ast.expr, at: ast.AST, depth: int = 2) -> ast.AST | None:
    """The -inf fill that reaches `expr` (the softmax's input) before the softmax `at`, if any."""
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
            if not _reaches(ctx, m, at):
                continue
            if is_neg_inf(m):
                if not _causal(ctx, ctx.mutation_index.get(id(m))):  # type: ignore[arg-type]
                    return m  # `scores[~mask] = float("-inf")`
                continue
            found = _fill(ctx, m)
            if found is not None:
                return found
        for v in values:
            if v is not None and v is not expr and v.lineno <= node.lineno and _reaches(ctx, v, at):  # type: ignore
                found = neg_inf_source(ctx, v, at, depth - 1)
                if found is not None:
                    return found
    return None


def _reaches(ctx: Analysis, fill: ast.AST, at: ast.AST) -> bool:
    """Can the value made at `fill` flow into `at`: written before it, and not in the other arm of
    an `if` that holds them both (a fill in the `if` branch, the softmax in the `else`)?"""
    if fill.lineno > at.lineno:  # type: ignore[attr-defined]
        return False  # the fill comes after the softmax
    body = getattr(ctx.scope.node, "body", None)
    if not isinstance(body, list):
        return True
    fl, al = fill.lineno, at.lineno  # type: ignore[attr-defined]
    for node in ast.walk(ctx.scope.node):
        if isinstance(node, ast.If) and node.orelse and node.lineno <= fl:
            arms = [(s[0].lineno, s[-1].end_lineno) for s in (node.body, node.orelse)]
            where = [next((i for i, (lo, hi) in enumerate(arms) if lo <= line <= hi), None) for line in (fl, al)]
            if None not in where and where[0] != where[1]:
                return False
    return True


@checks("NG701")
def check_masked_softmax(ctx: Analysis, oc: OpCall) -> None:
    x = oc.input
    if x is None or id(oc.node) in ctx.sanitised:
        return
    source = neg_inf_source(ctx, x, oc.node)
    if source is None:
        return
    where = f" (filled on line {source.lineno})" if source.lineno != oc.node.lineno else ""  # type: ignore
    fn = "nanguard.log_softmax" if oc.op == "log_softmax" else "nanguard.softmax"
    ctx.report(NEG_INF_SOFTMAX, oc.node, f"`{oc.op}` over scores masked with -inf{where}", "softmax_masked_row",
               op=oc.op, fn=fn)


ON_CALL = {"softmax": [check_masked_softmax], "log_softmax": [check_masked_softmax]}
