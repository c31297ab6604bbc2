"""Softmax written as `exp(x) / exp(x).sum()` without subtracting the maximum (NG901)."""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.grad_reach import module_attribute, number_default
from nanguard.lint.model import VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.signs import nonpositive_by_construction
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, const_value, last_identifier, parameter_default

NAIVE_SOFTMAX = Rule(
    code="NG901",
    name="hand-written-softmax",
    summary="`exp(x) / exp(x).sum(dim)` without subtracting max(x)",
    hazard=VALUE,
    hazards=("softmax_overflow",),
    explanation="""\
    e = torch.exp(scores)
    p = e / e.sum(dim=-1, keepdim=True)
->  p = torch.softmax(scores, dim=-1)          # nanguard.softmax(scores, -1, mask=m) with a mask

Not reported when the exponent has the maximum subtracted (`x - x.max(-1, keepdim=True)
.values`, `x - m`), or is otherwise bounded above, or takes no data (fixed weights over an
`arange`/`linspace`/`meshgrid` grid, such as a Gaussian kernel).""",
)

RULES = [NAIVE_SOFTMAX]


def _exp_of(ctx: Analysis, expr: ast.expr) -> OpCall | None:
    e = strip_wrappers(ctx, ctx.resolve(expr))
    oc = ctx.op(e)
    return oc if oc is not None and oc.op == "exp" else None


@checks("NG901")
def check_naive_softmax(ctx: Analysis, node) -> None:
    if isinstance(node, ast.BinOp):
        left, right = node.left, node.right
    elif isinstance(node, ast.AugAssign) and name_key(node.target) is not None:
        left, right = node.target, node.value  # `e /= e.sum(-1, keepdim=True)`
    else:
        return
    numerator = _exp_of(ctx, left)
    if numerator is None and isinstance(node, ast.AugAssign):
        # `e = exp(x); e /= ...` binds `e` twice; the value divided is the last one before.
        _, values = ctx.lookup(name_key(left))  # type: ignore[arg-type]
        prior = [v for v in values if v is not None and v.lineno < node.lineno]
        numerator = _exp_of(ctx, prior[-1]) if prior else None
    if numerator is None or numerator.input is None:
        return
    den = strip_wrappers(ctx, ctx.resolve(right))
    total = ctx.op(den)
    if total is None or total.op != "sum" or total.input is None:
        return
    inner = strip_wrappers(ctx, total.input)
    same_name = name_key(inner) is not None and name_key(inner) == name_key(left)
    if not same_name:
        denominator_exp = _exp_of(ctx, inner)
        if denominator_exp is None or denominator_exp.input is None:
            return
        if ast.dump(denominator_exp.input) != ast.dump(numerator.input):
            return
    if nonpositive_by_construction(ctx, numerator.input) or _grid(ctx, numerator.input):
        return
    if isinstance(node, ast.AugAssign) and _normalised_before(ctx, node, numerator):
        return  # `Q /= Q.sum(); Q /= Q.sum(1)` (Sinkhorn): only the first division can meet an inf
    ctx.report(NAIVE_SOFTMAX, node, "softmax by hand without subtracting the max", "softmax_overflow")


def _grid(ctx: Analysis, expr: ast.expr) -> bool:
    """Fixed weights over a grid, not data: `exp(linspace(-eta, 0, n))`, or a Gaussian kernel
    `exp(-sum((stack(meshgrid(arange(n))) - c) ** 2, -1) / (2 * sigma ** 2))`: every tensor the
    exponent is built from is a grid factory's, and the function's parameters enter only as
    numbers beside it (a parameter that an op reduces or reshapes may be data)."""
    return _kind(ctx, strip_wrappers(ctx, ctx.resolve(expr)), 16) == "grid"


_GRID_FACTORIES = frozenset({"linspace", "arange", "logspace", "meshgrid"})
_NUMBER_BUILTINS = frozenset({"int", "float", "round"})


