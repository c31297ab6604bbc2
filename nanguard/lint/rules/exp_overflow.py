"""exp of a predicted log-scale (a VAE's `exp(0.5 * logvar)`) with nothing bounding it (NG106)."""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.signs import nonpositive_by_construction
from nanguard.lint.rules.base import checks, via
from nanguard.lint.syntax import callee_name, const_value, describe

EXP_OF_LOG_SCALE = Rule(
    code="NG106",
    name="exp-of-predicted-log-scale",
    summary="`torch.exp(0.5 * logvar)`, `log_sigma.exp()` on a network's output, unbounded",
    hazard=VALUE,
    confidence=POSSIBLE,
    hazards=("exp_overflow",),
    explanation="""\
A network that predicts a log-variance, log-standard-deviation or log-scale (a VAE's
encoder, a Gaussian policy, a heteroscedastic regression head) is free to output any number;
one step with a large learning rate or an outlier batch pushes it above 88.7 (177 for
`exp(0.5 * logvar)`) in float32 (11 in float16), the std or the KL term becomes inf, and
every weight is NaN after the update. The audit and the detector find these in practice
(pytorch/examples' VAE).

    mu, logvar = self.fc_mu(h), self.fc_logvar(h)
    std = torch.exp(0.5 * logvar)
->  logvar = logvar.clamp(-30.0, 20.0)          # or: std = F.softplus(raw) + 1e-4
    std = torch.exp(0.5 * logvar)

Possible (reported with `--confidence all`): whether it overflows depends on what the network
learns. Reported for exp of a value whose name says it is a log-scale (`logvar`, `log_var`,
`log_sigma`, `log_std`, `logstd`, `log_scale`), times a positive constant, unless it is
bounded above first (a clamp, min, tanh, -softplus).""",
)

RULES = [EXP_OF_LOG_SCALE]

_LOG_SCALE = re.compile(r"^log_?(var|variance|vars|sigma|sigmas|std|stds|stddev|sd|scale|scales)(_|$)", re.I)
_BOUNDING = frozenset({"clamp", "clip", "clamp_max", "minimum", "tanh", "sigmoid", "hardtanh", "clip_by_value"})


def _positive_scale(ctx: Analysis, x: ast.expr) -> ast.expr | None:
    """`c * v`, `v * c`, `v / c` with c > 0 constant, or `v`: the v, else None."""
    if isinstance(x, ast.BinOp) and isinstance(x.op, (ast.Mult, ast.Div)):
        left, right = const_value(x.left), const_value(x.right)
        if isinstance(x.op, ast.Mult) and left is not None:
            return x.right if left > 0 else None
        if right is not None:
            return x.left if right > 0 else None
        return None
    return x


def _log_scale_name(expr: ast.expr) -> str | None:
    ident = expr.id if isinstance(expr, ast.Name) else expr.attr if isinstance(expr, ast.Attribute) else None
    return ident if ident is not None and _LOG_SCALE.match(ident) else None


_SAMPLERS = frozenset({"randn", "rand", "normal", "uniform", "randn_like", "rand_like", "truncated_normal"})


def _bounded(ctx: Analysis, value: ast.expr | None) -> bool:
    """Bounded above where it is assigned: a clamp/min/tanh/sigmoid, a conditional expression
    that clamps one arm and takes the other from an attribute (the clamped value cached by the
    object: PyG's `self.__logstd__ if logstd is None else logstd.clamp(max=...)`), or a value
    drawn from a sampler (`p_mean + p_std * randn(...)`: a log-normal schedule, not a
    prediction)."""
    if value is None:
        return False
    if isinstance(value, ast.IfExp):
        return all(_bounded(ctx, arm) or isinstance(arm, ast.Attribute) for arm in (value.body, value.orelse)) \
            and (_bounded(ctx, value.body) or _bounded(ctx, value.orelse))
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _SAMPLERS:
                return True
    oc = ctx.op(strip_wrappers(ctx, value))
    if oc is not None and oc.op in _BOUNDING:
        return True
    func = value.func if isinstance(value, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _BOUNDING or nonpositive_by_construction(ctx, value)


@checks("NG106")
def check_exp_of_log_scale(ctx: Analysis, oc: OpCall) -> None:
    x = oc.input
    if x is None:
        return
    base = _positive_scale(ctx, strip_wrappers(ctx, x))
    if base is None:
        return
    base = strip_wrappers(ctx, base)
    ident = _log_scale_name(base)
    if ident is None or nonpositive_by_construction(ctx, base):
        return
    value = ctx.last_value(base)
    if _bounded(ctx, value) or ctx.zero_checked(base) or base.__class__ is ast.Name and _mutated(ctx, base):
        return
    ctx.report(EXP_OF_LOG_SCALE, oc.node, f"`{describe(oc.node, 40)}` of a predicted log-scale `{ident}`, "
               "bounded by nothing" + via(ctx, base, value), "exp_overflow")


_PARAMETER_FACTORIES = frozenset({"Parameter", "Variable", "add_weight", "get_variable"})


def learned_parameter(ctx: Analysis, expr: ast.expr) -> bool:
    """`self.rho` where the module assigns `self.rho = nn.Parameter(...)` (or a `tf.Variable`,
    `self.add_weight(...)`), registers it (`self.register_parameter("rho", ...)`) or names it
    `rho` (Bayes by backprop's weight for sigma, often made in a base class), or one of its layers
    applied to a constant (`self.bandwidth(torch.ones(1, 1))`): a weight that reaches 88 in an exp
    only if training drives it there (as NG106's log-scales)."""
    e = strip_wrappers(ctx, expr)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) \
            and e.func.value.id == "self" and e.args and not e.keywords \
            and all(ctx.gradient_free(a) for a in e.args):
        return True  # mTAN's `self.bandwidth(torch.ones(1, 1, 1, 1))`: a layer's weights applied to a constant
    if not (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"):
        return False
    if "rho" in re.split(r"[_\d]+", e.attr.lower()):
        return True  # Bayes by backprop's `sigma = log1p(exp(self.rho_weight))`, made in a base class
    if any(isinstance(v, ast.Call) and callee_name(v.func) in _PARAMETER_FACTORIES
           for v in ctx.self_assigned.get(e.attr, ())):
        return True
    for call, _scope, _nograd in ctx.calls:
        func, args = call.func, call.args
        if isinstance(func, ast.Attribute) and func.attr == "register_parameter" and args \
                and isinstance(args[0], ast.Constant) and args[0].value == e.attr:
            return True
    return False


def _mutated(ctx: Analysis, name: ast.Name) -> bool:
    """`logvar.clamp_(max=10)` or `logvar[...] = ...` somewhere in the function: bounded, maybe."""
    scope, _ = ctx.lookup(name.id)
    return scope is not None and name.id in scope.mutations


ON_CALL = {"exp": [check_exp_of_log_scale]}
