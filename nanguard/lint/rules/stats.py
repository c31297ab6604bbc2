"""Sample statistics over a dimension that can have size 1 (NG801)."""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.autodiff_markers import parsed_annotation
from nanguard.lint.model import CERTAIN, POSSIBLE, VALUE, Rule
from nanguard.lint.names import METHOD, TORCH, OpCall
from nanguard.lint.rules.base import checks
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import bounded_walk, callee_name, const_value

STD_OF_ONE = Rule(
    code="NG801",
    name="unbiased-std-over-batch",
    summary="`x.std(0)`, `torch.var(x, dim=0)` with Bessel's correction",
    hazard=VALUE,
    confidence=POSSIBLE,
    certain_when="a parameter of a module-level function or method",
    hazards=("std_degenerate",),
    explanation="""\
torch.std and torch.var use correction=1 by default. Dim 0 is usually the batch, and a
batch of one happens (the last, incomplete batch of an epoch; single-sample inference; one
element per group).

    x = (x - x.mean(0)) / x.std(0)           # NaN for a batch of one
->  x = (x - x.mean(0)) / nanguard.std(x, dim=0)
    # or x.std(0, correction=0) when the population statistic is what you mean

Reported for torch std/var/std_mean/var_mean over dim 0 with the default correction. (TF's
reduce_std/reduce_variance use N and are not affected, nor is NumPy's std: a statistic a
class stores on `self` and later passes to `torch.from_numpy` was NumPy's, and so is the std of a
parameter annotated `np.ndarray` or `jax.Array`.) Certain (the default) when the
statistic is taken of a parameter of a module-level function or a method, unchanged: whoever
calls it decides the batch, and a batch of one is an input it accepts. Possible otherwise (a dataset's
column, a reshaped feature map: their row count is the data's).""",
)

RULES = [STD_OF_ONE]


def _is_dim_zero(expr) -> bool:
    if expr is None:
        return False
    if isinstance(expr, (ast.Tuple, ast.List)):
        return len(expr.elts) == 1 and const_value(expr.elts[0]) == 0
    return const_value(expr) == 0 and not (isinstance(expr, ast.Constant) and isinstance(expr.value, bool))


@checks("NG801")
def check_std(ctx: Analysis, oc: OpCall) -> None:
    if oc.framework not in (TORCH, METHOD) or (oc.method and ctx.imports.default_framework != TORCH):
        return  # TF's reduce_std, NumPy's and JAX's std divide by n (ddof=0): no n - 1 = 0
    correction = oc.keyword("correction")
    if correction is not None and const_value(correction) != 1:
        return
    unbiased = oc.keyword("unbiased")
    if unbiased is not None and not (isinstance(unbiased, ast.Constant) and unbiased.value is True):
        return
    if oc.keyword("ddof") is not None:
        return  # numpy/pandas spelling: not torch
    dim = oc.operand(1, "dim")
    if isinstance(dim, ast.Constant) and isinstance(dim.value, bool):
        return  # old `x.std(False)` signature: unbiased=False
    pos = oc.positional
    if len(pos) >= 3 and isinstance(pos[2], ast.Constant) and pos[2].value is False:
        return  # `torch.std(x, 0, False)`: unbiased=False
    if not _is_dim_zero(dim):
        return
    if _batch_size_checked(ctx):
        return  # `if x.size(0) <= 1: raise ValueError(...)`: n - 1 >= 1
    if _kept_as_a_numpy_array(ctx, oc.node):
        return  # a scaler's `self.std = data.std(0)` later read by `torch.from_numpy(self.std)`: NumPy's, ddof=0
    if oc.method and _annotated_as_an_array(ctx, oc.input):
        return  # `def compute_mean_std(states: np.ndarray, ...)`: NumPy's or JAX's std, ddof=0
    if oc.method and _numpy_where_torch_is_local(ctx):
        return  # diff-svc's `cwt.py`: a NumPy module whose other functions `import torch` inside them
    ctx.report(STD_OF_ONE, oc.node, f"`{oc.op}` over dim 0 with Bessel's correction", "std_degenerate",
               confidence=CERTAIN if _callers_batch(ctx, oc.input) else None)


def _leading_size(expr: ast.expr) -> bool:
    """`x.size(0)`, `x.shape[0]`, `len(x)`: the size std(0) divides by (less one)."""
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "len":
            return True
        return isinstance(func, ast.Attribute) and func.attr == "size" and len(expr.args) == 1 \
            and const_value(expr.args[0]) == 0
    return isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) \
        and expr.value.attr == "shape" and const_value(expr.slice) == 0


