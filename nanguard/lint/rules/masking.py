"""Softmax over scores masked with -inf (NG701)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.dataflow import nan_handled_next, repaired_after_a_nan_test
from nanguard.lint.model import POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import is_mask_like
from nanguard.lint.rules.base import checks
from nanguard.lint.rules.kept_rows import defaults_to_kept_rows, keeps_every_row
from nanguard.lint.rules.where import where_parts
from nanguard.lint.rules.where_singular import prior_values
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, const_value, is_neg_inf

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
masked row a uniform distribution over padding. Causal masks (`triu`/`tril`, a buffer
registered from `torch.tril`, names with "causal"/"subsequent") keep the diagonal, an identity
mask (`torch.eye(n)`: self-loops out of a graph attention) and a one-hot mask (`F.one_hot(labels)`,
ones scattered into zeros: the label's entry) keep the rest of the row, and top-k /
top-p sampling masks keep at least one logit: none empties a row, and none is reported.
A fill after the softmax, or in the other arm of an `if`, is not "masked then softmaxed".
Not reported when the code keeps a fully masked row out: the mask keeps a row with nothing
left (`keep = keep | ~keep.any(-1, keepdim=True)`), or a where on whether the row has an
entry selects the result (`torch.where(keep.any(-1, keepdim=True), attn, 0)` after a
masked_fill or where fill, which pass no gradient to the filled entries).
Nor for `-inf` written to a range of the row or a position named by an attribute or an id
(`logits[k, :eot] = -inf`, `logits[:, self.tokenizer.no_timestamps] = -inf`,
`logits[:, mask_token_id] = -inf`, the logit
processors of a decoder: the rest of the row survives), through a mask made all True with chosen entries
cleared (`m = torch.ones(V, dtype=torch.bool); m[allowed] = False`: the allowed survive), or
where the fill spares a block of ones concatenated into the keys (`masked_fill(cat([ones(B, N),
q_mask], 1) == 0, -inf)`: the N kept keys survive).
A padding mask can mask a whole row (an empty sequence, a query with no valid key): the
findings are certain.""",
)

RULES = [NEG_INF_SOFTMAX]

