"""Divisions the code around them guards in a spelling other than `n == 0` (NG401's exceptions).

A count compared with 0 before the division (`if n == 0: return`) is read by the walk. These
guards say the same in other words: the size of what the mask selects is checked, or each
part of a union is; the division runs inside `for _ in range(n)`, whose body needs n >= 1.
"""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import conditions_at
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, callee_name, const_value


def count_checked(ctx: Analysis, mask: ast.expr) -> bool:
    """Is the mask's count compared with 0 in another spelling: the size of what it selects
    (`pos_pred = pred[pos_inds]`, then `if pos_pred.nelement() == 0:`, CornerNet's focal loss),
    or, for a union, the count of each part (`if gt.sum() == 0 and fg.sum() == 0: return 1`,
    then `/ (gt | fg).sum()`, DAVIS' Jaccard index)?"""
    m = strip_wrappers(ctx, ctx.resolve(mask))
    parts = [m.left, m.right] if isinstance(m, ast.BinOp) and isinstance(m.op, ast.BitOr) else \
        list(m.args) if isinstance(m, ast.Call) and callee_name(m.func) == "logical_or" and len(m.args) == 2 else []
    if parts:
        return all(isinstance(p, ast.Name) and ctx.zero_checked(p) for p in (strip_wrappers(ctx, p) for p in parts))
    if not isinstance(mask, ast.Name):
        return False
    s = ctx.scope
    while s is not None:
        for key in s.zero_checked:
            values = s.bindings.get(key, [])
            if len(values) == 1 and isinstance(values[0], ast.Subscript) \
                    and isinstance(values[0].slice, ast.Name) and values[0].slice.id == mask.id:
                return True
        s = s.parent
    return False


def inside_a_loop_of(ctx: Analysis, node: ast.AST, den: ast.expr) -> bool:
    """Is the division inside `for _ in range(n)` (or `range(0, n)`) with `n` the divisor, never
    rebound in the loop? The body runs only when n >= 1 (d2l's anchor assignment)."""
    key = name_key(den)
    if key is None:
        return False
    for loop in bounded_walk(ctx.scope.node, 4000):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call) \
                or not isinstance(loop.iter.func, ast.Name) or loop.iter.func.id != "range" or loop.iter.keywords:
            continue
        args = loop.iter.args
        if not (len(args) == 1 or (len(args) == 2 and const_value(args[0]) == 0)) or name_key(args[-1]) != key:
            continue
        body = [n for stmt in loop.body for n in ast.walk(stmt)]
        rebound = any(isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store)
                      and name_key(n) == key for n in body)  # assigned, a loop target, `n -= 1`
        if not rebound and any(n is node for n in body):
            return True
    return False


def selected_where_nonzero(ctx: Analysis, den: ast.expr) -> bool:
    """Is the divisor the entries of a count that are not 0: `n[n > 0]`, `n[n != 0]`, or `n[idx]`
    with `idx = (n != 0).nonzero().squeeze(1)` (`torch.where(n > 0)[0]`, `np.flatnonzero(n)`)?
    Transformers4Rec's recall divides by the relevant counts of the rows that have some."""
    d = strip_wrappers(ctx, den)
    value = ctx.value_of(d) if name_key(d) is not None else d
    if not isinstance(value, ast.Subscript):
        return False
    counts = ast.dump(strip_wrappers(ctx, value.value))
    index = value.slice
    for _ in range(3):  # through the names holding the index
        if not isinstance(index, ast.Name):
            break
        held = ctx.value_of(index)
        if held is None:
            return False
        index = held
    for node in bounded_walk(index, 60):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.NotEq, ast.Gt)) \
                and const_value(node.comparators[0]) == 0 \
                and ast.dump(strip_wrappers(ctx, node.left)) == counts:
            return True  # `n != 0`, `n > 0`
        if isinstance(node, ast.Call) and callee_name(node.func) in ("nonzero", "flatnonzero", "argwhere"):
            subject = node.args[0] if node.args else node.func.value if isinstance(node.func, ast.Attribute) else None
            if subject is not None and ast.dump(strip_wrappers(ctx, subject)) == counts:
                return True  # `n.nonzero()`, `np.flatnonzero(n)`: where n is not 0
    return False


