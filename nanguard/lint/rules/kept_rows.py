"""Masks that leave at least one entry in every row, so a softmax over a fill through them never
sees a row of -inf (NG701's exceptions).

Causal masks (`triu`/`tril`, a buffer registered from `torch.tril`, names with "causal",
"subsequent", "look_ahead"; a `...Mask` class of the tree that builds a triangle,
`nanguard.lint.project`) keep the diagonal; top-k / top-p sampling thresholds keep k >= 1
logits; an identity mask (`torch.eye(n)`) keeps the rest of the row; a one-hot mask
(`F.one_hot(labels)`, ones scattered into zeros) keeps the other C - 1 entries, or the label's.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint import project
from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import dominates
from nanguard.lint.patterns import positions_from_zero
from nanguard.lint.syntax import bounded_walk, callee_name


_CAUSAL = re.compile(r"causal|subsequent|future|tril|triu|look_?ahead|autoregressive|square_mask"
                     # top-k / top-p sampling: at least one logit survives
                     r"|top_?k|top_?p|nucleus|to_remove|kth|cutoff"
                     # an identity mask (`torch.eye(n)`, or its complement) leaves n - 1 (or 1) entries per row
                     r"|(?:^|_)eye(?:$|_)", re.IGNORECASE)


def _from_topk(ctx: Analysis, name: str) -> bool:
    """`v, _ = torch.topk(logits, k)`: a threshold that keeps k >= 1 entries of every row."""
    scope, _ = ctx.lookup(name)
    for call in (scope.unpacked.get(name, ()) if scope is not None else ()):
        func = call.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Attribute) and func.attr in ("topk", "sort", "kthvalue", "top_k"):
            return True
    return False


def _registered_causal(ctx: Analysis, attr: str, depth: int = 1) -> bool:
    """`self.register_buffer("bias", torch.tril(...))` (nanoGPT): `self.bias` is a causal mask;
    so is a buffer made from one (stanza's `register_buffer("flipped_mask", torch.flip(self.mask,
    (-1,)))`: a flipped triangle still leaves an entry in every row and column)."""
    for call, scope, _ng in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "register_buffer" and len(call.args) >= 2:
            name = call.args[0]
            if isinstance(name, ast.Constant) and name.value == attr:
                values = [call.args[1]]
                for n in bounded_walk(call.args[1], 60):
                    if isinstance(n, ast.Name):  # `mask = torch.tril(...)`, then `register_buffer("mask", mask.view(...))`
                        values.extend(v for v in ctx.lookup(n.id, scope)[1] if v is not None)
                if any(isinstance(n, (ast.Name, ast.Attribute)) and _CAUSAL.search(
                        n.id if isinstance(n, ast.Name) else n.attr) for v in values for n in bounded_walk(v, 60)):
                    return True
                return depth > 0 and any(
                    isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
                    and n.attr != attr and _registered_causal(ctx, n.attr, depth - 1)
                    for v in values for n in bounded_walk(v, 60))
    return False


def keeps_every_row(ctx: Analysis, mask: ast.expr | None) -> bool:
    """Does `mask` (a fill's condition or index) leave an entry in every row: causal, top-k,
    identity or one-hot?"""
    if mask is None:
        return False
    exprs = [mask, ctx.value_of(mask)]
    if isinstance(mask, ast.Compare):  # `logits < pivot`, `pivot = v.select(-1, -1)` of `v, _ = topk(...)`
        exprs.extend(ctx.value_of(n) for n in [mask.left, *mask.comparators] if isinstance(n, ast.Name))
    if not isinstance(mask, ast.Name):  # `mask.bool()`, `~mask`, `attn_mask.mask`: the value of the name inside too
        exprs.extend(ctx.value_of(n) or _dominating_value(ctx, n) for n in bounded_walk(mask, 20)
                     if isinstance(n, ast.Name))
    for expr in exprs:
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
            if isinstance(node, ast.Call) and callee_name(node.func) in _causal_classes(ctx):
                return True  # `attn_mask = ProbMask(B, H, L_Q, index, scores)`: a class that builds triu
            if isinstance(node, ast.Call) and _one_hot(node):
                return True
            if isinstance(node, ast.Compare) and _index_triangle(ctx, node):
                return True
    return False


def _index_triangle(ctx: Analysis, compare: ast.Compare) -> bool:
    """`col_idx > row_idx` with both sides from `arange`: a strict comparison of two index ranges
    starting at 0 never holds on the diagonal (or at column 0), so the triangle it masks leaves
    an entry in every row. `>=`, or a side that is not an index range (`idx >= lengths`), can mask
    a whole row."""
    if len(compare.ops) != 1 or not isinstance(compare.ops[0], (ast.Gt, ast.Lt)):
        return False
    return all(positions_from_zero(ctx, side) for side in (compare.left, compare.comparators[0]))


_ZERO_FACTORIES = frozenset({"zeros", "zeros_like", "new_zeros"})


def _one_hot(call: ast.Call) -> bool:
    """A one-hot mask, one entry per row (the label's): `F.one_hot(labels, C)`, or ones scattered
    into zeros (`torch.zeros_like(logits).scatter_(1, labels.unsqueeze(1), 1.)`). Filling it
    leaves the other C - 1 entries of the row; filling its complement leaves the label's."""
    name = callee_name(call.func)
    if name == "one_hot":
        return True
    if name not in ("scatter", "scatter_") or len(call.args) < 3 or not isinstance(call.func, ast.Attribute):
        return False
    base = call.func.value
    value = call.args[2]
    one = isinstance(value, ast.Constant) and value.value in (1, True)
    return one and isinstance(base, ast.Call) and callee_name(base.func) in _ZERO_FACTORIES


def _dominating_value(ctx: Analysis, name: ast.Name) -> ast.expr | None:
    """The last value assigned to `name` before its use when that assignment runs on every path
    to the use (`attn_mask = ProbMask(...)` then `masked_fill_(attn_mask.mask, -inf)`); not one made
    only on some paths (`if attn_mask is None: attn_mask = TriangularCausalMask(...)`)."""
    value = ctx.last_value(name)
    scope = ctx.scope
    if value is None or not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return value if dominates(ctx, scope.node, value.lineno, name.lineno) else None  # type: ignore[attr-defined]


def _causal_classes(ctx: Analysis) -> frozenset[str]:
    """Classes named `...Mask` whose body builds a triangle (triu/tril) and takes no padding:
    those of the linted tree (`nanguard.lint.project`) and of this file."""
    found = ctx.memo.get("causal_mask_classes")
    if found is None:
        here: set[str] = set()
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.ClassDef) and n.name.endswith("Mask"):  # judged as the tree's are
                here |= project.causal_mask_classes_in(ast.unparse(n).encode() + b"\n")
        found = ctx.memo["causal_mask_classes"] = project.causal_mask_classes() | frozenset(here)
    return found
