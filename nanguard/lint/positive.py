"""Is this value kept away from zero? Guards a reader sees around a log, a root or a division.

An eps offset (`x + 1e-8`, `p += eps` in place), a positive clamp or floor (`clamp(x, min=eps)`,
`max(n, 1)`, `np.maximum(eps, p)`), the ceiling of a clamp under a `1 - p`, a `where` or
`masked_fill` substitution, a helper that returns such a value (in this file or the linted
tree, `nanguard.lint.project`), or a name whose value is one. Each predicate errs on the side of
*not* matching: a missed guard is a false positive, a guard seen where there is none a missed
risk. The wrappers these look through are in `nanguard.lint.patterns`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from nanguard.lint import project
from nanguard.lint.analysis import Analysis
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import held_at, local_constant, strip_wrappers, tensor_literal
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import (
    parameter_default,
    additive_terms,
    const_value,
    is_eps_like,
    is_positive_const,
    last_identifier,
)


def has_positive_offset(expr: ast.expr, number: Callable[[ast.expr], float | None] = const_value) -> bool:
    """`x + 1e-8`, `eps + x`, `x - (-1e-6)`: an additive positive constant keeps x away from 0.
    `number` says which terms are constants: literals by default; `guarded_positive` also reads
    names bound once to a number (`pi + MIN_DENOM`, `MIN_DENOM = 0.0001` at module level)."""
    terms = additive_terms(expr)
    if len(terms) < 2:
        return False
    # `1 - p` is 0 at p = 1: a constant that a value is subtracted from guards nothing, unless it
    # is an eps added on purpose (`a + b - 2ab + 1e-8`).
    subtracted = any(sign < 0 and number(term) is None and not is_eps_like(term) for sign, term in terms)
    for sign, term in terms:
        v = number(term)
        if v is not None and sign * v > 0 and not (subtracted and v > 1e-2):
            return True
        if sign > 0 and is_eps_like(term):
            return True
    return False


def clamp_lower(oc: OpCall) -> ast.expr | None:
    """The lower bound of a clamp/clip/clamp_min/maximum call, when it has one."""
    if oc.op == "clamp":
        return oc.operand(1, "min", "clip_value_min", "min_value", "x_min", "a_min")
    if oc.op == "clamp_min":
        return oc.operand(1, "min")
    if oc.op == "maximum":
        pos = oc.positional
        if len(pos) == 2:
            for b in (pos[1], pos[0]):
                bound = tensor_literal(b)
                if oc.qualname == "torch.max" and bound is b and isinstance(b, ast.Constant) \
                        and isinstance(b.value, int):
                    continue  # `torch.max(x, 1)` reduces over dim 1; it is not max(x, 1)
                if is_positive_const(bound):
                    return bound
    return None


def is_max_with_positive_floor(ctx: Analysis, expr: ast.expr) -> bool:
    """`max(n, 1)` (or with a count tested against 0 in the function), and a helper named as a
    floor with a positive float bound (vdvae's
    `const_max(cdf_delta, 1e-12)`, a `safe_max(x, 1e-6)`); not a reduction (`torch.max(x, 1)`:
    an int is a dimension) and not an upper bound (`clamp_max`)."""
    if not isinstance(expr, ast.Call):
        return False
    if isinstance(expr.func, ast.Name) and expr.func.id == "max" and expr.func.id not in ctx.imports.aliases:
        # `max(n, 1)`; `max(num_positives or 0, n_found)` after `if n_found == 0: return`
        return any(is_positive_const(a) or (isinstance(a, ast.Name) and ctx.zero_checked(a)) for a in expr.args)
    name = (last_identifier(expr.func) or "").lower()
    if "max" in name and not any(w in name for w in ("clamp", "clip", "arg", "soft", "amax", "logsumexp")) \
            and ctx.op(expr) is None:
        return any(is_positive_const(a) and isinstance(const_value(a), float) for a in expr.args)
    return False


def guarded_positive(ctx: Analysis, expr: ast.expr, depth: int = 2) -> bool:
    """Is `expr` visibly kept away from zero (eps offset, positive clamp, max with a constant,
    a `where`/`masked_fill` substitution, or a name whose value is)?"""
    e = strip_wrappers(ctx, expr)
    for _ in range(4):  # |x|, -x, x², sqrt(x) and x ** 0.5 are nonzero exactly when x is
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            e = e.operand
            continue
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow) and (const_value(e.right) or 0) > 0:
            e = strip_wrappers(ctx, e.left)
            continue
        inner = ctx.op(e)
        if inner is not None and inner.op in ("abs", "square", "sqrt") and inner.input is not None:
            e = strip_wrappers(ctx, inner.input)
            continue
        break
    if has_positive_offset(e, lambda term: local_constant(ctx, term) if isinstance(term, ast.Name)
                           else const_value(term)) or _below_a_clamp_ceiling(ctx, e):
        return True
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Div, ast.Mult)) \
            and _floored(ctx, e.left) and _floored(ctx, e.right):
        return True  # `(p + eps) / (q + eps)` (a KL divergence's ratio), `(a + eps) * (b + eps)`
    if is_max_with_positive_floor(ctx, e) or _calls_a_positive_helper(ctx, e):
        return True
    oc = ctx.op(e)
    if oc is not None:
        if oc.op in ("clamp", "clamp_min", "maximum") and _positive_bound(ctx, clamp_lower(oc)):
            return True
        if oc.op == "minimum" and len(oc.positional) == 2 and depth > 0 \
                and all(guarded_positive(ctx, a, depth - 1) for a in oc.positional):
            return True  # `np.minimum(1 - eps, np.maximum(eps, p))`
        if oc.op in ("where", "masked_fill", "nan_to_num", "softplus", "exp", "sigmoid", "softmax"):
            return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("clamp_", "clamp_min_"):
        lower = next((k.value for k in e.keywords if k.arg == "min"), e.args[0] if e.args else None)
        if _positive_bound(ctx, lower):
            return True  # `x.ne(pad).sum(-1).float().clamp_(min=1)`: clamped in place, in the chain
    key = name_key(e)
    if key is not None:
        if "safe" in key.lower():
            return True
        s, values = ctx.lookup(key)
        if s is not None and key in s.mutations:
            return True  # patched in place (`d[d == 0] = 1`, `d.clamp_(min=1)`)
        if s is not None and _offset_in_place(ctx, e, s.augmented.get(key, ())):
            return True
        if depth > 0:
            for v in values:
                if v is not None and v is not expr and guarded_positive(ctx, v, depth - 1):
                    return True
    return False


def _offset_in_place(ctx: Analysis, name: ast.expr, changes) -> bool:
    """`prob += machine_eps` (or `+= 1e-8`) after the name's last assignment and before this use."""
    line = getattr(name, "lineno", None)
    if line is None:
        return False
    last = ctx.last_value(name)
    since = getattr(last, "lineno", 0)
    return any(isinstance(n.op, ast.Add) and since < n.lineno < line
               and ((const_value(n.value) or 0) > 0 or is_eps_like(n.value)) for n in changes)