def _batch_size_checked(ctx: Analysis) -> bool:
    """Does the enclosing function leave (raise or return) when the batch has fewer than 2
    rows: `if target.size(0) <= 1: raise ValueError(...)`?"""
    fn = ctx.scope.node
    for node in bounded_walk(fn, 3000):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1):
            continue
        left, right, op = node.test.left, node.test.comparators[0], node.test.ops[0]
        bound = const_value(right)
        small = (isinstance(op, ast.LtE) and bound in (0, 1)) or (isinstance(op, ast.Lt) and bound in (1, 2)) \
            or (isinstance(op, ast.Eq) and bound == 1)
        if small and _leading_size(left) and any(isinstance(s, (ast.Raise, ast.Return)) for s in node.body):
            return True
    return False


def _kept_as_a_numpy_array(ctx: Analysis, node: ast.AST) -> bool:
    """Is the statistic stored on `self` and turned into a tensor with `torch.from_numpy`
    elsewhere in the class (Informer's and Pyraformer's `StandardScaler`, whose `fit` gets the
    training data as a NumPy array)? Then it is NumPy's std, which divides by n."""
    key = ctx.assigned_to.get(id(node))
    if key is None or not key.startswith("self."):
        return False
    s = ctx.scope
    while s is not None and not isinstance(s.node, ast.ClassDef):
        s = s.parent
    if s is None:
        return False
    return any(isinstance(n, ast.Call) and callee_name(n.func) == "from_numpy" and n.args
               and name_key(n.args[0]) == key for n in bounded_walk(s.node, 3000))


# Annotations of NumPy and JAX arrays, whose `std`/`var` divide by n (ddof=0). pandas' divide by
# n - 1, like torch's.
_ARRAY_TYPES = frozenset({"numpy.ndarray", "numpy.typing.NDArray", "numpy.typing.ArrayLike", "jax.Array",
                          "jax.numpy.ndarray", "jax.numpy.DeviceArray", "jax.numpy.array"})


def _numpy_where_torch_is_local(ctx: Analysis) -> bool:
    """Does the module import NumPy but not torch at its top, and the function around the call
    import no torch either? Its method calls (`w.std(0)`) are then NumPy's, although another
    function of the module imports torch inside its body."""
    roots = {target.split(".", 1)[0] for target in ctx.imports.module_level.values()}
    if "numpy" not in roots or roots & {"torch", "functorch"}:
        return False
    s = ctx.scope
    while s is not None and not isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        s = s.parent
    return s is None or not any(
        isinstance(n, (ast.Import, ast.ImportFrom)) and any(
            (a.name if isinstance(n, ast.Import) else (n.module or "")).split(".", 1)[0] == "torch" for a in n.names)
        for n in ast.walk(s.node))


def _annotated_as_an_array(ctx: Analysis, expr: ast.expr | None) -> bool:
    """Is `expr` a parameter annotated as a NumPy or JAX array (`states: np.ndarray`,
    `x: npt.NDArray[np.float32]`, `Optional[jax.Array]`), unchanged in the function?"""
    scope = ctx.parameter_scope(expr) if expr is not None else None
    if scope is not ctx.scope or not isinstance(expr, ast.Name) \
            or not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = scope.node.args
    ann = parsed_annotation(next((a.annotation for a in args.posonlyargs + args.args + args.kwonlyargs
                                  if a.arg == expr.id), None))
    if ann is None:
        return False
    nodes = list(bounded_walk(ann, 40))
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # `np` of `np.ndarray`
    named = [ctx.imports.qualname(n) for n in nodes if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in inner]
    types = {q for q in named if q is not None and q.split(".", 1)[0] in ("numpy", "jax", "torch", "pandas",
                                                                          "tensorflow")}
    return bool(types) and all(t in _ARRAY_TYPES or t.startswith("numpy.float") for t in types)


def _callers_batch(ctx: Analysis, expr: ast.expr | None) -> bool:
    """Is `expr` an unchanged parameter of the enclosing function, a module-level function or a
    method?"""
    scope = ctx.parameter_scope(expr) if expr is not None else None
    if scope is not ctx.scope:
        return False
    # A nested helper's enclosing function chooses what it gets (Marigold's `ensemble(depth)`
    # runs only for an ensemble of more than one).
    return scope is not None and scope.parent is not None \
        and isinstance(scope.parent.node, (ast.Module, ast.ClassDef))


ON_CALL = {"std": [check_std], "var": [check_std], "std_mean": [check_std], "var_mean": [check_std]}
