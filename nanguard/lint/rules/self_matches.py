"""Masks that compare a tensor with itself, so that every row counts at least one entry.

`x == x.max(-1, keepdim=True)` holds at the maximum, `torch.eq(idx, idx.t())` on the diagonal,
`eq(ids, all_gather(ids))` at this rank's own ids, `x == x` wherever x is not NaN. NG401's
exceptions, read by `division_counts.counts_at_least_one`.
"""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.patterns import source_of, strip_wrappers
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, callee_name


def matches_itself(ctx: Analysis, mask: ast.expr) -> bool:
    """`torch.eq(idx, torch.cat([idx.t(), queue], 1))` (ALBEF/BLIP's positives): every row of
    `idx` meets itself in the transposed copy, so each row counts at least one match; `x == x`
    counts every entry that is not NaN."""
    m = source_of(ctx, mask)  # `mask = tf.to_float(tf.equal(a, b))`: through casts and names
    if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr in ("eq", "equal"):
        module = ctx.imports.qualname(m.func) is not None
        if module and len(m.args) == 2:
            left, right = m.args  # `torch.eq(idx, idx_all)`
        elif not module and len(m.args) == 1:
            left, right = m.func.value, m.args[0]  # `idx.eq(idx_all)`
        else:
            return False
    elif isinstance(m, ast.Compare) and len(m.ops) == 1 and isinstance(m.ops[0], ast.Eq):
        left, right = m.left, m.comparators[0]
    else:
        return False
    base = ast.dump(strip_wrappers(ctx, left))
    if base == ast.dump(strip_wrappers(ctx, right)):
        return True  # `x == x` (CORL's `num_vals`): every entry that is not NaN, 0 only for an empty x
    whole = ctx.resolve(right)
    for node in bounded_walk(whole, 60):
        # `idx.t()`, `idx.T`, `idx.transpose(0, 1)` inside the other side
        if isinstance(node, ast.Attribute) and node.attr == "T" and ast.dump(node.value) == base:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("t", "transpose", "permute") and ast.dump(node.func.value) == base:
            return True
        if isinstance(node, ast.Name) and node is not whole and _gathers(ctx, ctx.resolve(node), base):
            return True  # `ids_all = GatherLayer.apply(ids).flatten(0, 1)`: every rank's ids, this one's too
    return False


def _gathers(ctx: Analysis, value: ast.expr, base: str) -> bool:
    """Is `value` gathered from every rank with `base` as this rank's part (`all_gather(ids)`,
    `concat_all_gather(ids)`, `GatherLayer.apply(ids)`)?"""
    for node in bounded_walk(value, 40):
        if isinstance(node, ast.Call) and any(ast.dump(a) == base for a in node.args):
            name = callee_name(node.func) or ""
            owner = node.func.value if isinstance(node.func, ast.Attribute) else None
            if "gather" in name.lower() or (name == "apply" and "gather" in (callee_name(owner) or "").lower()):
                return True
    return False


def counts_row_maxima(ctx: Analysis, mask: ast.expr) -> bool:
    """`x.eq(x.max(-1)[0].unsqueeze(-1))`, `x == x.amax(-1, keepdim=True)`: the entries equal to
    their row's maximum, which the maximum itself always is (at least 1 per row)."""
    m = strip_wrappers(ctx, ctx.resolve(mask))
    if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr == "eq" and len(m.args) == 1:
        left, right = m.func.value, m.args[0]
    elif isinstance(m, ast.Compare) and len(m.ops) == 1 and isinstance(m.ops[0], ast.Eq):
        left, right = m.left, m.comparators[0]
    elif isinstance(m, ast.Call) and callee_name(m.func) == "equal" and len(m.args) == 2:
        left, right = m.args  # `tf.equal(abs_grad, tf.reduce_max(abs_grad, axis, keepdims=True))`
    else:
        return False
    base = ast.dump(strip_wrappers(ctx, ctx.resolve(left)))
    sides = [right]
    for node in bounded_walk(right, 40):
        value = ctx.value_of(node) if name_key(node) is not None else None
        if value is not None:
            sides.append(value)  # `max_predictions = predictions.max(-1)[0]`
    for side in sides:
        for node in bounded_walk(side, 40):
            oc = ctx.op(node) if isinstance(node, ast.Call) else None
            if oc is not None and oc.op in ("max", "amax") and oc.input is not None \
                    and ast.dump(strip_wrappers(ctx, ctx.resolve(oc.input))) == base:
                return True
    return False