def _below_a_clamp_ceiling(ctx: Analysis, e: ast.expr) -> bool:
    """`1 - p` with `p = clamp(p, min=eps, max=1 - eps)`: the clamp's ceiling keeps it positive."""
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub)):
        return False
    top = const_value(e.left)
    if top is None:
        return False
    for value in [e.right, ctx.last_value(e.right) if name_key(e.right) is not None else None]:
        oc = ctx.op(strip_wrappers(ctx, value)) if value is not None else None
        ceilings = [oc.operand(2, "max", "clip_value_max", "max_value", "a_max") or oc.keyword("max")] \
            if oc is not None and oc.op == "clamp" else list(oc.positional) \
            if oc is not None and oc.op == "minimum" else []  # `np.minimum(1 - eps, np.maximum(eps, p))`
        for ceiling_expr in ceilings:
            ceiling = local_constant(ctx, ceiling_expr) if ceiling_expr is not None else None  # `1 - 1e-7`
            if (ceiling is not None and ceiling < top) or _below_by_eps(ctx, ceiling_expr, top):
                return True
    return False


def _below_by_eps(ctx: Analysis, expr: ast.expr | None, top: float) -> bool:
    """`1 - eps` below the constant `top`, with eps a positive number: a local constant or a
    parameter's positive default (`eps=1e-15`; a parameter without one may be anything)."""
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Sub) and const_value(expr.left) == top):
        return False
    eps = expr.right
    value = local_constant(ctx, eps)
    if value is None and isinstance(eps, ast.Name):
        scope = ctx.parameter_scope(eps)
        value = const_value(parameter_default(scope.node, eps.id)) if scope is not None else None
    return value is not None and value > 0


# Calls whose result is >= 0 whatever their argument: the receiver of a positive offset.
_NONNEGATIVE_CALLS = frozenset({"abs", "absolute", "fabs", "square", "norm", "exp", "sqrt", "softplus", "sigmoid",
                                "relu"})
_FLOOR_CALLS = frozenset({"clamp_min", "clamp_min_", "maximum", "fmax"})
# How a helper's text spells the array modules (it is read without the file's imports).
_MODULE_NAMES = frozenset({"torch", "tf", "jnp", "np", "numpy", "jax", "F", "K", "keras", "ops", "lax"})


