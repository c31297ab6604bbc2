"""Sample statistics over a dimension that can have size 1 (NG801)."""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import CERTAIN, POSSIBLE, VALUE, Rule
from nanguard.lint.names import METHOD, TORCH, OpCall
from nanguard.lint.rules.base import checks
from nanguard.lint.syntax import const_value

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
reduce_std/reduce_variance use N and are not affected.) Certain (the default) when the
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
    ctx.report(STD_OF_ONE, oc.node, f"`{oc.op}` over dim 0 with Bessel's correction", "std_degenerate",
               confidence=CERTAIN if _callers_batch(ctx, oc.input) else None)


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
