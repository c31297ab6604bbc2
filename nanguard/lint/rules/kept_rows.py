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
from nanguard.lint.patterns import positions_from_zero, source_of
from nanguard.lint.rules.division_counts import holds_a_ones_block
from nanguard.lint.rules.passed_masks import called_in_module, every_value_keeps_rows, under_none_test
from nanguard.lint.scope import Scope
from nanguard.lint.syntax import bounded_walk, callee_name, const_value


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


def _cleared_windows(ctx: Analysis, attr: str) -> bool:
    """`m = np.ones(...)`, `for iy in range(n): for ix in range(n): m[iy, ix, lo(iy):hi(iy),
    lo(ix):hi(ix)] = 0`, `self.attr = nn.Parameter(torch.from_numpy(m).byte())` (mmdet's
    GeneralizedAttention): each query clears the keys of a window around its own position."""
    for value in ctx.self_assigned.get(attr, ()):
        scope = next((s for c, s, _ng in ctx.calls if c is value), None)
        if scope is not None and any(isinstance(n, ast.Name) and _ones_cleared_in_loops(ctx, n.id, scope)
                                     for n in bounded_walk(value, 40)):
            return True
    return False


def _ones_cleared_in_loops(ctx: Analysis, name: str, scope: Scope) -> bool:
    values = scope.bindings.get(name, [])
    changes = scope.mutations.get(name, [])
    if len(values) != 1 or not isinstance(values[0], ast.Call) or callee_name(values[0].func) != "ones" \
            or not changes:
        return False
    targets = {n.target.id for n in bounded_walk(scope.node, 4000)
               if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}
    for value in changes:
        index = ctx.mutation_index.get(id(value))
        parts = index.elts if isinstance(index, ast.Tuple) else [index] if index is not None else []
        rows = [p for p in parts if isinstance(p, ast.Name)]
        windows = [p for p in parts if isinstance(p, ast.Slice)]
        if const_value(value) not in (0, False) or not rows or any(p.id not in targets for p in rows) \
                or not all(any(isinstance(x, ast.Name) and x.id in targets for x in ast.walk(w)) for w in windows):
            return False  # not 0 over a window around the loop's own position
    return True


def keeps_every_row(ctx: Analysis, mask: ast.expr | None, depth: int = 5) -> bool:
    """Does `mask` (a fill's condition or index) leave an entry in every row: causal, top-k,
    identity or one-hot? Also when the name it is made from holds such a mask in every value it
    is given, or every call in the module passes one for it (`passed_masks`)."""
    if mask is None or _drops_first_columns(mask):
        return False
    if _keeps_as_written(ctx, mask) or _fills_outside_a_ones_block(ctx, mask):
        return True
    # `~attn_mask[:, None]` fills where the mask is False: a value passed for it is read the other
    # way round, so only calls that leave it at None (no mask at all) count
    inverted = isinstance(mask, ast.UnaryOp) and isinstance(mask.op, ast.Invert)
    base = _base_name(mask.operand if isinstance(mask, ast.UnaryOp) and inverted else mask)
    return base is not None and depth > 0 and ctx.value_of(base) is None \
        and every_value_keeps_rows(ctx, base, ctx.scope, _no_mask if inverted else _keeps_in, depth,
                                   _filled_only_if_given(ctx, base, mask))


def _fills_outside_a_ones_block(ctx: Analysis, cond: ast.expr) -> bool:
    """`masked_fill(mask == 0, -inf)` (or `~mask`, `logical_not(mask)`) where `mask = cat([ones(B,
    N), q_mask], 1)` (ViT-Adapter's UniPerceiver): the fill spares the block of ones in every row."""
    kept = None
    if isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq) \
            and const_value(cond.comparators[0]) == 0:
        kept = cond.left
    elif isinstance(cond, ast.UnaryOp) and isinstance(cond.op, (ast.Invert, ast.Not)):
        kept = cond.operand
    elif isinstance(cond, ast.Call) and callee_name(cond.func) == "logical_not" and len(cond.args) == 1:
        kept = cond.args[0]
    while isinstance(kept, ast.Call) and isinstance(kept.func, ast.Attribute) and kept.func.attr == "bool" \
            and not kept.args:
        kept = kept.func.value  # `~mask.bool()`
    return kept is not None and holds_a_ones_block(ctx, kept)


