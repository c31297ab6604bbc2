"""Shape predicates shared by the rules: constants, squares, counts, masks, guards.

Each predicate answers a narrow syntactic question ("is this a sum of squares?", "is this
value kept away from zero?") and errs on the side of *not* matching, because a rule fires
only when its risky shape matches and no guard does: a missed guard is a false positive,
the thing this linter is built to avoid.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.names import WRAPPER_METHODS, OpCall
from nanguard.lint.scope import name_key

_MAX_DEPTH = 40


def const_value(expr: ast.AST | None) -> float | None:
    """The value of a numeric literal expression (`2`, `-0.5`, `1/3`, `1e-10`), else None."""
    if expr is None:
        return None
    if isinstance(expr, ast.Constant):
        v = expr.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        try:
            return float(v)
        except OverflowError:  # an int beyond float range (e.g. 10**400 written out)
            return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        v = const_value(expr.operand)
        if v is None:
            return None
        return -v if isinstance(expr.op, ast.USub) else v
    if isinstance(expr, ast.BinOp):
        a, b = const_value(expr.left), const_value(expr.right)
        if a is None or b is None:
            return None
        try:
            if isinstance(expr.op, ast.Add):
                return a + b
            if isinstance(expr.op, ast.Sub):
                return a - b
            if isinstance(expr.op, ast.Mult):
                return a * b
            if isinstance(expr.op, ast.Div):
                return a / b
            if isinstance(expr.op, ast.Pow) and abs(b) < 64:
                return float(a ** b)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError):
            return None
    return None


_EPS_WORD = re.compile(r"(^|_)(eps|epsilon|tiny|min_value|clamp_min|min_val)(_|$)|eps$|^eps", re.IGNORECASE)


def _last_identifier(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def is_eps_like(expr: ast.AST | None) -> bool:
    """A small positive constant by name: `eps`, `self.eps`, `torch.finfo(t).tiny`, `K.epsilon()`."""
    if expr is None:
        return False
    if isinstance(expr, ast.Call) and not expr.args:
        expr = expr.func  # `K.epsilon()`
    ident = _last_identifier(expr)
    return ident is not None and bool(_EPS_WORD.search(ident))


def is_positive_const(expr: ast.AST | None) -> bool:
    v = const_value(expr)
    if v is not None:
        return v > 0
    return is_eps_like(expr)


def _is_inf_literal(expr: ast.AST) -> int | None:
    """+1 / -1 for an infinity literal (`float('-inf')`, `math.inf`, `-np.inf`, `-torch.inf`)."""
    sign = 1
    while isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        if isinstance(expr.op, ast.USub):
            sign = -sign
        expr = expr.operand
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "float" \
            and len(expr.args) == 1 and isinstance(expr.args[0], ast.Constant) \
            and isinstance(expr.args[0].value, str):
        text = expr.args[0].value.strip().lower()
        if text.lstrip("+-") in ("inf", "infinity"):
            return -sign if text.startswith("-") else sign
        return None
    if isinstance(expr, ast.Attribute) and expr.attr in ("inf", "Inf", "infty", "PINF") \
            and isinstance(expr.value, ast.Name) and expr.value.id in ("math", "np", "numpy", "torch", "jnp"):
        return sign
    if isinstance(expr, ast.Attribute) and expr.attr == "NINF" and isinstance(expr.value, ast.Name):
        return -sign
    return None


def is_neg_inf(expr: ast.AST | None) -> bool:
    return expr is not None and _is_inf_literal(expr) == -1


def is_pos_inf(expr: ast.AST | None) -> bool:
    return expr is not None and _is_inf_literal(expr) == 1


def strip_wrappers(ctx: Analysis, expr: ast.expr) -> ast.expr:
    """Look through dtype/device/shape changes: `m.float().unsqueeze(-1)`, `tf.cast(m, f32)`, `m[:, None]`."""
    for _ in range(_MAX_DEPTH):
        if isinstance(expr, ast.Call):
            func = expr.func
            oc = ctx.op(expr)
            if oc is not None and oc.op in ("cast", "reshape") and not oc.method and expr.args:
                expr = expr.args[0]
                continue
            if isinstance(func, ast.Attribute) and func.attr in WRAPPER_METHODS and ctx.imports.qualname(func) is None:
                expr = func.value
                continue
        elif isinstance(expr, ast.Subscript) and _broadcast_index(expr.slice):
            expr = expr.value
            continue
        break
    return expr


def _broadcast_index(index: ast.AST) -> bool:
    elts = index.elts if isinstance(index, ast.Tuple) else [index]
    for e in elts:
        if isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis):
            continue
        if isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
            continue
        return False
    return True


def additive_terms(expr: ast.expr) -> list[tuple[int, ast.expr]]:
    """`a + b - 2*c` -> [(+1, a), (+1, b), (-1, 2*c)]; a single term otherwise."""
    out: list[tuple[int, ast.expr]] = []
    stack: list[tuple[int, ast.expr]] = [(1, expr)]
    while stack and len(out) < 64:
        sign, e = stack.pop()
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            stack.append((sign if isinstance(e.op, ast.Add) else -sign, e.right))
            stack.append((sign, e.left))
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and const_value(e) is None:
            stack.append((-sign, e.operand))
        else:
            out.append((sign, e))
    return out


def mult_factors(expr: ast.expr) -> list[ast.expr]:
    """`2 * a @ b.T` -> [2, a, b.T] (products and matrix products flattened)."""
    out: list[ast.expr] = []
    stack = [expr]
    while stack and len(out) < 64:
        e = stack.pop()
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.MatMult)):
            stack.append(e.right)
            stack.append(e.left)
        else:
            out.append(e)
    return out


def has_positive_offset(expr: ast.expr) -> bool:
    """`x + 1e-8`, `eps + x`, `x - (-1e-6)`: an additive positive constant keeps x away from 0."""
    terms = additive_terms(expr)
    if len(terms) < 2:
        return False
    for sign, term in terms:
        v = const_value(term)
        if v is not None and sign * v > 0:
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
                bound = _tensor_literal(b)
                if oc.qualname == "torch.max" and bound is b and isinstance(b, ast.Constant) \
                        and isinstance(b.value, int):
                    continue  # `torch.max(x, 1)` reduces over dim 1; it is not max(x, 1)
                if is_positive_const(bound):
                    return bound
    return None


def _tensor_literal(expr: ast.expr) -> ast.expr:
    """`torch.tensor(1e-8)` -> `1e-8`; anything else unchanged."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr in ("tensor", "constant", "as_tensor", "full_like") and expr.args:
        return expr.args[-1] if expr.func.attr == "full_like" else expr.args[0]
    return expr


