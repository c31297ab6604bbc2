"""acos/asin of a cosine, which reaches ±1 and rounds past it (NG303)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import dominates
from nanguard.lint.model import CERTAIN, GRADIENT, POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import local_constant, strip_wrappers
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import additive_terms, bounded_walk, callee_name, const_value, is_eps_like

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

RULES = [ACOS_COSINE]


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
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and _over_norms(ctx, e.right)


def _shrunk_unit(ctx: Analysis, expr: ast.expr) -> bool:
    """A unit vector scaled by a number in (0, 1) (`x / x.norm(dim=1) * 0.999999`, also held in a
    name): a dot product with another unit vector stays that far inside (-1, 1)."""
    value = ctx.last_value(expr) if name_key(expr) is not None else expr
    e = strip_wrappers(ctx, value) if value is not None else None
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult)):
        return False
    for factor, other in ((e.left, e.right), (e.right, e.left)):
        c = local_constant(ctx, factor)
        if c is not None and 0 < c < 1:
            return _normalised(ctx, other)
    return False


def _over_norms(ctx: Analysis, denominator: ast.expr) -> bool:
    """Is there a norm or a square root in the denominator, or in the value of the name holding it
    (`length_prod = a.norm(dim=-1) * b.norm(dim=-1)`)?"""
    held = ctx.last_value(denominator) if name_key(denominator) is not None else None
    return any(_a_norm(ctx, n) for part in (denominator, held) if part is not None
               for n in bounded_walk(part, 60) if isinstance(n, ast.Call))


def _a_norm(ctx: Analysis, call: ast.Call) -> bool:
    """`x.norm(dim=-1)`, or the square root of a sum (`sqrt((x * x).sum(-1))`), not of a number
    (`sqrt(2.0 * n + 1.0)`)."""
    oc = ctx.op(call)
    if oc is None or oc.op not in ("norm", "sqrt"):
        return False
    return oc.op == "norm" or oc.input is None or any(
        getattr(ctx.op(n), "op", "") in ("sum", "matmul", "einsum", "dot", "square")
        or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
        for n in bounded_walk(oc.input, 40))


def true_cosine(ctx: Analysis, expr: ast.expr) -> bool:
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
            lo = oc.operand(1, "min", "clip_value_min", "a_min")  # NumPy spells them `a_min`, `a_max`
            hi = oc.operand(2, "max", "clip_value_max", "a_max")
            if _strictly_inside(ctx, lo, False) and _strictly_inside(ctx, hi, True):
                return "guarded"
            inner = _cosine_state(ctx, oc.input, depth - 1) if depth > 0 else None
            lv, hv = const_value(lo), const_value(hi)
            if lv is not None and hv is not None and -1 <= lv and hv <= 1:
                return "clamped"  # `clip((trace(R) - 1) / 2, -1, 1)`: in range, whatever it holds
            return "clamped" if inner in ("raw", "clamped") else inner
        if oc.op in ("cosine_similarity", "matmul"):
            return "raw"
        if oc.op == "sum" and oc.input is not None:
            s = strip_wrappers(ctx, oc.input)
            if isinstance(s, ast.BinOp) and isinstance(s.op, ast.Mult):
                shrunk = [_shrunk_unit(ctx, f) for f in (s.left, s.right)]
                if any(shrunk) and all(k or _normalised(ctx, f) for k, f in zip(shrunk, (s.left, s.right))):
                    return "guarded"  # pytorch-3dunet's angular loss: unit vectors times 0.999999
                return "raw"
        return None
    if isinstance(e, ast.Call) and _BOUNDING_HELPER.search(callee_name(e.func)):
        return "guarded"  # `_safe_dot(a, b, eps)`, `clipped_cos(...)`: a helper named for the bound it keeps
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, ast.MatMult):
            return "raw"
        if isinstance(e.op, ast.Div):
            if _over_norms(ctx, e.right):
                return "raw"
        return None
    if isinstance(e, (ast.Name, ast.Attribute)):
        ident = e.id if isinstance(e, ast.Name) else e.attr
        if any(w in ident.lower() for w in _COS_WORDS):
            return "raw"
    return None


# A helper whose name says it keeps its result in range (tensorflow_graphics' `_safe_dot`, which
# shrinks the dot product by 1 - eps): its author bounded the value; the rule reads the name.
_BOUNDING_HELPER = re.compile(r"(^|_)(safe|clip|clipped|clamp|clamped|shrink|bounded)(_|$)", re.IGNORECASE)

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
    """Is `node` inside an `if`/`else` whose test compares the name `expr` (or its abs), or after
    an `if` that does and leaves (`if abs(dot) > 0.9995: return lerp(...)`, mergekit's slerp)?"""
    key = name_key(expr)
    line = getattr(node, "lineno", None)
    if key is None or line is None:
        return False
    for stmt in bounded_walk(ctx.scope.node, 4000):
        if not isinstance(stmt, ast.If) or not _compares(stmt.test, key):
            continue
        if stmt.lineno < line <= (stmt.end_lineno or 0):
            return True
        if (stmt.end_lineno or line) < line and isinstance(stmt.body[-1], _EXITS) \
                and dominates(ctx, ctx.scope.node, stmt.lineno, line):
            return True
    return False


_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _compares(test: ast.expr, key: str) -> bool:
    return any(isinstance(cmp, ast.Compare) and any(name_key(n) == key for o in [cmp.left, *cmp.comparators]
                                                    for n in bounded_walk(o, 20))
               for cmp in bounded_walk(test, 40))


@checks("NG303")
def check_acos(ctx: Analysis, oc: OpCall) -> None:
    if oc.input is None:
        return
    constant = local_constant(ctx, oc.input)
    if constant is not None and abs(constant) < 1:
        return  # `asin(phi / np.sqrt(3))` of numbers: no rounding near ±1, no gradient
    if _compared_by_enclosing_if(ctx, oc.node, oc.input):
        return  # `if abs(dot) > 0.9995: lerp ... else: acos(dot)` (slerp): the branch bounds it
    state = _cosine_state(ctx, oc.input)
    if state is None and _named_cosine(oc.input):
        state = "raw"  # `cos = (trace - 1) / 2`: a cosine by its name, whatever computed it
    name = "acos" if oc.op == "acos" else "asin"
    if state == "raw" and ctx.value_only_reported(oc.node):
        return  # `angle = degrees(arccos(c))` then `if lo < angle < hi:`: a NaN only compared or shown
    if state == "raw":
        confidence = CERTAIN if true_cosine(ctx, oc.input) or _named_cosine(oc.input) else POSSIBLE
        ctx.report(ACOS_COSINE, oc.node, f"`{name}` of a cosine/dot product", f"{name}_domain", hazard=VALUE,
                   subject=oc.input, confidence=confidence)
    elif state == "clamped":
        ctx.report(ACOS_COSINE, oc.node, f"`{name}` of a cosine clamped to [-1, 1] (finite value, inf gradient "
                   "at ±1)", f"{name}_domain", hazard=GRADIENT, subject=oc.input, confidence=POSSIBLE)


ON_CALL = {"acos": [check_acos], "asin": [check_acos]}
