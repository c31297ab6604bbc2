"""Signs and bounds: is this value <= 0 (so exp cannot overflow), >= 0, or max-subtracted?

`sign_of` reads the sign of an expression from its arithmetic and ops (`-0.5 * (x / s) ** 2`
is <= 0, `x ** 2 / (2 * s ** 2)` >= 0); `nonpositive_by_construction` adds what the code
around it shows (a max subtracted, also in place or through tuple unpacking; an enclosing
`if a >= b`; a log-probability). Like every guard here it errs on the side of not matching.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nanguard.lint.analysis import Analysis
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import _bounded_walk, const_value, last_identifier, mult_factors


def is_max_like(ctx: Analysis, expr: ast.expr, depth: int = 2) -> bool:
    """Something that contains a maximum or logsumexp (`x.max(-1, keepdim=True)[0]`, `m`, `x_max`),
    also reshaped under another name (flair's `m_expanded = m.unsqueeze(dim).expand_as(x)`)."""
    for node in _bounded_walk(expr, 60):
        oc = ctx.op(node) if isinstance(node, ast.Call) else None
        if oc is not None and oc.op in ("max", "logsumexp"):
            return True
        ident = last_identifier(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if ident is not None and ("max" in ident.lower() or "logsumexp" in ident.lower()
                                  or ident in ("m", "mx", "lse", "c", "shift")):
            return True
        if isinstance(node, ast.Name):
            value = ctx.value_of(node)  # `lse = jax.nn.logsumexp(x)` under another name
            if isinstance(value, ast.Call) and getattr(ctx.op(value), "op", "") in ("max", "logsumexp"):
                return True
            inner = strip_wrappers(ctx, value) if value is not None else None
            if depth > 0 and inner is not value and isinstance(inner, (ast.Name, ast.Attribute)) \
                    and is_max_like(ctx, inner, depth - 1):
                return True
            scope, _ = ctx.lookup(node.id)
            if scope is not None and any(getattr(ctx.op(c), "op", "") in ("max", "maximum")
                                         for c in scope.unpacked.get(node.id, ())):
                return True  # `s, _ = torch.max(x, dim, keepdim=True)`
        if isinstance(node, ast.Attribute) and node.attr == "values":
            return True
    return False


_NONNEGATIVE_OPS = frozenset({"abs", "square", "exp", "relu", "softplus", "sigmoid", "softmax", "norm", "sqrt"})


def sign_of(ctx: Analysis, expr: ast.expr, depth: int = 5) -> int:
    """+1 when `expr` is visibly >= 0, -1 when visibly <= 0, 0 when unknown: `-0.5 * (x / s) ** 2`
    is -1 (a Gaussian's exponent), `x ** 2 / (2 * s ** 2)` is +1."""
    if depth < 0:
        return 0
    v = const_value(expr)
    if v is not None:
        return 1 if v >= 0 else -1
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return -sign_of(ctx, expr.operand, depth)
    if isinstance(expr, ast.BinOp):
        op = expr.op
        if isinstance(op, ast.Pow):
            p = const_value(expr.right)
            return 1 if p is not None and p == int(p) and int(p) % 2 == 0 else 0
        if isinstance(op, (ast.Mult, ast.Div)):
            return _product_sign(ctx, expr, depth)
        a, b = sign_of(ctx, expr.left, depth - 1), sign_of(ctx, expr.right, depth - 1)
        if isinstance(op, ast.Add):
            return a if a == b else 0
        if isinstance(op, ast.Sub):
            return a if a == -b else 0
        return 0
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args \
            and expr.func.attr in ("neg", "negative") and name_key(expr.func.value) not in ctx.imports.aliases:
        return -sign_of(ctx, expr.func.value, depth)  # `x.abs().neg()`
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("mul", "multiply") \
            and len(expr.args) == 1 and not expr.keywords and name_key(expr.func.value) not in ctx.imports.aliases:
        # `d.pow(2).mul(-2)` (Wang & Isola's uniformity loss): the sign of a product
        return sign_of(ctx, expr.func.value, depth - 1) * sign_of(ctx, expr.args[0], depth - 1)
    if isinstance(expr, (ast.Call, ast.Subscript)):
        inner = strip_wrappers(ctx, expr)  # `g.unsqueeze(0)`, `x.float()`, `x[:, None]`: same sign
        if inner is not expr:
            return sign_of(ctx, inner, depth)
    oc = ctx.op(expr)
    if oc is not None:
        if oc.op in _NONNEGATIVE_OPS:
            return 1
        if oc.op == "where":
            return _where_sign(ctx, oc, depth)
        if oc.op == "pow":
            p = const_value(oc.operand(1, "exponent", "y"))
            return 1 if p is not None and p == int(p) and int(p) % 2 == 0 else 0
        return 0
    if name_key(expr) is None:
        return 0
    # A name reassigned before this use (`x = tf.math.abs(x)` then `exp(-x)`): its last value.
    value = ctx.value_of(expr) or ctx.last_value(expr)
    return sign_of(ctx, value, depth - 1) if value is not None and value is not expr else 0


def _product_sign(ctx: Analysis, expr: ast.BinOp, depth: int) -> int:
    """The sign of a product or quotient from its factors: a factor that appears an even number of
    times is a square (`x * x`, `2.0 * sigma * sigma`), the others give their own signs."""
    factors: dict[str, list] = {}
    for e in mult_factors(expr, (ast.Mult, ast.Div)):
        factors.setdefault(ast.dump(e), []).append(e)
    sign = 1
    for same in factors.values():
        if len(same) % 2:
            sign *= sign_of(ctx, same[0], depth - 1)
    return sign


def _where_sign(ctx: Analysis, oc: OpCall, depth: int) -> int:
    """`where(c, a, b)`: the common sign of its branches, each read under its side of the
    condition; `where(x >= 0, x, -x)` (an abs by hand) is +1, `where(x < 0, x, -x)` is -1."""
    cond, a, b = oc.operand(0, "condition"), oc.operand(1, "x", "input"), oc.operand(2, "y", "other")
    if cond is None or a is None or b is None:
        return 0
    sa, sb = sign_of(ctx, a, depth - 1), sign_of(ctx, b, depth - 1)
    if sa == sb != 0:
        return sa
    if name_key(cond) is not None:
        cond = ctx.value_of(cond) or cond  # `positive = x >= 0` then `where(positive, x, -x)`
    refined = _sign_test(cond)
    if refined is None:
        return 0
    subject, sign = refined  # cond says: sign(subject) == sign
    dump = ast.dump(subject)

    def under(branch: ast.expr, s: int) -> int:
        if ast.dump(branch) == dump:
            return s
        if isinstance(branch, ast.UnaryOp) and isinstance(branch.op, ast.USub) and ast.dump(branch.operand) == dump:
            return -s
        return sign_of(ctx, branch, depth - 1)

    sa, sb = under(a, sign), under(b, -sign)
    return sa if sa == sb else 0


def _sign_test(cond: ast.expr) -> tuple[ast.expr, int] | None:
    """`x >= 0` / `x > 0` -> (x, +1); `x <= 0` / `x < 0` -> (x, -1); `0 < x` likewise; else None."""
    if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1):
        return None
    left, op, right = cond.left, cond.ops[0], cond.comparators[0]
    if const_value(right) == 0:
        subject, positive = left, isinstance(op, (ast.Gt, ast.GtE))
    elif const_value(left) == 0:
        subject, positive = right, isinstance(op, (ast.Lt, ast.LtE))
    else:
        return None
    if not isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        return None
    return subject, 1 if positive else -1


def nonpositive_by_construction(ctx: Analysis, expr: ast.expr) -> bool:
    """`-abs(x)`, `-x.abs()`, `x - x.max()`, `-relu(x)`, `-0.5 * (x / s) ** 2`, a `where`/`clamp(max=...)`
    result: exp cannot overflow. A name reassigned just before (`x = x - x_max`) is looked through."""
    if sign_of(ctx, expr) < 0 or _log_probability(expr) or _ordered_by_enclosing_if(ctx, expr) \
            or _max_subtracted_in_place(ctx, expr):
        return True
    last = ctx.last_value(expr) if name_key(expr) is not None and ctx.value_of(expr) is None else None
    if last is not None and last is not expr and _nonpositive(ctx, last):
        return True
    return _nonpositive(ctx, expr)


def _single_comparison_ifs(ctx: Analysis) -> list[ast.If]:
    """The current scope's single-comparison `if`s, found once."""
    key = f"sign_ifs:{id(ctx.scope.node)}"
    if key not in ctx.memo:
        ctx.memo[key] = [n for n in _bounded_walk(ctx.scope.node, 4000) if isinstance(n, ast.If)
                         and isinstance(n.test, ast.Compare) and len(n.test.ops) == 1 and n.body]
    return ctx.memo[key]  # type: ignore[no-any-return]


def _max_subtracted_in_place(ctx: Analysis, expr: ast.expr) -> bool:
    """`lw -= torch.logsumexp(lw, 0)` (or `-= lw.max()`) before `exp(lw)`."""
    key = name_key(strip_wrappers(ctx, expr))
    line = getattr(expr, "lineno", None)
    if key is None or line is None:
        return False
    scope, _ = ctx.lookup(key)
    return scope is not None and any(isinstance(n.op, ast.Sub) and n.lineno < line and is_max_like(ctx, n.value)
                                     for n in scope.augmented.get(key, ()))


def _branch_orderings(ctx: Analysis, line: int) -> Iterator[tuple[ast.expr, ast.expr, ast.If]]:
    """`(small, big, if)` for each single-comparison `if` enclosing `line` whose branch there
    makes `small` at most `big`: `a < b` or `b > a` in the body, `a >= b` in the `else`."""
    for stmt in _single_comparison_ifs(ctx):
        if not stmt.lineno < line <= (stmt.end_lineno or 0):
            continue
        test = stmt.test
        assert isinstance(test, ast.Compare)
        op = test.ops[0]
        if not stmt.body[0].lineno <= line <= (stmt.body[-1].end_lineno or 0):  # the else: negated
            op = {ast.Gt: ast.LtE(), ast.GtE: ast.Lt(), ast.Lt: ast.GtE(), ast.LtE: ast.Gt()}.get(type(op), op)
        if isinstance(op, (ast.Lt, ast.LtE)):
            yield test.left, test.comparators[0], stmt
        elif isinstance(op, (ast.Gt, ast.GtE)):
            yield test.comparators[0], test.left, stmt


def below_by_enclosing_if(ctx: Analysis, expr: ast.expr, limit: float) -> bool:
    """`x` inside `if x < 18.0:` (or `elif`, or the `else` of `if x > 18.0:`) with the constant at
    most `limit`: PyTensor's softplus branches `elif x < 18.0: np.log1p(np.exp(x))`, where exp
    cannot overflow; also `-x` inside `if x > c:` with -c at most `limit`."""
    line = getattr(expr, "lineno", None)
    if line is None:
        return False
    e = strip_wrappers(ctx, expr)
    key = ast.dump(e)
    # `-x` inside `if x > 0:` (elliot's logistic loss `1 + np.exp(-prediction)`): -x < 0
    negated = ast.dump(e.operand) if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) else None
    for small, big, stmt in _branch_orderings(ctx, line):
        bound, floor = const_value(big), const_value(small)
        if bound is not None and bound <= limit and ast.dump(small) == key \
                and not _rebound_between(ctx, small, stmt.lineno, line):
            return True
        if floor is not None and -floor <= limit and ast.dump(big) == negated \
                and not _rebound_between(ctx, big, stmt.lineno, line):
            return True
    return False


