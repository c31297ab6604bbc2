"""Roots at the edge of their domain: Gram distances, hand-written norms, fractional powers (NG301, NG302, NG304)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import CERTAIN, GRADIENT, POSSIBLE, VALUE, Rule
from nanguard.lint.names import JAX, KERAS, TF, OpCall
from nanguard.lint.naming import is_count_name, is_mask_like
from nanguard.lint.patterns import strip_wrappers, tensor_literal
from nanguard.lint.positive import clamp_lower, guarded_positive
from nanguard.lint.rules.base import checks
from nanguard.lint.rules.inverse_trig import true_cosine
from nanguard.lint.scope import name_key
from nanguard.lint.shapes import (
    difference_along_edges,
    difference_of_points,
    gram_expansion,
    has_tensor_op,
    square_base,
    squared_vectors,
    sum_of_squares,
)
from nanguard.lint.syntax import bounded_walk, const_value

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
    certain_when="the norm of a difference, an RMSE",
    hazards=("norm_zero",),
    explanation="""\
Torch's own norms define the gradient at the zero vector as 0 (the minimum-norm
subgradient), which is what a hand-written norm loses.

    n = torch.sqrt((x ** 2).sum(-1))
->  n = torch.linalg.vector_norm(x, dim=-1)    # or nanguard.norm(x, dim=-1)

A gradient hazard: not reported inside `torch.no_grad()`. With `rsqrt` or a negative
power (1/norm) the value itself is inf for the zero vector, and it is always reported.""",
)

ROOT_OF_ZERO = Rule(
    code="NG304",
    name="fractional-power-at-zero",
    summary="`x ** p` with 0 < p < 1, or p < 0, on a value that can be exactly 0",
    hazard=GRADIENT,
    confidence=POSSIBLE,
    certain_when="a root of a TensorFlow/Keras relu, of a mask's count, of a distance, or of 1 − cos² "
                 "for a cosine of unit vectors (ArcFace's sine)",
    hazards=("fractional_power_zero", "sqrt_zero", "negative_power_zero"),
    explanation="""\
Values that are exactly 0 on purpose are common: abs() and relu() outputs, variances of
constant features, norms and distances of equal points, squares, and counts (the degree of
an isolated node in `deg ** -0.5`). A root of a relu output is a risk in TensorFlow and Keras,
whose relu gradient multiplies (0·inf = NaN); PyTorch's and `jax.nn.relu`'s backward select
(0 where the output is 0), so `torch.sqrt(F.relu(z))` has a finite gradient and is not reported.

    std = torch.sqrt(x.var(dim=0))          # NaN gradient for a constant feature
->  std = nanguard.sqrt(x.var(dim=0))        # gradient 0 at 0 (or add the usual eps)
    y = torch.abs(x) ** 0.5
->  y = nanguard.pow(torch.abs(x), 0.5)

Reported only when the base is visibly one of those zero-able values and is not guarded
(`+ eps`, a positive clamp, a later in-place fix of the result such as
`d_inv[d_inv == inf] = 0`). Roots of squared distances and sums of squares are NG301/NG302.""",
)

RULES = [SQRT_GRAM, SQRT_SUM_SQUARES, ROOT_OF_ZERO]


def _through_zero_clamp(ctx: Analysis, expr: ast.expr) -> tuple[ast.expr, bool]:
    """Look through `clamp(d, min=0)`, `d.clamp_min(0)`, `relu(d)`: (inner expression, clamped?).
    A name clamped in place of itself (`d = d.clamp(min=0)` then `d.sqrt()`) is read through to
    what it held before the clamp."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if isinstance(e, ast.Name) and ctx.value_of(e) is None:
        last = ctx.last_value(e)
        if last is not None:
            inner, clamped = _zero_clamp_of(ctx, strip_wrappers(ctx, last))
            prior = ctx.last_value(inner) if clamped and isinstance(inner, ast.Name) and inner.id == e.id else None
            if prior is not None:
                return strip_wrappers(ctx, prior), True
    return _zero_clamp_of(ctx, e)


def _zero_clamp_of(ctx: Analysis, e: ast.expr) -> tuple[ast.expr, bool]:
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
        if oc.op == "relu" and p > 0 and oc.framework not in (TF, KERAS):
            return None  # torch's and jax.nn.relu's backward select: 0 where relu is 0, not 0·inf
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
            else "of a sum of squares of a difference along a graph's edges (0 on an edge from a node to " \
            "itself, if the graph has one)" if vectors and all(difference_along_edges(ctx, v) for v in vectors) \
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
        reason.startswith("a norm") and _norm_of_difference(ctx, base)) or (
        reason.startswith("`1 - c²`") and _of_a_true_cosine(ctx, inner if inner is not None else base))
    confidence = CERTAIN if certain else POSSIBLE
    ctx.report(ROOT_OF_ZERO, node, f"`{what}` of {reason}", key, hazard=hazard, subject=base, confidence=confidence)


def _of_a_true_cosine(ctx: Analysis, expr: ast.expr) -> bool:
    """`1 - cos²` of a cosine of vectors (`F.linear(F.normalize(x), F.normalize(w))`, ArcFace's
    sine): parallel vectors round the cosine to ±1, and past it."""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub)):
        return False
    c = square_base(ctx, strip_wrappers(ctx, e.right))
    return c is not None and true_cosine(ctx, c)


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


ON_CALL = {"norm": [check_norm], "sqrt": [check_root], "rsqrt": [check_root], "pow": [check_root]}
ON_POWER = [check_root]