def _nonnegative(e: ast.expr) -> bool:
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow):
        return const_value(e.right) == 2
    return isinstance(e, ast.Call) and (last_identifier(e.func) or "") in _NONNEGATIVE_CALLS


def positive_helper_return(e: ast.expr) -> bool:
    """Is a helper's whole return value positive by its syntax alone (no names looked up):
    `x.abs().add_(eps)` (geoopt's `sabs`), `x.abs() + eps`, `torch.sqrt(x) + 1e-8`,
    `x.clamp_min(eps)`, `x.clamp(min=1e-6)`, `torch.clamp(x, min=eps)`, `jnp.maximum(x, eps)`,
    the builtin `max(n, 1.0)`?
    `eps` is a positive constant or a name that says so."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return (is_positive_const(e.right) and _nonnegative(e.left)) or (is_positive_const(e.left)
                                                                         and _nonnegative(e.right))
    if not isinstance(e, ast.Call):
        return False
    name = last_identifier(e.func) or ""
    head = e.func.value if isinstance(e.func, ast.Attribute) else None
    # `x.clamp(...)` is a method; `torch.clamp(x, ...)`, `tf.math.maximum(x, ...)` are functions
    method = head is not None and not isinstance(head, ast.Attribute) and not (
        isinstance(head, ast.Name) and head.id in _MODULE_NAMES)
    if name in ("add", "add_") and method and len(e.args) == 1:
        return is_positive_const(e.args[0]) and _nonnegative(e.func.value)  # type: ignore[attr-defined]
    if name in _FLOOR_CALLS and e.args:
        return is_positive_const(e.args[-1])
    if isinstance(e.func, ast.Name) and e.func.id == "max" and len(e.args) >= 2 and not e.keywords:
        return any(is_positive_const(a) for a in e.args)  # nerfstudio's `max(prod(size).item(), 1.0)`
    if name in ("clamp", "clamp_", "clip"):
        floor = next((k.value for k in e.keywords if k.arg in ("min", "a_min", "clip_value_min", "min_value")), None)
        if floor is None:
            positional = e.args if method else e.args[1:]
            floor = positional[0] if positional else None
        return is_positive_const(floor)
    return False


def _calls_a_positive_helper(ctx: Analysis, e: ast.expr) -> bool:
    """`sabs(k)`, `utils.sabs(k)`: a call of a function of the tree or of this file whose one
    statement returns a positive value (`positive_helper_return`)."""
    if not isinstance(e, ast.Call):
        return False
    func = e.func
    if isinstance(func, ast.Attribute):
        if ctx.imports.qualname(func) is None:
            return False  # `self.sabs(k)`: a method, whatever a function of that name returns
        name = func.attr
    elif isinstance(func, ast.Name):
        name = func.id
    else:
        return False
    return name in project.positive_helpers() or name in _file_positive_helpers(ctx)


def _file_positive_helpers(ctx: Analysis) -> frozenset[str]:
    found = ctx.memo.get("positive_helpers")
    if found is None:
        positive, others = set(), set()
        top = ctx.tree.body  # module-level functions and methods: what another function calls
        for node in [*top, *(m for c in top if isinstance(c, ast.ClassDef) for m in c.body)]:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None \
                    and positive_helper_return(body[0].value):
                positive.add(node.name)
            else:
                others.add(node.name)
        found = ctx.memo["positive_helpers"] = frozenset(positive - others)
    return found


def _floored(ctx: Analysis, expr: ast.expr, depth: int = 1) -> bool:
    """Kept from 0 by the code itself: `x + eps`, a positive clamp or floor, or a name last
    assigned one (tf-keras' KL divergence: `y_true = backend.clip(y_true, backend.epsilon(), 1)`).
    Not a positive function of x (`exp(-d)`, a softmax), which still underflows to 0."""
    e = strip_wrappers(ctx, expr)
    if depth > 0 and isinstance(e, ast.Name):
        value = held_at(ctx, e)
        return value is not e and _floored(ctx, value, depth - 1)
    if has_positive_offset(e) or is_max_with_positive_floor(ctx, e):
        return True
    oc = ctx.op(e)
    return oc is not None and oc.op in ("clamp", "clamp_min", "maximum") and _positive_bound(ctx, clamp_lower(oc))


def _positive_bound(ctx: Analysis, bound: ast.expr | None) -> bool:
    """A positive number, or a local name or `self` attribute bound once to one
    (`threshold = 0.008856`, `self.min_norm = 1e-15` in `__init__`)."""
    if is_positive_const(bound):
        return True
    key = name_key(bound) if isinstance(bound, (ast.Name, ast.Attribute)) else None
    if key is None:
        return False
    _, values = ctx.lookup(key)
    if not values and key.startswith("self."):
        values = ctx.attribute_values(key)
    return len(values) == 1 and is_positive_const(values[0])