def _kind(ctx: Analysis, expr: ast.expr, depth: int) -> str:
    """"grid" (built from a grid factory), "number" (constants and Python numbers), "param" (a
    name not assigned here, or numbers made with one) or "data"."""
    if depth < 0:
        return "data"
    if const_value(expr) is not None:
        return "number"
    if isinstance(expr, ast.Name):
        value = ctx.value_of(expr)
        if value is None:
            value = _unpacked(ctx, expr.id)
        if value is not None:
            return _kind(ctx, value, depth - 1)
        if expr.id in _python_numbers(ctx) or _number_when_none(ctx, expr.id, depth):
            return "number"
        return "param"
    if isinstance(expr, (ast.List, ast.Tuple)):
        return _combine([_kind(ctx, e, depth - 1) for e in expr.elts])
    if isinstance(expr, ast.Starred):
        return _kind(ctx, expr.value, depth - 1)
    if isinstance(expr, ast.UnaryOp):
        return _kind(ctx, expr.operand, depth - 1)
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.left, (ast.List, ast.Tuple)):  # `[arange(n)] * d`
            return _kind(ctx, expr.left, depth - 1)
        kinds = [_kind(ctx, expr.left, depth - 1), _kind(ctx, expr.right, depth - 1)]
        return "data" if "grid" in kinds and "param" in kinds else _combine(kinds)  # `x * grid`: x may be data
    if not isinstance(expr, ast.Call):
        return "data"
    name = last_identifier(expr.func)
    if name in _GRID_FACTORIES:
        return "grid"
    if isinstance(expr.func, ast.Name) and name in _NUMBER_BUILTINS:
        return "number"
    oc = ctx.op(expr)
    operand = oc.input if oc is not None else None
    if operand is None and isinstance(expr.func, ast.Attribute) and not module_attribute(ctx, expr.func):
        operand = expr.func.value  # `grid_x.repeat(n).view(n, n)`, `grid_x.t()`: the receiver
    elif operand is None and expr.args:
        operand = expr.args[0]  # `torch.stack([gx, gy], dim=-1)`
    if operand is None:
        return "data"
    kind = _kind(ctx, operand, depth - 1)
    return "data" if kind == "param" else kind  # an op's tensor operand taken from a parameter: data


def _number_when_none(ctx: Analysis, name: str, depth: int) -> bool:
    """`std=None`, then `if std is None: std = np.sqrt(-(radius ** 2) / (2 * np.log(0.05)))`: a
    parameter defaulting to None whose every other value is a number."""
    scope, values = ctx.lookup(name)
    others = [v for v in values if v is not None]
    if scope is None or not others or len(others) != len(values) - 1:
        return False
    default = parameter_default(scope.node, name)
    return isinstance(default, ast.Constant) and default.value is None \
        and all(_kind(ctx, v, depth - 1) == "number" for v in others)


def _unpacked(ctx: Analysis, name: str) -> ast.expr | None:
    """The call a name is bound to once, by unpacking its result (`gx, gy = meshgrid(...)`)."""
    scope, values = ctx.lookup(name)
    calls = scope.unpacked.get(name, []) if scope is not None else []
    return calls[0] if len(calls) == 1 and len(values) == 1 else None


def _python_numbers(ctx: Analysis) -> frozenset:
    """Names the current function uses as Python numbers: passed to `int`, `float` or `round`,
    given as a grid's size (`arange(kernel_size)`), or parameters defaulting to a number."""
    key = f"python_numbers:{id(ctx.scope.node)}"
    if key not in ctx.memo:
        fn = ctx.scope.node
        found = {n for call in bounded_walk(fn, 4000)
                 if isinstance(call, ast.Call) and (
                     isinstance(call.func, ast.Name) and call.func.id in _NUMBER_BUILTINS
                     or last_identifier(call.func) in ("arange", "linspace", "range"))
                 for arg in call.args for n in _arithmetic_names(arg)}
        args = getattr(fn, "args", None)
        if args is not None:
            found |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if number_default(fn, a.arg)}
        ctx.memo[key] = frozenset(found)
    return ctx.memo[key]  # type: ignore[no-any-return]


def _arithmetic_names(expr: ast.expr) -> list[str]:
    """The names `expr` does arithmetic with (`3 * sigma`), not those it reads an attribute, an
    entry or a call result of (`x.shape[0]`, `len(x)`: x itself may be a tensor)."""
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.UnaryOp):
        return _arithmetic_names(expr.operand)
    if isinstance(expr, ast.BinOp):
        return _arithmetic_names(expr.left) + _arithmetic_names(expr.right)
    return []


def _combine(kinds: list) -> str:
    for kind in ("data", "grid", "param"):
        if kind in kinds:
            return kind
    return "number"



def _normalised_before(ctx: Analysis, node: ast.AugAssign, exp: OpCall) -> bool:
    """Was the name already divided in place between its exp and `node`?"""
    key = name_key(node.target)
    start = exp.node.lineno
    return any(isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and name_key(n.target) == key
               and start <= n.lineno < node.lineno for n in bounded_walk(ctx.scope.node, 4000))


ON_DIVISION = [check_naive_softmax]
