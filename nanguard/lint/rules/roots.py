"""Roots and inverse trigonometry at the edge of their domain (NG301-NG304)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import CERTAIN, GRADIENT, POSSIBLE, VALUE, Rule
from nanguard.lint.names import JAX, KERAS, TF, OpCall
from nanguard.lint.naming import is_count_name, is_mask_like
from nanguard.lint.patterns import clamp_lower, guarded_positive, strip_wrappers, tensor_literal
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.shapes import (
    gram_expansion,
    difference_of_points,
    has_tensor_op,
    square_base,
    squared_vectors,
    sum_of_squares,
)
from nanguard.lint.syntax import additive_terms, bounded_walk, const_value, is_eps_like

SQRT_GRAM = Rule(
    code="NG301",
    name="sqrt-of-gram-expansion",
    summary="`sqrt(a² + b² - 2·a·b)` (squared distances via a Gram matrix)",
    hazard=VALUE,
    hazards=("distance_matrix",),
    explanation="""\
Seed story: `torch.sqrt(diag_1 + diag_2 - 2 * gram_matrix)`.

    d = torch.sqrt(sq[:, None] + sq[None, :] - 2 * x @ x.T)
->  d = nanguard.distance_matrix(x)          # exact 0 on the diagonal, gradient 0 there

`clamp(min=0)` before the sqrt removes the NaN value but not the infinite gradient at 0; a
positive clamp or `+ eps` is treated as a guard (finite, though biased). Also matched:
`addmm(..., alpha=-2)` / `baddbmm(..., alpha=-2)` and `** 0.5`, `rsqrt`.""",
)

SQRT_SUM_SQUARES = Rule(
    code="NG302",
    name="sqrt-of-sum-of-squares",
    summary="`sqrt((x**2).sum(dim))`, `sqrt(dx**2 + dy**2)` (a hand-written norm)",
    hazard=GRADIENT,
    confidence=POSSIBLE,
    hazards=("norm_zero",),
    explanation="""\
Torch's own norms define the gradient at the zero vector as 0 (the minimum-norm
subgradient), which is what a hand-written norm loses.

    n = torch.sqrt((x ** 2).sum(-1))
->  n = torch.linalg.vector_norm(x, dim=-1)    # or nanguard.norm(x, dim=-1)

A gradient hazard: not reported inside `torch.no_grad()`. With `rsqrt` or a negative
power (1/norm) the value itself is inf for the zero vector, and it is always reported.""",
)

ACOS_COSINE = Rule(
    code="NG303",
    name="acos-of-cosine",
    summary="`acos(cosine)`, `asin(dot)` where rounding can leave [-1, 1]",
    hazard=VALUE,
    hazards=("acos_domain", "asin_domain"),
    explanation="""\
A cosine from cosine_similarity or a dot product of unit vectors rounds past ±1 as well.
Even clamped to exactly [-1, 1], parallel vectors give inf/NaN gradients.

    angle = torch.acos(F.cosine_similarity(a, b, dim=-1))
->  angle = nanguard.acos(F.cosine_similarity(a, b, dim=-1))
    (or the stable angle: torch.atan2(torch.linalg.cross(a, b).norm(dim=-1), (a * b).sum(-1)))

Not reported when the argument is clamped strictly inside (-1, 1), e.g. `clamp(c, -1 + eps,
1 - eps)`; reported as a gradient hazard when clamped to exactly ±1.""",
)

ROOT_OF_ZERO = Rule(
    code="NG304",
    name="fractional-power-at-zero",
    summary="`x ** p` with 0 < p < 1, or p < 0, on a value that can be exactly 0",
    hazard=GRADIENT,
    confidence=POSSIBLE,
    hazards=("fractional_power_zero", "sqrt_zero", "negative_power_zero"),
    explanation="""\
Values that are exactly 0 on purpose are common: abs() and relu() outputs, variances of
constant features, norms and distances of equal points, squares, and counts (the degree of
an isolated node in `deg ** -0.5`).

    std = torch.sqrt(x.var(dim=0))          # NaN gradient for a constant feature
->  std = nanguard.sqrt(x.var(dim=0))        # gradient 0 at 0 (or add the usual eps)
    y = torch.abs(x) ** 0.5
->  y = nanguard.pow(torch.abs(x), 0.5)

