"""A Dice denominator without smoothing: `2 * (p * t).sum() / (p.sum() + t.sum())` (NG401).

The denominator totals a prediction map and a target mask. Both are empty for an image with no
foreground that the model also predicts empty (a thresholded mask, or probabilities that
underflow): 0 / 0 = NaN, the failure the `smooth` term of published Dice losses exists for.
"""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.naming import PROBABILITY_WORDS, is_mask_like
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.syntax import additive_terms, bounded_walk, last_identifier

# Names of what a segmentation loss compares: the target and the prediction maps.
_MAP_WORDS = frozenset({"target", "targets", "gt", "label", "labels", "y_true", "y_pred", "true", "pred", "preds",
                        "prediction", "predictions", "output", "outputs", "input", "inputs", "seg", "mask", "masks"})
_PROBABILITY_OPS = frozenset({"sigmoid", "softmax"})


def _total_of(ctx: Analysis, term: ast.expr) -> ast.expr | None:
    """The tensor that `term` sums (`p.sum((1, 2))`, `torch.sum(t)`, a name holding one)."""
    e = strip_wrappers(ctx, term)
    oc = ctx.op(e)
    if oc is None and isinstance(e, ast.Name):
        value = ctx.value_of(e)
        oc = ctx.op(strip_wrappers(ctx, value)) if value is not None else None
    return strip_wrappers(ctx, oc.input) if oc is not None and oc.op == "sum" and oc.input is not None else None


def _a_map(ctx: Analysis, expr: ast.expr) -> bool:
    """A mask, a probability map (a sigmoid/softmax output) or a name for a prediction or target."""
    if is_mask_like(ctx, expr):
        return True
    e = expr
    if isinstance(e, ast.Name):  # any value it is given (`m = pred == i`, then `m = m.astype(float)`)
        for value in ctx.lookup(e.id)[1]:
            inner = strip_wrappers(ctx, value) if value is not None else None
            if inner is None or (isinstance(inner, ast.Name) and inner.id == e.id):
                continue
            oc = ctx.op(inner)
            if isinstance(inner, ast.Compare) or (oc is not None and oc.op in _PROBABILITY_OPS | {"compare"}):
                return True
    oc = ctx.op(e)
    if oc is not None and oc.op in _PROBABILITY_OPS:
        return True
    ident = (last_identifier(e) or "").lower()
    return ident in _MAP_WORDS or ident in PROBABILITY_WORDS


def dice_denominator(ctx: Analysis, numerator: ast.expr, denominator: ast.expr) -> bool:
    """Is this `2 * (p * t).sum() / (p.sum() + t.sum())` with no smoothing term?"""
    d = strip_wrappers(ctx, denominator)
    if isinstance(d, ast.Name):
        d = strip_wrappers(ctx, ctx.value_of(d) or d)
    terms = additive_terms(d)
    if len(terms) < 2 or any(sign < 0 for sign, _ in terms):
        return False
    totals = [_total_of(ctx, term) for _, term in terms]
    if any(t is None for t in totals) or not any(_a_map(ctx, t) for t in totals if t is not None):
        return False
    factors = _intersection_factors(ctx, numerator)
    return all(ast.dump(t) in factors for t in totals if t is not None)


def _intersection_factors(ctx: Analysis, numerator: ast.expr) -> set[str]:
    """The factors of the products the numerator totals, the intersection (`(p * t).sum()`, or
    a name holding it), as dumps."""
    found: set[str] = set()
    roots = [numerator]
    for node in bounded_walk(numerator, 40):
        if isinstance(node, ast.Name):
            value = ctx.value_of(node)
            if value is not None:
                roots.append(value)
    for root in roots:
        for node in bounded_walk(root, 80):
            oc = ctx.op(node) if isinstance(node, ast.Call) else None
            if oc is not None and oc.op == "sum" and oc.input is not None:
                inner = strip_wrappers(ctx, oc.input)
                if isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Mult, ast.BitAnd)):
                    found.update(ast.dump(strip_wrappers(ctx, f)) for f in (inner.left, inner.right))
    return found