def only_compared(ctx: Analysis, node: ast.AST) -> bool:
    """Is the division, through arithmetic only, a side of a comparison
    (`(1 - n_ignored / n_tokens) > min_ratio`)? A NaN compares False and an inf compares as
    infinity: the test gets an answer, and no NaN is left in any value."""
    key = "compared_operands"
    if key not in ctx.memo:
        compared: set[int] = set()
        for cmp in bounded_walk(ctx.tree, 200000):
            if not isinstance(cmp, ast.Compare):
                continue
            stack: list[ast.AST] = [cmp.left, *cmp.comparators]
            while stack:
                e = stack.pop()
                compared.add(id(e))
                if isinstance(e, ast.BinOp):
                    stack.extend((e.left, e.right))
                elif isinstance(e, ast.UnaryOp):
                    stack.append(e.operand)
        ctx.memo[key] = compared
    return id(node) in ctx.memo[key]  # type: ignore[operator]


def at_least_a_checked_part(ctx: Analysis, num: ast.expr, den: ast.expr) -> bool:
    """`inter = pred[gt].sum()`, `if inter == 0: ... else: inter / np.count_nonzero(gt)`: the
    numerator sums a selection by the mask (or a product with it) and is compared with 0, and a
    sum over an empty selection is 0, so where it is not, the mask counts at least one entry."""
    if not isinstance(num, ast.Name) or not ctx.zero_checked(num):
        return False
    value = ctx.value_of(num)
    total = ctx.op(strip_wrappers(ctx, value)) if value is not None else None
    counted = ctx.op(strip_wrappers(ctx, den))
    if total is None or counted is None or total.input is None or counted.input is None \
            or total.op not in ("sum", "count_nonzero") or counted.op not in ("sum", "count_nonzero"):
        return False
    mask = name_key(strip_wrappers(ctx, counted.input))
    part = strip_wrappers(ctx, total.input)
    if isinstance(part, ast.Subscript):
        parts = [part.value, *(part.slice.elts if isinstance(part.slice, ast.Tuple) else [part.slice])]
    elif isinstance(part, ast.BinOp) and isinstance(part.op, (ast.Mult, ast.BitAnd)):
        parts = [part.left, part.right]
    else:
        return False
    return mask is not None and any(name_key(strip_wrappers(ctx, p)) == mask for p in parts)


def union_with_a_tested_part(ctx: Analysis, den: ast.expr, node: ast.AST) -> bool:
    """`/ union` with `union = logical_or(pred, gt).sum()`, under `if gt.any():` (WinCLIP's
    per-image IoU): a union holds every entry of its parts, so one part tested non-empty makes it
    non-empty."""
    total = ctx.last_value(den) if name_key(den) is not None else den
    oc = ctx.op(strip_wrappers(ctx, total)) if total is not None else None
    if oc is None or oc.op not in ("sum", "count_nonzero") or oc.input is None:
        return False
    m = strip_wrappers(ctx, oc.input)
    if isinstance(m, ast.BinOp) and isinstance(m.op, ast.BitOr):
        parts = [m.left, m.right]
    elif isinstance(m, ast.Call) and callee_name(m.func) == "logical_or" and len(m.args) == 2:
        parts = list(m.args)
    else:
        return False
    spelled = {ast.dump(strip_wrappers(ctx, p)) for p in parts}
    for test, holds in conditions_at(ctx, ctx.scope.node, getattr(node, "lineno", 0)):
        if not holds:
            continue
        for call in bounded_walk(test, 40):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "any" \
                    and not call.args and ast.dump(strip_wrappers(ctx, call.func.value)) in spelled:
                return True
    return False
