"""`log(1 - exp(x))` and `log1p(-exp(x))`: log(1 − p) from a log-probability (NG103).

For a log-probability x ≤ 0 near 0, exp(x) rounds to exactly 1 and 1 − exp(x) cancels to 0:
the log is −inf (and its gradient inf) where the true value, about log(−x), is finite. ORPO's
odds ratio `log(1 - exp(logp_chosen)) - log(1 - exp(logp_rejected))` is then −inf − (−inf) = NaN
as soon as the model is sure of both answers. `log(-expm1(x))` does not cancel.
"""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import POSSIBLE
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import selection_bound, strip_wrappers
from nanguard.lint.rules.base import checks, via
from nanguard.lint.rules.exp_log import LOG_ONE_MINUS_SIGMOID, one_minus, op_through_name
from nanguard.lint.syntax import bounded_walk, callee_name

_LOG_PROB_OPS = frozenset({"log_softmax", "logsigmoid", "log_sigmoid"})


def _a_log_probability(ctx: Analysis, x: ast.expr) -> bool:
    """Is `x` visibly a log-probability, 0 for a sure outcome: a log_softmax or logsigmoid output,
    or named or computed as one (`chosen_logps`, `self.compute_logps(...)`, `log_prob`)?
    Anything else (a diffusion schedule's `log_alpha`, a survival function) is possible."""
    values: list[ast.expr] = [x]
    frontier: list[ast.expr] = [x]
    for _ in range(2):  # the names in `x`, then the names in their values: two assignments back
        found = [ctx.value_of(n) for root in frontier for n in bounded_walk(root, 80) if isinstance(n, ast.Name)]
        frontier = [v for v in found if v is not None and all(v is not seen for seen in values)]
        values.extend(frontier)
    for root in values:
        for node in bounded_walk(root, 60):
            ident = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
            if isinstance(node, ast.Call):
                ident = callee_name(node.func)
                oc = ctx.op(node)
                if oc is not None and oc.op in _LOG_PROB_OPS:
                    return True
            if "logp" in ident.replace("_", "").lower():
                return True
    return False


def _selected_below_zero(ctx: Analysis, x: ast.expr) -> bool:
    """`x[t]` with `t = x < log(0.5)` (a log1mexp by hand): only entries bounded away from 0."""
    picked = selection_bound(ctx, x)
    return picked is not None and isinstance(picked[0], (ast.Lt, ast.LtE)) and picked[1] < 0


@checks("NG103")
def check_log_one_minus_exp(ctx: Analysis, oc: OpCall) -> None:
    arg = oc.input
    if arg is None or id(oc.node) in ctx.in_where:
        return  # `where(x < log(2), log(-expm1(-x)), log1p(-exp(-x)))` (log1mexp): the branch picked away from 0
    if oc.op == "log1p":
        if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
            exp, _ = op_through_name(ctx, strip_wrappers(ctx, arg.operand))
            _report(ctx, oc, exp if exp is not None and exp.op == "exp" else None, "`log1p(-exp(x))`")
        return
    if oc.op != "log":
        return
    value = ctx.value_of(arg)
    for expr in (arg, value):
        exp, _ = one_minus(ctx, strip_wrappers(ctx, expr), "exp") if expr is not None else (None, None)
        if exp is not None:
            _report(ctx, oc, exp, "`log(1 - exp(x))`" + via(ctx, arg, value if expr is value else None))
            return


def _report(ctx: Analysis, oc: OpCall, exp: OpCall | None, pattern: str) -> None:
    if exp is None or exp.input is None or _selected_below_zero(ctx, strip_wrappers(ctx, exp.input)):
        return
    confidence = None if _a_log_probability(ctx, exp.input) else POSSIBLE
    ctx.report(LOG_ONE_MINUS_SIGMOID, oc.node, pattern, "log_one_minus_exp", confidence=confidence)


ON_CALL = {"log": [check_log_one_minus_exp], "log1p": [check_log_one_minus_exp]}
RULES: list = []  # NG103 is defined with its family in exp_log
