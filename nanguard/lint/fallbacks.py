"""Functions defined only where the framework lacks an op of the same name: old-version fallbacks.

    if "sinc" in dir(torch):
        sinc = torch.sinc
    else:
        def sinc(x):  # torch < 1.8 only
            return torch.where(x == 0, 1.0, torch.sin(math.pi * x) / math.pi / x)

(alias-free-torch's filter, copied into BigVGAN, Amphion, GPT-SoVITS...). The fallback runs only
on framework versions that have no `torch.sinc`, none that nanguard supports; wherever the code
runs today the framework's own op is used. Its findings are lowered to "possible" (README, "Lint").
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis

_FRAMEWORKS = ("torch", "tensorflow", "jax", "numpy")


def _string(expr: ast.expr) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _tested_op(ctx: Analysis, test: ast.expr) -> tuple[str, bool] | None:
    """`"sinc" in dir(torch)` or `hasattr(torch, "sinc")`: ("sinc", True); `not ...`: ("sinc", False)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _tested_op(ctx, test.operand)
        return (inner[0], not inner[1]) if inner is not None else None
    module: ast.expr | None = None
    name = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn)):
        call = test.comparators[0]
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "dir" \
                and len(call.args) == 1:
            module, name = call.args[0], _string(test.left)
            if isinstance(test.ops[0], ast.NotIn) and isinstance(name, str):
                return _framework_op(ctx, module, name, False)
    elif isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr" \
            and len(test.args) == 2:
        module, name = test.args[0], _string(test.args[1])
    if module is None or not isinstance(name, str):
        return None
    return _framework_op(ctx, module, name, True)


def _framework_op(ctx: Analysis, module: ast.expr, name: str, present: bool) -> tuple[str, bool] | None:
    qualname = ctx.imports.qualname(module) or ""
    return (name, present) if qualname.split(".")[0] in _FRAMEWORKS else None


def _fallbacks(ctx: Analysis) -> set[int]:
    found: set[int] = set()
    for stmt in ctx.tree.body:
        if not isinstance(stmt, ast.If):
            continue
        tested = _tested_op(ctx, stmt.test)
        if tested is None:
            continue
        name, present = tested
        branch = stmt.orelse if present else stmt.body  # where the framework lacks the op
        found.update(id(d) for d in branch if isinstance(d, ast.FunctionDef) and d.name == name)
    return found


def defined_as_a_fallback(ctx: Analysis) -> bool:
    """Is the code being read inside a function defined only where the framework lacks its name?"""
    fallbacks = ctx.memo.get("version_fallbacks")
    if fallbacks is None:
        fallbacks = ctx.memo["version_fallbacks"] = _fallbacks(ctx)
    if not fallbacks:
        return False
    s = ctx.scope
    while s is not None:
        if id(s.node) in fallbacks:
            return True
        s = s.parent
    return False