def _rebound_between(ctx: Analysis, expr: ast.expr, start: int, end: int) -> bool:
    """Is the name `expr` assigned (or changed in place) after line `start` and before `end`?"""
    key = name_key(expr)
    if key is None:
        return True  # not a plain name: nothing says the tested value is the one used
    scope, values = ctx.lookup(key)
    changes = [*values, *(scope.augmented.get(key, ()) if scope is not None else ())]
    return any(v is not None and start < getattr(v, "lineno", 0) < end for v in changes)


def _ordered_by_enclosing_if(ctx: Analysis, expr: ast.expr) -> bool:
    """`b - a` inside `if a >= b:` (or in the `else` of `if b > a:`): the branch makes it <= 0,
    as in a two-term log-sum-exp `a + log(1 + exp(b - a))`."""
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Sub)) or not hasattr(expr, "lineno"):
        return False
    wanted = (ast.dump(expr.left), ast.dump(expr.right))  # need: left <= right
    return any((ast.dump(small), ast.dump(big)) == wanted for small, big, _ in _branch_orderings(ctx, expr.lineno))


def _nonpositive(ctx: Analysis, expr: ast.expr) -> bool:
    e = strip_wrappers(ctx, ctx.resolve(expr))  # `(x - x.max()).astype(f32)` is still max-subtracted
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        inner = ctx.op(e.operand)
        if inner is not None and inner.op in ("abs", "relu", "softplus", "exp", "norm"):
            return True
        if _clipped_below(ctx, e.operand):
            return True  # `-log_alpha` after `log_alpha = tf.clip_by_value(log_alpha, -8., 8.)`: at most 8
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and (is_max_like(ctx, e.right)
                                                                    or _below_by_min_max(ctx, e.left, e.right)):
        return True
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Div, ast.Mult)) and _positive_scale(e.right) \
            and _nonpositive(ctx, e.left):
        return True  # `-abs(z) / self.scale`: a scale is positive
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and _positive_scale(e.left) \
            and _nonpositive(ctx, e.right):
        return True  # `temperature * (v - v.max())`
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and _nonpositive(ctx, e.left) \
            and _nonpositive(ctx, e.right):
        return True  # `log1p(-gate) + base.log_prob(v)`
    oc = ctx.op(e)
    if oc is not None:
        if oc.op in ("where", "log_softmax", "masked_fill"):
            return True
        if oc.op == "clamp" and oc.operand(2, "max", "clip_value_max", "max_value") is not None:
            return True
        if oc.op == "clamp" and oc.keyword("max") is not None:
            return True
        if oc.op == "minimum" and _binary_min(oc):
            return True  # `torch.min(x, self.eps)`: bounded above by its other operand
    if oc is not None and oc.op == "log1p" and oc.input is not None and sign_of(ctx, oc.input) < 0:
        return True  # log1p(-p) of a probability p
    ident = last_identifier(e)
    return _log_probability(e) or (ident is not None and "neg" in ident.lower())