Reported only when the base is visibly one of those zero-able values and is not guarded
(`+ eps`, a positive clamp, a later in-place fix of the result such as
`d_inv[d_inv == inf] = 0`). Roots of squared distances and sums of squares are NG301/NG302.""",
)

RULES = [SQRT_GRAM, SQRT_SUM_SQUARES, ACOS_COSINE, ROOT_OF_ZERO]


def _through_zero_clamp(ctx: Analysis, expr: ast.expr) -> tuple[ast.expr, bool]:
    """Look through `clamp(d, min=0)`, `d.clamp_min(0)`, `relu(d)`: (inner expression, clamped?)."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None and oc.input is not None:
        if oc.op in ("clamp", "clamp_min", "maximum"):
            lower = clamp_lower(oc)
            if lower is not None and const_value(lower) is not None and const_value(lower) <= 0:  # type: ignore
                return strip_wrappers(ctx, ctx.resolve(oc.input)), True
            if oc.op == "maximum":
                pos = oc.positional
                if len(pos) == 2 and const_value(pos[1]) == 0:
                    return strip_wrappers(ctx, ctx.resolve(pos[0])), True
        if oc.op == "relu":
            return strip_wrappers(ctx, ctx.resolve(oc.input)), True
    return e, False


def _zero_source(ctx: Analysis, expr: ast.expr, p: float) -> str | None:
    """Why `expr` can be exactly 0, when that is visible; None otherwise."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None:
        if oc.op in ("abs", "relu") and p > 0:
            # (1/|x| is inf at 0 by definition; the silent hazard is the root's gradient.)
            return f"`{oc.op}` output, 0 on a whole region"
        if oc.op in ("var", "std"):
            return "a variance, 0 for constant input"
        if oc.op == "norm":
            return "a norm or distance, 0 for equal points"
        if oc.op in ("sum", "count_nonzero") and oc.input is not None and p < 0 \
                and is_mask_like(ctx, oc.input):
            return "a count of a mask, 0 when the mask is empty"
    if square_base(ctx, e) is not None:
        return "a square, 0 at 0"
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and const_value(tensor_literal(e.left)) == 1 \
            and square_base(ctx, strip_wrappers(ctx, e.right)) is not None and p > 0:
        return "`1 - c²`, 0 at c = ±1 (and a round-off negative, NaN, just beyond)"
    if p < 0 and isinstance(e, (ast.Name, ast.Attribute)) and is_count_name(e):
        return "a count, 0 for an empty set or an isolated node"
    return None


def _root_of(ctx: Analysis, node: ast.AST) -> tuple[ast.expr, float, str] | None:
    """(base, exponent, spelling) of sqrt/rsqrt/pow/`**` with a constant exponent."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        p = const_value(node.right)
        return (node.left, p, "**") if p is not None else None
    oc = ctx.op(node)
    if oc is None or oc.input is None:
        return None
    if oc.op == "sqrt":
        return oc.input, 0.5, "sqrt"
    if oc.op == "rsqrt":
        return oc.input, -0.5, "rsqrt"
    if oc.op == "pow":
        p = const_value(oc.operand(1, "exponent", "y", "x2"))
        return (oc.input, p, "pow") if p is not None else None
    return None