def _fill(ctx: Analysis, node: ast.AST) -> ast.AST | None:
    """The -inf fill performed by `node` (masked_fill/where with -inf, non-causal), if any."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for term in (node.left, node.right):
            log = ctx.op(term)
            # `vector + mask.log()` (allennlp's masked_log_softmax): log 0 = -inf where the mask is 0.
            if log is not None and log.op == "log" and log.input is not None and is_mask_like(ctx, log.input) \
                    and not keeps_every_row(ctx, log.input):
                return node
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "masked_fill_" and len(node.args) == 2:
        if is_neg_inf(node.args[1]) and not keeps_every_row(ctx, node.args[0]):
            return node
        return None
    oc = ctx.op(node)
    if oc is None:
        return None
    if oc.op == "masked_fill":
        value = oc.operand(2, "value")
        if is_neg_inf(value) and not keeps_every_row(ctx, oc.operand(1, "mask")):
            return node
    elif oc.op == "where":
        if oc.method:
            cond, branches = oc.operand(1, "condition"), [oc.operand(2, "other", "y")]
        else:
            cond, branches = oc.operand(0, "condition"), [oc.operand(1, "input", "x"), oc.operand(2, "other", "y")]
        if any(is_neg_inf(b) for b in branches if b is not None) and not keeps_every_row(ctx, cond):
            return node
    return None


_TRUE_FACTORIES = frozenset({"ones", "ones_like"})
# A name for one position of the row: `mask_token_id`, `eos_idx`, `pad_index` (not `ids`, a list).
_ONE_ID = re.compile(r"(^|_)(id|idx|index)$", re.IGNORECASE)


def _keeps_a_known_part(ctx: Analysis, index: ast.AST | None) -> bool:
    """Does `s[index] = -inf` keep a part of every row that the code names, rather than what a
    mask from data leaves: a range of the row (`logits[k, :eot]`, `logits[:, begin:]`: the rest of
    the row survives), or a mask made all True with chosen entries cleared (`m = torch.ones(V,
    dtype=torch.bool); m[keep_ids] = False; logits[:, m] = -inf`: the chosen entries survive)?"""
    if index is None:
        return False
    last = index.elts[-1] if isinstance(index, ast.Tuple) and index.elts else index
    if isinstance(last, ast.Slice) and (last.lower is not None or last.upper is not None):
        return True
    if isinstance(last, ast.Constant) and isinstance(last.value, int) and not isinstance(last.value, bool):
        return True
    if isinstance(last, ast.Attribute) and not is_mask_like(ctx, last):
        return True  # `logits[:, self.tokenizer.no_timestamps] = -inf`: one position, by its id
    if isinstance(last, ast.Name) and _ONE_ID.search(last.id):  # `mask_token_id` is an id, not a mask
        return True  # `logits[:, mask_token_id] = -inf`: one token, the rest of the row survives
    if isinstance(last, ast.BinOp) and isinstance(last.op, ast.Add) \
            and (isinstance(last.left, ast.List) or isinstance(last.right, ast.List)):
        last = last.left if isinstance(last.left, ast.List) else last.right  # `encode(" ") + [eos]`
    if isinstance(last, ast.List) or (isinstance(last, ast.Call) and isinstance(last.func, ast.Name)
                                      and last.func.id in ("list", "tuple", "sorted")):
        return True  # `logits[:, list(tokens_to_suppress)] = -inf`: chosen token ids, the rest survive
    key = name_key(last)
    if key is None:
        return False
    scope, values = ctx.lookup(key)
    made = [v for v in values if v is not None]
    if scope is None or len(made) != 1 or not isinstance(made[0], ast.Call):
        return False
    func = made[0].func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    cleared = [m for m in scope.mutations.get(key, ()) if isinstance(m, ast.Constant) and m.value is False]
    return name in _TRUE_FACTORIES and bool(cleared)


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
                index = ctx.mutation_index.get(id(m))
                if not keeps_every_row(ctx, index) and not _keeps_a_known_part(ctx, index):  # type: ignore[arg-type]
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
    memo_key = f"if_else_arms:{id(ctx.scope.node)}"
    if memo_key not in ctx.memo:  # one walk per scope: (line of the if, its two arms' line spans)
        ctx.memo[memo_key] = [(node.lineno, [(s[0].lineno, s[-1].end_lineno) for s in (node.body, node.orelse)])
                              for node in ast.walk(ctx.scope.node) if isinstance(node, ast.If) and node.orelse]
    for line, arms in ctx.memo[memo_key]:
        if line <= fl:
            where = [next((i for i, (lo, hi) in enumerate(arms) if lo <= x <= hi), None) for x in (fl, al)]
            if None not in where and where[0] != where[1]:
                return False
    return True


_ROW_TESTS = frozenset({"any", "all", "reduce_any", "reduce_all"})


def _tests_rows(ctx: Analysis, expr: ast.AST | None, depth: int = 2) -> bool:
    """Does `expr` (or the last value of a name in it) ask whether a row has any entry left:
    `keep.any(-1)`, `~pad.all(-1)`, `torch.any(m, dim)`, `mask.sum(-1) > 0`?"""
    if expr is None:
        return False
    for node in bounded_walk(expr, 80):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _ROW_TESTS:
                return True
        if isinstance(node, ast.Compare) and any(getattr(ctx.op(n), "op", "") in ("sum", "count_nonzero")
                                                 for n in (node.left, *node.comparators)):
            return True
        if depth > 0 and name_key(node) is not None:
            value = ctx.last_value(node)
            if value is not None and _tests_rows(ctx, value, depth - 1):
                return True
    return False


def _fill_mask(ctx: Analysis, fill: ast.AST) -> ast.AST | None:
    """The mask or condition a -inf fill selects with (None for `x + mask.log()`)."""
    if isinstance(fill, ast.Call):
        oc = ctx.op(fill)
        if oc is not None and oc.op == "masked_fill":
            return oc.operand(1, "mask")
        if oc is not None and oc.op == "where":
            return oc.operand(1, "condition") if oc.method else oc.operand(0, "condition")
        if isinstance(fill.func, ast.Attribute) and fill.func.attr == "masked_fill_" and fill.args:
            return fill.args[0]
        return None
    return ctx.mutation_index.get(id(fill)) if not isinstance(fill, ast.BinOp) else None


def _kept_where_true(ctx: Analysis, fill: ast.AST) -> bool | None:
    """On which side of its condition a fill keeps the scores: False for masked_fill(m, -inf)
    (kept where m is False), the side of the finite branch for where(c, s, -inf)."""
    oc = ctx.op(fill) if isinstance(fill, ast.Call) else None
    if oc is None:
        return False if isinstance(fill, ast.Call) else None  # `masked_fill_`
    parts = where_parts(oc)
    if parts is None:
        return None
    finite = [kept for branch, kept in parts[1] if not is_neg_inf(branch)]
    return finite[0] if len(finite) == 1 else None


def _side_of(ctx: Analysis, select: ast.Call, node: ast.AST) -> bool | None:
    """On which side of its condition `select` (a where/masked_fill) keeps `node`'s value."""
    oc = ctx.op(select)
    parts = where_parts(oc) if oc is not None else None
    if parts is None:
        return None
    for branch, kept in parts[1]:
        for n in bounded_walk(branch, 80):
            if n is node:
                return kept
            if name_key(n) is not None and any(node is m for v in prior_values(ctx, n, select)
                                               for m in bounded_walk(v, 200)):
                return kept
    return None