def _clipped_below(ctx: Analysis, expr: ast.expr) -> bool:
    """Is `expr` (or what the name last held) clamped to a constant lower bound?"""
    target = ctx.resolve(expr)
    if target is expr and name_key(expr) is not None:
        target = ctx.last_value(expr) or expr
    oc = ctx.op(strip_wrappers(ctx, target))
    return oc is not None and oc.op == "clamp" \
        and const_value(oc.operand(1, "min", "clip_value_min", "min_value")) is not None


_LOG_PROBABILITY = ("log_prob", "logprob", "logp", "log_p")


def _log_probability(expr: ast.expr) -> bool:
    """A log-probability (≤ 0) by its name, or a call of a `log_prob` method: `log_prob`,
    `logp_action`, `dist.log_prob(x)`."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    ident = last_identifier(target)
    return ident is not None and any(w in ident.lower() for w in _LOG_PROBABILITY)


_SCALE_WORDS = frozenset({"scale", "scales", "std", "stddev", "sigma", "temperature", "bandwidth",
                          "lengthscale", "lengthscales", "variance"})


def _positive_scale(expr: ast.expr) -> bool:
    """A positive constant, or a name that says it is a scale (`self.scale`, `left_scale`,
    `sigma`, `temperature`): a distribution's scale is positive by its definition."""
    v = const_value(expr)
    if v is not None:
        return v > 0
    ident = last_identifier(expr)
    return ident is not None and any(t in _SCALE_WORDS for t in ident.lower().split("_"))