def is_builtin_max_with_positive(ctx: Analysis, expr: ast.expr) -> bool:
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "max" \
            and expr.func.id not in ctx.imports.aliases:
        return any(is_positive_const(a) for a in expr.args)
    return False


def guarded_positive(ctx: Analysis, expr: ast.expr, depth: int = 2) -> bool:
    """Is `expr` visibly kept away from zero (eps offset, positive clamp, max with a constant,
    a `where`/`masked_fill` substitution, or a name whose value is)?"""
    e = strip_wrappers(ctx, expr)
    for _ in range(4):  # |x|, -x and x² are nonzero exactly when x is
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            e = e.operand
            continue
        inner = ctx.op(e)
        if inner is not None and inner.op in ("abs", "square") and inner.input is not None:
            e = strip_wrappers(ctx, inner.input)
            continue
        break
    if has_positive_offset(e):
        return True
    if is_builtin_max_with_positive(ctx, e):
        return True
    oc = ctx.op(e)
    if oc is not None:
        if oc.op in ("clamp", "clamp_min", "maximum"):
            if is_positive_const(clamp_lower(oc)):
                return True
        if oc.op in ("where", "masked_fill", "nan_to_num", "softplus", "exp", "sigmoid", "softmax"):
            return True
    key = name_key(e)
    if key is not None:
        if "safe" in key.lower():
            return True
        s, values = ctx.lookup(key)
        if s is not None and key in s.mutations:
            return True  # patched in place (`d[d == 0] = 1`, `d.clamp_(min=1)`)
        if depth > 0:
            for v in values:
                if v is not None and v is not expr and guarded_positive(ctx, v, depth - 1):
                    return True
    return False


def square_base(ctx: Analysis, expr: ast.expr) -> ast.expr | None:
    """The x of `x ** 2`, `x * x`, `x.pow(2)`, `torch.square(x)`; None otherwise."""
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.Pow) and const_value(expr.right) == 2:
            return expr.left
        if isinstance(expr.op, ast.Mult) and ast.dump(expr.left) == ast.dump(expr.right) \
                and const_value(expr.left) is None:
            return expr.left
        return None
    oc = ctx.op(expr)
    if oc is None:
        return None
    if oc.op == "square":
        return oc.input
    if oc.op == "pow" and const_value(oc.operand(1, "exponent", "y")) == 2:
        return oc.input
    return None