def _row_guarded(ctx: Analysis, fill: ast.AST, softmax: ast.AST) -> bool:
    """Is a fully masked row kept out: the fill's mask keeps a row with nothing left
    (`keep | ~keep.any(-1, keepdim=True)`), or the softmax is selected by a where on whether the
    row has an entry (`where(keep.any(-1, keepdim=True), attn, 0)`) or by a select on the fill's
    own condition (`attn.masked_fill(m, 0)` after `s.masked_fill(m, -inf)`), which replaces the
    whole of a fully masked row? A select (masked_fill, where, `s[m] = -inf`) passes no gradient
    to a filled entry, so the NaN row's gradient stops there; after `x + mask.log()` it would
    not, and only the first guard counts."""
    mask = _fill_mask(ctx, fill)
    if mask is None:
        return False
    if _tests_rows(ctx, mask):
        return True
    for select, cond in ctx.selected_by.get(id(softmax), []):
        if _tests_rows(ctx, cond):
            return True
        if ast.dump(cond) != ast.dump(mask):
            continue
        side = _kept_where_true(ctx, fill)
        if side is not None and side == _side_of(ctx, select, softmax):
            return True
    return _refilled_in_place(ctx, fill, mask, softmax)


def _refilled_in_place(ctx: Analysis, fill: ast.AST, mask: ast.AST, softmax: ast.AST) -> bool:
    """`out = softmax(s.masked_fill(m, -inf))` then `out.masked_fill_(m, 0)` (DeBERTa's XSoftmax):
    the in-place select on the fill's own condition replaces every entry of a fully masked row."""
    key = ctx.assigned_to.get(id(softmax))
    if key is None or _kept_where_true(ctx, fill) is not False:
        return False
    spelled, line = ast.dump(mask), softmax.lineno  # type: ignore[attr-defined]
    for call, _scope, _nograd in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "masked_fill_" and name_key(func.value) == key \
                and call.lineno > line and len(call.args) == 2 and ast.dump(call.args[0]) == spelled \
                and const_value(call.args[1]) is not None:
            return True
    return False


@checks("NG701")
def check_masked_softmax(ctx: Analysis, oc: OpCall) -> None:
    x = oc.input
    if x is None or id(oc.node) in ctx.sanitised:
        return
    source = neg_inf_source(ctx, x, oc.node)
    if source is None or _row_guarded(ctx, source, oc.node) or repaired_after_a_nan_test(ctx, oc.node):
        return
    if not isinstance(source, ast.BinOp) and nan_handled_next(ctx, oc.node):
        # `attn = softmax(s.masked_fill(m, -inf))`, then `attn = nan_to_num(attn, nan=0.0)`: the value
        # is cleaned, and the fill passes no gradient to the entries it overwrote. An added
        # `mask.log()` does: the empty row's NaN gradient reaches the scores (kept).
        return
    where = f" (filled on line {source.lineno})" if source.lineno != oc.node.lineno else ""  # type: ignore
    fn = "nanguard.log_softmax" if oc.op == "log_softmax" else "nanguard.softmax"
    # `if attn_mask is None: attn_mask = TriangularCausalMask(B, L)`: another module's mask, if any
    confidence = POSSIBLE if defaults_to_kept_rows(ctx, _fill_mask(ctx, source)) else None
    ctx.report(NEG_INF_SOFTMAX, oc.node, f"`{oc.op}` over scores masked with -inf{where}", "softmax_masked_row",
               op=oc.op, fn=fn, confidence=confidence)


ON_CALL = {"softmax": [check_masked_softmax], "log_softmax": [check_masked_softmax]}