def _binary_min(oc: OpCall) -> bool:
    """`torch.min(a, b)` (elementwise), not `torch.min(x, dim)` or `x.min(1)` (a reduction)."""
    other = oc.operand(1, "other")
    if other is None or oc.keyword("dim") is not None:
        return False
    return not isinstance(const_value(other), int)


def _below_by_min_max(ctx: Analysis, left: ast.expr, right: ast.expr) -> bool:
    """`min(a, b) - max(a, b)`, `a - max(a, b)`, `min(a, b) - b` (fast-soft-sort's `jnp.minimum(x, y)
    - jnp.maximum(x, y)`): an elementwise min of the same operands minus their max is <= 0."""
    low, high = _min_max_operands(ctx, left, "minimum"), _min_max_operands(ctx, right, "maximum")
    left_set = low if low is not None else {ast.dump(left)}
    right_set = high if high is not None else {ast.dump(right)}
    return (low is not None or high is not None) and bool(left_set & right_set)


def _min_max_operands(ctx: Analysis, expr: ast.expr, op: str) -> set[str] | None:
    """The operands of an elementwise binary min (max) call (or of the one a name holds), as
    dumps; None for anything else."""
    if isinstance(expr, ast.Name):
        value = ctx.value_of(expr)
        expr = value if value is not None else expr
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == op[:3] \
            and len(expr.args) == 2 and not expr.keywords:
        return {ast.dump(a) for a in expr.args}  # the builtin `min(a, b)`
    oc = ctx.op(expr)
    if oc is None or oc.op not in (op, op[:3]) or not _binary_min(oc):
        return None
    first, other = oc.operand(0, "input", "x", "x1"), oc.operand(1, "other", "y", "x2")
    return None if first is None or other is None else {ast.dump(first), ast.dump(other)}