@checks("NG301", "NG302", "NG304")
def check_root(ctx: Analysis, target) -> None:
    node = target.node if isinstance(target, OpCall) else target
    found = _root_of(ctx, node)
    if found is None:
        return
    base, p, spelling = found
    if not (0 < p < 1 or p < 0):
        return
    if spelling == "**" and not has_tensor_op(ctx, base):
        return  # `(a ** 2 + b ** 2) ** 0.5` on Python floats: no autograd, no NaN
    if guarded_positive(ctx, base) or ctx.result_fixed_up(node) or id(node) in ctx.sanitised:
        return
    hazard = GRADIENT if p > 0 else VALUE
    inner, clamped = _through_zero_clamp(ctx, base)
    if guarded_positive(ctx, inner):
        return
    what = spelling if spelling != "**" else f"** {p:g}"
    if gram_expansion(ctx, inner):
        if clamped and p > 0:
            ctx.report(SQRT_GRAM, node, f"`{what}` of a clamped Gram-expansion distance (the clamp removes the "
                       "NaN value, not the inf gradient at 0)", "distance_matrix", hazard=GRADIENT, subject=base)
        else:
            # A cross term summed over a dimension (`x @ y.T`, `mm`, a Gram matrix) rounds apart from
            # the squared norms, so the diagonal of a distance matrix goes negative for ordinary
            # data; an elementwise `2 * a * b (* cos g)` is exactly 0 at a == b and only rounds
            # below it for nearly equal inputs: that depends on the data.
            confidence = None if _reduces_over_a_dimension(ctx, inner) else POSSIBLE
            ctx.report(SQRT_GRAM, node, f"`{what}` of `a² + b² - 2ab`", "distance_matrix", hazard=VALUE,
                       subject=base, confidence=confidence)
        return
    mse = ctx.op(inner)
    if mse is not None and mse.op == "mse_loss" and p > 0:
        # RMSE: the mean squared error of a prediction is 0 when it is exact (an input the
        # code accepts, and where a model converges): the root's gradient there is inf.
        ctx.report(SQRT_SUM_SQUARES, node, f"`{what}` of a mean squared error (0 for an exact prediction)",
                   "norm_zero", hazard=hazard, subject=base, confidence=CERTAIN)
        return
    if sum_of_squares(ctx, inner):
        # A norm of a difference is 0 for identical points, an input the code accepts: certain.
        # Of another vector (an embedding, a weight, a caller's tensor) the data decides.
        vectors = squared_vectors(ctx, inner)
        difference = bool(vectors) and all(difference_of_points(ctx, v) for v in vectors)
        what_of = "of a sum of squares of a difference (0 for identical points)" if difference \
            else "of a sum of squares"
        ctx.report(SQRT_SUM_SQUARES, node, f"`{what}` {what_of}", "norm_zero", hazard=hazard, subject=base,
                   confidence=CERTAIN if difference else None)
        return
    reason = _zero_source(ctx, base, p) or _zero_source(ctx, inner, p)
    if reason is None:
        return
    key = "negative_power_zero" if p < 0 else "sqrt_zero" if spelling == "sqrt" else "fractional_power_zero"
    # relu is 0 on a whole half-line, a mask can be empty (as NG401 says) and a distance is 0 for
    # identical points: those inputs are certain to be accepted; a 0 of abs, a variance or a
    # named count depends on the data.
    certain = reason.startswith(("`relu`", "a count of a mask")) or (
        reason.startswith("a norm") and _norm_of_difference(ctx, base))
    confidence = CERTAIN if certain else POSSIBLE
    ctx.report(ROOT_OF_ZERO, node, f"`{what}` of {reason}", key, hazard=hazard, subject=base, confidence=confidence)


def _norm_of_difference(ctx: Analysis, expr: ast.expr) -> bool:
    """`torch.norm(a - b, dim=-1)`, `(x - y).norm(dim=1)`: 0 for identical points."""
    oc = ctx.op(strip_wrappers(ctx, ctx.resolve(expr)))
    return oc is not None and oc.op == "norm" and oc.input is not None and difference_of_points(ctx, oc.input)


_GRAM_PREFIXES = ("gram", "dot", "inner", "prod", "cross", "sim")
_GRAM_TOKENS = frozenset({"xy", "xtx", "ata", "mm", "xx", "yy"})


def _gram_name(ident: str) -> bool:
    """`gram_matrix`, `xy`, `dot_prod`, `sim`: a name made of a word that says inner product
    (whole words: `gamma` is not `mm`)."""
    tokens = [t for t in re.split(r"[_\d]+", ident.lower()) if t]
    return any(t in _GRAM_TOKENS or t.startswith(_GRAM_PREFIXES) for t in tokens)


def _reduces_over_a_dimension(ctx: Analysis, expr: ast.expr) -> bool:
    """Is some term of `expr` (or of a name it uses) a product summed over a dimension: `@`,
    matmul/mm/einsum/dot, addmm, a reduction, or a name that says Gram matrix (`xy`, `gram`)?"""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    todo = [e]
    for node in bounded_walk(e, 120):
        key = name_key(node)
        if key is not None:
            value = ctx.value_of(node)
            if value is not None:
                todo.append(value)
    for root in todo:
        for node in bounded_walk(root, 120):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return True
            if isinstance(node, ast.Call):
                oc = ctx.op(node)
                if oc is not None and oc.op in ("matmul", "addmm", "sum", "mean"):
                    return True
            if isinstance(node, (ast.Name, ast.Attribute)):
                ident = node.id if isinstance(node, ast.Name) else node.attr
                if _gram_name(ident):
                    return True
    return False