def defaults_to_kept_rows(ctx: Analysis, mask: ast.AST | None) -> bool:
    """Is `mask` read from a parameter that the function itself, given None, replaces with a mask
    keeping every row (`if attn_mask is None: attn_mask = TriangularCausalMask(B, L)`, the
    Informer family's attention), while no call in this module passes it? Then a mask that empties a
    row can only come from another module's caller: possible, not certain (README)."""
    base = _base_name(mask) if isinstance(mask, ast.expr) else None
    if base is None:
        return False
    owner, values = ctx.lookup(base.id, ctx.scope)
    if owner is None or values.count(None) != 1 or not isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    made = [v for v in values if v is not None]
    return bool(made) and all(under_none_test(ctx, owner.node, v, base.id, ast.Is) and _keeps_in(ctx, v, owner, 3)
                              for v in made) and not called_in_module(ctx, owner)


def _filled_only_if_given(ctx: Analysis, base: ast.Name, mask: ast.expr) -> bool:
    """Is the fill under `if base is not None:` (so a None mask fills nothing)?"""
    root = ctx.scope.node
    return hasattr(root, "body") and under_none_test(ctx, root, mask, base.id, ast.IsNot)


def _no_mask(ctx: Analysis, expr: ast.expr, scope: Scope, depth: int) -> bool:
    return False


def _drops_first_columns(mask: ast.expr) -> bool:
    """`causal[a:b, 1:k]`: a causal mask keeps key 0 in every row; a slice of columns that does
    not start at 0 can leave a row nothing."""
    for node in bounded_walk(mask, 40):
        if isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            last = parts[-1]
            if isinstance(last, ast.Slice) and last.lower is not None \
                    and not (isinstance(last.lower, ast.Constant) and last.lower.value == 0):
                return True
    return False


def _keeps_in(ctx: Analysis, expr: ast.expr, scope: Scope, depth: int) -> bool:
    saved = ctx.scope
    ctx.scope = scope
    try:
        return keeps_every_row(ctx, expr, depth)
    finally:
        ctx.scope = saved


def _base_name(expr: ast.expr) -> ast.Name | None:
    """The name a mask is read from: `mask`, `mask[:n, :n]`, `mask.bool()`, `mask.to(x.device)`."""
    for _ in range(8):
        if isinstance(expr, ast.Name):
            return expr if expr.id not in ("self", "cls") else None
        if isinstance(expr, (ast.Subscript, ast.Attribute)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return None
    return None


def _keeps_as_written(ctx: Analysis, mask: ast.expr) -> bool:
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
                    and (_registered_causal(ctx, node.attr) or _cleared_windows(ctx, node.attr)):
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
    smaller, larger = (compare.left, compare.comparators[0]) if isinstance(compare.ops[0], ast.Lt) \
        else (compare.comparators[0], compare.left)
    # `q_pos < k_pos` masks the keys after each query; with keys from 0 (`arange(K)`) key 0 is
    # kept for any query position, so the queries may start anywhere (a KV cache's
    # `arange(pos, pos + q)`)
    return positions_from_zero(ctx, larger) and (positions_from_zero(ctx, smaller) or _every_arange(ctx, smaller))


def _every_arange(ctx: Analysis, expr: ast.expr) -> bool:
    src = source_of(ctx, expr)
    if isinstance(src, ast.Name):
        _scope, values = ctx.lookup(src.id)
        return bool(values) and all(v is not None and _is_arange(source_of(ctx, v)) for v in values)
    return _is_arange(src)


def _is_arange(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and callee_name(expr.func) == "arange" and bool(expr.args)


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