# Ops whose result is bounded whatever their input: |acos| <= pi, |asin|, |atan| <= pi/2.
_BOUNDED_OPS = {"acos": 3.1416, "arccos": 3.1416, "asin": 1.5708, "arcsin": 1.5708, "atan": 1.5708,
                "arctan": 1.5708, "tanh": 1.0, "sigmoid": 1.0, "sin": 1.0, "cos": 1.0, "softmax": 1.0,
                "cosine_similarity": 1.0}


def magnitude_bound(ctx: Analysis, expr: ast.expr, depth: int = 6) -> float | None:
    """A number that |expr| cannot exceed, read from bounded ops and constant arithmetic
    (`acos(a) - acos(b)` is within 2*pi, `0.5 * tanh(x)` within 0.5), else None."""
    if depth < 0:
        return None
    v = const_value(expr)
    if v is not None:
        return abs(v)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return magnitude_bound(ctx, expr.operand, depth - 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left = magnitude_bound(ctx, expr.left, depth - 1)
        if isinstance(expr.op, ast.Div):
            d = const_value(expr.right)
            return left / abs(d) if left is not None and d else None
        right = magnitude_bound(ctx, expr.right, depth - 1)
        if left is None or right is None:
            return None
        return left * right if isinstance(expr.op, ast.Mult) else left + right
    if isinstance(expr, ast.Name):
        value = ctx.value_of(expr)
        return magnitude_bound(ctx, value, depth - 1) if value is not None else None
    if not isinstance(expr, ast.Call):
        return None
    inner = strip_wrappers(ctx, expr)
    if inner is not expr:
        return magnitude_bound(ctx, inner, depth - 1)
    oc = ctx.op(expr)
    name = oc.op if oc is not None else last_identifier(expr.func)
    if name in _BOUNDED_OPS:
        return _BOUNDED_OPS[name]
    if oc is not None and oc.op == "clamp":
        low, high = oc.operand(1, "min", "clip_value_min"), oc.operand(2, "max", "clip_value_max")
        lo, hi = (const_value(b) if b is not None else None for b in (low, high))
        return max(abs(lo), abs(hi)) if lo is not None and hi is not None else None
    return None