def sum_of_squares(ctx: Analysis, expr: ast.expr) -> bool:
    """`(x**2).sum(-1)`, `torch.sum(x*x, 1)`, `tf.reduce_sum(tf.square(x))`, `dx**2 + dy**2`."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None and oc.op in ("sum", "mean") and oc.input is not None:
        inner = strip_wrappers(ctx, ctx.resolve(oc.input))
        return square_base(ctx, inner) is not None
    terms = additive_terms(e)
    return len(terms) >= 2 and all(s > 0 and square_base(ctx, t) is not None for s, t in terms)


def gram_expansion(ctx: Analysis, expr: ast.expr) -> bool:
    """`a2 + b2 - 2 * a @ b.T`, `x_sq - 2 * torch.mm(x, y.t()) + y_sq`, `addmm(..., alpha=-2)`."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None and oc.op == "addmm":
        alpha = oc.keyword("alpha")
        if alpha is not None:
            return const_value(alpha) == -2
        return any(const_value(a) == -2 for a in oc.node.args)
    terms = additive_terms(e)
    if len(terms) < 3:
        return False
    positives = [t for s, t in terms if s > 0 and const_value(t) is None]
    if len(positives) < 2:
        return False  # |a|² + |b|² - 2ab needs both squared norms
    for sign, term in terms:
        factors = mult_factors(term)
        if len(factors) < 2:
            continue
        coeff = 1.0
        symbolic: list[ast.expr] = []
        for f in factors:
            v = const_value(f)
            if v is None:
                symbolic.append(f)
            else:
                coeff *= v
        if symbolic and sign * coeff == -2 and _inner_product(ctx, term, symbolic):
            return True
    return False


_GRAM_WORDS = ("gram", "dot", "inner", "prod", "xy", "xtx", "ata", "cross", "sim", "mm")


def _inner_product(ctx: Analysis, term: ast.expr, symbolic: list[ast.expr]) -> bool:
    """Does the `2 * ...` term multiply two vectors (`a * b`, `a @ b.T`, `torch.mm`, `gram`)?"""
    if len(symbolic) >= 2:
        return True
    for node in bounded_walk(term, 40):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
    only = strip_wrappers(ctx, symbolic[0])
    for candidate in (only, ctx.value_of(only)):
        if candidate is None:
            continue
        oc = ctx.op(candidate)
        if oc is not None and oc.op in ("matmul", "addmm"):
            return True
        if isinstance(candidate, ast.BinOp) and isinstance(candidate.op, (ast.MatMult, ast.Mult)):
            return True
        ident = _last_identifier(candidate)
        if ident is not None and any(w in ident.lower() for w in _GRAM_WORDS):
            return True
    return False


def has_tensor_op(ctx: Analysis, expr: ast.expr) -> bool:
    """Evidence that `expr` is a tensor computation: a recognised torch/tf op or tensor method
    in it, or in the value of a name it uses (Python floats have neither)."""
    for node in bounded_walk(expr, 120):
        if isinstance(node, ast.Call) and ctx.op(node) is not None:
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            value = ctx.value_of(node)
            if value is not None:
                for inner in bounded_walk(value, 60):
                    if isinstance(inner, ast.Call) and ctx.op(inner) is not None:
                        return True
    return False


_COUNT_WORDS = frozenset({
    "len", "lens", "length", "lengths", "count", "counts", "cnt", "cnts", "deg", "degree", "degrees",
    "nnz", "ntokens", "ntok", "seqlen", "seqlens",
})
_COUNT_PREFIXED = re.compile(r"^(num|n|number)_?(valid|tokens?|nonzero|non_zero|nonpad|non_pad|unmasked|"
                             r"active|present|observed|real|elements|items|members|neighbou?rs|words|frames)$")


def is_count_name(expr: ast.AST) -> bool:
    """`lengths`, `seq_lens`, `self.counts`, `num_valid`, `deg`: names for a count that can be 0."""
    ident = _last_identifier(expr)
    if ident is None:
        return False
    low = ident.lower()
    if _COUNT_PREFIXED.match(low):
        return True
    return any(word in _COUNT_WORDS for word in low.split("_"))


_MASK_WORDS = ("mask", "valid", "nonpad", "non_pad", "not_pad", "notpad", "keep")


