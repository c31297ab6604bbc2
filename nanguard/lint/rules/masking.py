"""Softmax over scores masked with -inf (NG701)."""

from __future__ import annotations

import ast
import re

from nanguard.lint import project
from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import dominates
from nanguard.lint.model import VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import is_mask_like
from nanguard.lint.rules.base import checks
from nanguard.lint.rules.where import where_parts
from nanguard.lint.rules.where_singular import prior_values
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, callee_name, const_value, is_neg_inf

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
Nor for `-inf` written to a range of the row or a position named by an attribute
(`logits[k, :eot] = -inf`, `logits[:, self.tokenizer.no_timestamps] = -inf`, the logit
processors of a decoder: the rest of the row survives) or through a mask made all True with chosen entries
cleared (`m = torch.ones(V, dtype=torch.bool); m[allowed] = False`: the allowed survive).
A padding mask can mask a whole row (an empty sequence, a query with no valid key): the
findings are certain.""",
)

RULES = [NEG_INF_SOFTMAX]

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


def _registered_causal(ctx: Analysis, attr: str) -> bool:
    """`self.register_buffer("bias", torch.tril(...))` (nanoGPT): `self.bias` is a causal mask."""
    for call, scope, _ng in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "register_buffer" and len(call.args) >= 2:
            name = call.args[0]
            if isinstance(name, ast.Constant) and name.value == attr:
                values = [call.args[1]]
                for n in bounded_walk(call.args[1], 60):
                    if isinstance(n, ast.Name):  # `mask = torch.tril(...)`, then `register_buffer("mask", mask.view(...))`
                        values.extend(v for v in ctx.lookup(n.id, scope)[1] if v is not None)
                return any(isinstance(n, (ast.Name, ast.Attribute)) and _CAUSAL.search(
                    n.id if isinstance(n, ast.Name) else n.attr) for v in values for n in bounded_walk(v, 60))
    return False


def _causal(ctx: Analysis, mask: ast.expr | None) -> bool:
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
    return False


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


_TRUE_FACTORIES = frozenset({"ones", "ones_like"})


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
                if not _causal(ctx, index) and not _keeps_a_known_part(ctx, index):  # type: ignore[arg-type]
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
    if source is None or _row_guarded(ctx, source, oc.node):
        return
    where = f" (filled on line {source.lineno})" if source.lineno != oc.node.lineno else ""  # type: ignore
    fn = "nanguard.log_softmax" if oc.op == "log_softmax" else "nanguard.softmax"
    ctx.report(NEG_INF_SOFTMAX, oc.node, f"`{oc.op}` over scores masked with -inf{where}", "softmax_masked_row",
               op=oc.op, fn=fn)


ON_CALL = {"softmax": [check_masked_softmax], "log_softmax": [check_masked_softmax]}