def _strictly_inside(ctx: Analysis, bound: ast.expr | None, upper: bool) -> bool:
    """Is a clamp bound strictly inside (-1, 1): `1 - eps`, `0.9999`, `-1 + 1e-7`?"""
    if bound is None:
        return False
    v = const_value(bound)
    if v is not None:
        return v < 1 if upper else v > -1
    terms = additive_terms(bound)
    const_part = sum(s * (const_value(t) or 0.0) for s, t in terms if const_value(t) is not None)
    eps_terms = [(s, t) for s, t in terms if const_value(t) is None]
    if len(eps_terms) == 1 and abs(abs(const_part) - 1) < 1e-12 and is_eps_like(eps_terms[0][1]):
        s = eps_terms[0][0]
        return s < 0 if upper else s > 0
    return False


_COS_WORDS = ("cos", "dot", "sim")


def _normalised(ctx: Analysis, expr: ast.expr) -> bool:
    """Unit vectors: `F.normalize(x)`, `x / x.norm(...)`, or a name holding one (also one
    rebound just before: `a = F.normalize(a)`)."""
    value = ctx.value_of(expr) or (ctx.last_value(expr) if name_key(expr) is not None else None)
    e = strip_wrappers(ctx, value if value is not None else expr)
    oc = ctx.op(e)
    if oc is not None:
        return oc.op == "normalize"
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and any(
        getattr(ctx.op(n), "op", "") in ("norm", "sqrt") for n in bounded_walk(e.right, 60) if isinstance(n, ast.Call))


def _true_cosine(ctx: Analysis, expr: ast.expr) -> bool:
    """A cosine computed from vectors (cosine_similarity, a product of normalised vectors, a dot
    product over norms): parallel vectors round it past ±1, whatever the names say."""
    value = ctx.value_of(expr) or (ctx.last_value(expr) if name_key(expr) is not None else None)
    e = strip_wrappers(ctx, value if value is not None else expr)
    oc = ctx.op(e)
    if oc is not None:
        if oc.op == "cosine_similarity":
            return True
        if oc.op == "matmul":
            operands = oc.positional[:2]
            return len(operands) == 2 and all(_normalised(ctx, o) for o in operands)
        if oc.op == "sum" and oc.input is not None:  # `(F.normalize(a) * F.normalize(b)).sum(-1)`
            product = strip_wrappers(ctx, ctx.resolve(oc.input))
            return isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult) \
                and _normalised(ctx, product.left) and _normalised(ctx, product.right)
        return False
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, ast.MatMult):
            return _normalised(ctx, e.left) and _normalised(ctx, e.right)
        return isinstance(e.op, ast.Div) and _normalised(ctx, e)
    return False


def _cosine_state(ctx: Analysis, expr: ast.expr, depth: int = 2) -> str | None:
    """'raw' (a cosine or dot product), 'clamped' (to exactly ±1), 'guarded', or None (not a cosine)."""
    last = ctx.last_value(expr) if name_key(expr) is not None and ctx.value_of(expr) is None else None
    e = strip_wrappers(ctx, last if last is not None else ctx.resolve(expr))
    oc = ctx.op(e)
    if oc is not None:
        if oc.op == "clamp" and oc.input is not None:
            lo = oc.operand(1, "min", "clip_value_min")
            hi = oc.operand(2, "max", "clip_value_max")
            if _strictly_inside(ctx, lo, False) and _strictly_inside(ctx, hi, True):
                return "guarded"
            inner = _cosine_state(ctx, oc.input, depth - 1) if depth > 0 else None
            return "clamped" if inner in ("raw", "clamped") else inner
        if oc.op in ("cosine_similarity", "matmul"):
            return "raw"
        if oc.op == "sum" and oc.input is not None:
            s = strip_wrappers(ctx, oc.input)
            if isinstance(s, ast.BinOp) and isinstance(s.op, ast.Mult):
                return "raw"
        return None
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, ast.MatMult):
            return "raw"
        if isinstance(e.op, ast.Div):
            denominator_norm = any(
                (ctx.op(n) is not None and ctx.op(n).op in ("norm", "sqrt"))  # type: ignore[union-attr]
                for n in bounded_walk(e.right, 60) if isinstance(n, ast.Call))
            if denominator_norm:
                return "raw"
        return None
    if isinstance(e, (ast.Name, ast.Attribute)):
        ident = e.id if isinstance(e, ast.Name) else e.attr
        if any(w in ident.lower() for w in _COS_WORDS):
            return "raw"
    return None