def is_mask_like(ctx: Analysis, expr: ast.expr, depth: int = 2) -> bool:
    """A boolean/0-1 tensor: a comparison, `~m`, `m1 & m2`, `tf.not_equal(...)`, a name like `mask`."""
    e = strip_wrappers(ctx, expr)
    if isinstance(e, ast.Compare):
        return True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Invert, ast.Not)):
        return is_mask_like(ctx, e.operand, depth)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr)):
        return is_mask_like(ctx, e.left, depth) or is_mask_like(ctx, e.right, depth)
    oc = ctx.op(e)
    if oc is not None and oc.op == "compare":
        return True
    ident = _last_identifier(e)
    if ident is not None:
        low = ident.lower()
        if any(w in low for w in _MASK_WORDS):
            return True
        if depth > 0:
            value = ctx.value_of(e)
            if value is not None:
                return is_mask_like(ctx, value, depth - 1)
    return False


def is_max_like(ctx: Analysis, expr: ast.expr) -> bool:
    """Something that contains a maximum or logsumexp (`x.max(-1, keepdim=True)[0]`, `m`, `x_max`)."""
    for node in _bounded_walk(expr, 60):
        oc = ctx.op(node) if isinstance(node, ast.Call) else None
        if oc is not None and oc.op == "max":
            return True
        ident = _last_identifier(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if ident is not None and ("max" in ident.lower() or ident in ("m", "mx", "lse", "c", "shift")):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "values":
            return True
    return False


def nonpositive_by_construction(ctx: Analysis, expr: ast.expr) -> bool:
    """`-abs(x)`, `-x.abs()`, `x - x.max()`, `-relu(x)`, a `where`/`clamp(max=...)` result: exp cannot overflow."""
    e = ctx.resolve(expr)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        inner = ctx.op(e.operand)
        if inner is not None and inner.op in ("abs", "relu", "softplus", "exp", "norm"):
            return True
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and is_max_like(ctx, e.right):
        return True
    oc = ctx.op(e)
    if oc is not None:
        if oc.op in ("where", "log_softmax", "masked_fill"):
            return True
        if oc.op == "clamp" and oc.operand(2, "max", "clip_value_max", "max_value") is not None:
            return True
        if oc.op == "clamp" and oc.keyword("max") is not None:
            return True
    ident = _last_identifier(e)
    if ident is not None and any(w in ident.lower() for w in ("log_prob", "logprob", "logp", "log_p", "neg")):
        return True
    return False


def _bounded_walk(expr: ast.AST, limit: int) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = [expr]
    while stack and len(out) < limit:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def bounded_walk(expr: ast.AST, limit: int = 200) -> list[ast.AST]:
    """Nodes of `expr` (pre-order, not entering lambdas), at most `limit` of them."""
    return _bounded_walk(expr, limit)


def names_in(ctx: Analysis, expr: ast.AST, expand: bool = True) -> set:
    """Variable names (and `self.x`) that `expr` depends on, one assignment deep."""
    out = set()
    for node in _bounded_walk(expr, 200):
        key = name_key(node)
        if key is None or key in ctx.imports.aliases or key in ("self", "True", "False", "None"):
            continue
        out.add(key)
        if expand:
            value = ctx.value_of(node)
            if value is not None:
                out |= names_in(ctx, value, expand=False)
    return out


def describe(node: ast.AST, limit: int = 48) -> str:
    """A short source-like rendering for messages: `torch.log(F.softmax(...))`."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - ast.unparse handles every parsed node
        return "expression"
    text = " ".join(text.split())
    if len(text) > limit:
        if isinstance(node, ast.Call):
            head = describe(node.func, limit)
            return f"{head}(...)"
        return text[: limit - 3] + "..."
    return text


PROBABILITY_WORDS = frozenset({
    "p", "q", "pi", "py", "px", "pz", "qz", "prob", "probs", "proba", "probas", "probability",
    "probabilities", "conv", "softmax", "sigmoid", "attn", "attention", "posterior", "likelihood",
    "yhat", "hat",
})


def named_like(ctx: Analysis, expr: ast.expr, words: frozenset, y_prefix: bool = False) -> bool:
    """Does a variable in `expr` carry one of `words` as a `_`-separated token (`probs`,
    `p_hat`, `y_conv`, `self.attn`)? With `y_prefix`, names starting with `y` count too."""
    for node in _bounded_walk(expr, 40):
        ident = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if ident is None or ident in ctx.imports.aliases:
            continue
        low = ident.lower()
        if y_prefix and low.startswith("y"):
            return True
        if any(t in words for t in re.split(r"[_\d]+", low) if t):
            return True
    return False