# Whole words of a name that say "a cosine or a dot product": such a value is ±1 for parallel
# vectors (an input the code accepts; an infinite gradient) and rounds past it (a NaN).
_COSINE_TOKENS = frozenset({"cos", "cosine", "cosines", "cossim", "cos_sim", "dot", "dots", "dotprod",
                            "sim", "sims", "similarity", "similarities"})


def _named_cosine(expr: ast.expr) -> bool:
    """`cosine`, `cos_sim`, `dot`, `sim_matrix` as whole words (`cost`, `simple` are not)."""
    if not isinstance(expr, (ast.Name, ast.Attribute)):
        return False
    ident = (expr.id if isinstance(expr, ast.Name) else expr.attr).lower()
    tokens = [t for t in re.split(r"[_\d]+", ident) if t]
    return ident in _COSINE_TOKENS or any(t in _COSINE_TOKENS for t in tokens)


def _compared_by_enclosing_if(ctx: Analysis, node: ast.AST, expr: ast.expr) -> bool:
    """Is `node` inside an `if`/`else` whose test compares the name `expr` (or its abs)?"""
    key = name_key(expr)
    line = getattr(node, "lineno", None)
    if key is None or line is None:
        return False
    for stmt in bounded_walk(ctx.scope.node, 4000):
        if not isinstance(stmt, ast.If) or not (stmt.lineno < line <= (stmt.end_lineno or 0)):
            continue
        for cmp in bounded_walk(stmt.test, 40):
            if isinstance(cmp, ast.Compare) and any(name_key(n) == key for o in [cmp.left, *cmp.comparators]
                                                    for n in bounded_walk(o, 20)):
                return True
    return False


@checks("NG303")
def check_acos(ctx: Analysis, oc: OpCall) -> None:
    if oc.input is None:
        return
    if _compared_by_enclosing_if(ctx, oc.node, oc.input):
        return  # `if abs(dot) > 0.9995: lerp ... else: acos(dot)` (slerp): the branch bounds it
    state = _cosine_state(ctx, oc.input)
    if state is None and _named_cosine(oc.input):
        state = "raw"  # `cos = (trace - 1) / 2`: a cosine by its name, whatever computed it
    name = "acos" if oc.op == "acos" else "asin"
    if state == "raw":
        confidence = CERTAIN if _true_cosine(ctx, oc.input) or _named_cosine(oc.input) else POSSIBLE
        ctx.report(ACOS_COSINE, oc.node, f"`{name}` of a cosine/dot product", f"{name}_domain", hazard=VALUE,
                   subject=oc.input, confidence=confidence)
    elif state == "clamped":
        ctx.report(ACOS_COSINE, oc.node, f"`{name}` of a cosine clamped to [-1, 1] (finite value, inf gradient "
                   "at ±1)", f"{name}_domain", hazard=GRADIENT, subject=oc.input, confidence=POSSIBLE)


@checks("NG302")
def check_norm(ctx: Analysis, oc: OpCall) -> None:
    """`tf.norm(x)`, `keras.ops.norm`, `jnp.linalg.norm`: unlike torch's norms, their gradient at the
    zero vector is x/‖x‖ = 0/0 = NaN."""
    if oc.framework not in (TF, KERAS, JAX) or oc.input is None or guarded_positive(ctx, oc.input):
        return
    ord_ = oc.operand(1, "ord")
    if isinstance(ord_, ast.Constant) and ord_.value not in (2, 2.0, "euclidean", "fro", None):
        return  # an L1 or max norm: a finite subgradient at 0
    name = oc.qualname.replace("tensorflow.", "tf.").replace("jax.numpy.", "jnp.")
    ctx.report(SQRT_SUM_SQUARES, oc.node, f"`{name}` of a vector that can be 0", "norm_zero", subject=oc.input)


ON_CALL = {"norm": [check_norm], "sqrt": [check_root], "rsqrt": [check_root], "pow": [check_root],
           "acos": [check_acos], "asin": [check_acos]}
ON_POWER = [check_root]
