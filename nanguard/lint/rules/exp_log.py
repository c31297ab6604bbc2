"""Log of a probability and exp of a logit, composed by hand (NG101-NG105).

Each of these compositions has a fused, exact counterpart that never forms the
intermediate probability or exponential, and so never underflows to 0 (-> log = -inf) or
overflows to inf.
"""

from __future__ import annotations

import ast
from functools import partial

from nanguard.lint import fixes
from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import conditions_at
from nanguard.lint.model import POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.dataflow import names_in
from nanguard.lint.patterns import selected_from, strip_wrappers, tensor_literal
from nanguard.lint.signs import below_by_enclosing_if, is_max_like, magnitude_bound, nonpositive_by_construction
from nanguard.lint.rules.base import checks, via
from nanguard.lint.rules.exp_overflow import learned_parameter
from nanguard.lint.shapes import square_base
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import additive_terms, bounded_walk, callee_name, const_value, describe

LOG_SOFTMAX = Rule(
    code="NG101",
    name="log-of-softmax",
    summary="`log(softmax(x))`",
    hazard=VALUE,
    autofix=True,
    hazards=("log_softmax",),
    explanation="""\
One row with an underflowed probability makes the loss inf, and after the next update every
parameter NaN. log_softmax(x) = x - logsumexp(x) has the exact gradient softmax(x) - onehot.

    p = torch.softmax(logits, dim=-1)
    loss = -(target * torch.log(p)).sum(-1)          # -inf / NaN for confident wrong rows
->  loss = -(target * torch.log_softmax(logits, dim=-1)).sum(-1)
    (or F.cross_entropy(logits, target) for class indices / probabilities;
     nanguard.log_softmax(x, dim, mask=) when some classes are masked out)

Autofix: `torch.log(torch.softmax(x, d))`, `F.softmax(x, d).log()`, `x.softmax(d).log()`,
`tf.math.log(tf.nn.softmax(x))` are rewritten to the log_softmax spelling of the same
module (same arguments). A softmax assigned to a name first is reported, not rewritten.""",
)

LOG_SIGMOID = Rule(
    code="NG102",
    name="log-of-sigmoid",
    summary="`log(sigmoid(x))`",
    hazard=VALUE,
    autofix=True,
    hazards=("log_sigmoid",),
    explanation="""\
    loss = -torch.log(torch.sigmoid(score))
->  loss = -F.logsigmoid(score)      # or F.binary_cross_entropy_with_logits

Autofix: rewritten to `F.logsigmoid(x)` (torch; spelled with the file's own import of
torch.nn.functional or torch, never with a name the file rebinds), `tf.math.log_sigmoid(x)`,
`keras.ops.log_sigmoid(x)` (Keras code stays multi-backend) or `jax.nn.log_sigmoid(x)`. No
rewrite in test code or inside a function that implements the replacement.""",
)

LOG_ONE_MINUS_SIGMOID = Rule(
    code="NG103",
    name="log-of-one-minus-sigmoid",
    summary="`log(1 - sigmoid(x))`, `log1p(-sigmoid(x))`, `log(1 - tanh(x)**2)`, `log(1 - exp(logp))`",
    hazard=VALUE,
    autofix=True,
    hazards=("log_one_minus_sigmoid", "log_one_minus_tanh_squared", "log_one_minus_exp"),
    explanation="""\
This is the negative half of a hand-written binary cross-entropy; the whole loss
y*log(p) + (1-y)*log(1-p) is F.binary_cross_entropy_with_logits(x, y)
(tf.nn.sigmoid_cross_entropy_with_logits).

    loss = -(y * torch.log(torch.sigmoid(x)) + (1 - y) * torch.log(1 - torch.sigmoid(x)))
->  loss = F.binary_cross_entropy_with_logits(x, y, reduction="none")

Autofix: `log(1 - sigmoid(x))` and `log1p(-sigmoid(x))` -> `F.logsigmoid(-x)`.

The same cancellation with tanh: `log(1 - tanh(u)**2)` (a squashed Gaussian policy's
log-probability, SAC) is −inf once |u| > ~9; `2 * (log(2) - u - F.softplus(-2 * u))` is the
same value, finite (reported, not rewritten). And with exp: `log(1 - exp(logp))` or
`log1p(-exp(logp))` (log(1 − p) from a log-probability, ORPO's odds ratio) is −inf once p rounds
to 1; `torch.log(-torch.expm1(logp))` does not cancel (reported, not rewritten).""",
)

SOFTPLUS = Rule(
    code="NG104",
    name="hand-written-softplus",
    summary="`log1p(exp(x))`, `log(1 + exp(x))`, `x.exp().log1p()`",
    hazard=VALUE,
    hazards=("softplus",),
    explanation="""\
The where() patch is the seed story "x.where(torch.isinf(exp), exp.log1p())".
softplus(x) = max(x, 0) + log1p(exp(-|x|)) is finite for every finite x, with gradient
sigmoid(x).

    y = torch.log1p(torch.exp(x))
->  y = F.softplus(x)            # or nanguard.softplus(x, beta), exact for large x

Not autofixed: torch's softplus switches to the identity above `threshold` (20), which
differs from log1p(exp(x)) by up to 2e-9 in float64; choose it knowingly.""",
)

LOGSUMEXP = Rule(
    code="NG105",
    name="hand-written-logsumexp",
    summary="`log(sum(exp(x)))`",
    hazard=VALUE,
    autofix=True,
    hazards=("logsumexp_overflow",),
    explanation="""\
logsumexp(x) = m + log(sum(exp(x - m))) with m = max(x).

    lse = torch.log(torch.sum(torch.exp(scores), dim=1))
->  lse = torch.logsumexp(scores, dim=1)     # nanguard.logsumexp(x, dim, mask=) for masks

Not reported when the exponent already has the maximum subtracted. Autofix for torch.sum
with an explicit dim (torch.logsumexp requires one), tf.reduce_sum, keras.ops.sum and
jnp.sum (-> tf.reduce_logsumexp, keras.ops.logsumexp, jax.nn.logsumexp).""",
)

RULES = [LOG_SOFTMAX, LOG_SIGMOID, LOG_ONE_MINUS_SIGMOID, SOFTPLUS, LOGSUMEXP]


def op_through_name(ctx: Analysis, expr: ast.expr | None):
    """(op call, value) for `expr` itself, or for the single value a name holds."""
    if expr is None:
        return None, None
    oc = ctx.op(expr) or ctx.returned_op(expr)
    if oc is not None:
        return oc, None
    value = ctx.value_of(expr)
    if value is not None:
        return ctx.op(value) or ctx.returned_op(value), value
    return None, None


def _exp_can_overflow(ctx: Analysis, exp: OpCall) -> bool:
    x = exp.input
    if x is None:
        return False
    v = const_value(x)
    if v is not None:
        return v > 88.0  # `np.log(1 + np.exp(0.0))`: a constant below float32's overflow point is a number
    return not (nonpositive_by_construction(ctx, x) or below_by_enclosing_if(ctx, x, 88.0))


_SIZE_METHODS = frozenset({"numel", "nelement"})


def _known_empty(ctx: Analysis, x: ast.expr | None, node: ast.AST) -> bool:
    """Is `node` under `if x.numel() == 0:` (`x.size == 0`, `len(x) == 0`, `not x.numel()`)? Then
    no entry of x can overflow, and log(sum(exp(x))) = log 0 = -inf is the exact log-sum-exp of
    nothing (torch._refs.logsumexp's empty case)."""
    key = name_key(x) if x is not None else None
    root = ctx.scope.node
    if key is None or not hasattr(root, "body"):
        return False
    for test, holds in conditions_at(ctx, root, node.lineno):  # type: ignore[attr-defined]
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if negated:
            test, holds = test.operand, not holds  # type: ignore[attr-defined]
            if holds is False and _size_of(test) == key:
                return True  # `if not x.numel():`
            continue
        if holds and isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) \
                and const_value(test.comparators[0]) == 0 and _size_of(test.left) == key:
            return True
    return False


def _size_of(expr: ast.expr) -> str | None:
    """The name whose element count `expr` is: `x.numel()`, `x.nelement()`, `x.size`, `len(x)`."""
    if isinstance(expr, ast.Call) and not expr.args and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in _SIZE_METHODS:
        return name_key(expr.func.value)
    if isinstance(expr, ast.Attribute) and expr.attr == "size":
        return name_key(expr.value)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "len" and len(expr.args) == 1:
        return name_key(expr.args[0])
    return None


def _guarded_by_where(ctx: Analysis, node: ast.AST, exp: OpCall) -> bool:
    """Inside a where/masked_fill branch whose condition tests the exponent's input: the
    value is handled (the gradient is NG501's business)."""
    entry = ctx.in_where.get(id(node))
    if entry is None or exp.input is None:
        return False
    cond = entry[1]
    return bool(names_in(ctx, cond) & names_in(ctx, exp.input)) if cond is not None else False


def _one_plus_exp(ctx: Analysis, expr: ast.expr) -> OpCall | None:
    terms = additive_terms(expr)
    if len(terms) != 2:
        return None
    consts = [(s, t) for s, t in terms if const_value(t) is not None]
    others = [(s, t) for s, t in terms if const_value(t) is None]
    if len(consts) != 1 or len(others) != 1:
        return None
    (cs, c), (os_, o) = consts[0], others[0]
    if cs * const_value(c) != 1 or os_ < 0:  # type: ignore[operator]
        return None
    exp, _ = op_through_name(ctx, o)
    return exp if exp is not None and exp.op == "exp" else None


def _one_minus_tanh_squared(ctx: Analysis, expr: ast.expr) -> OpCall | None:
    """The tanh of `1 - tanh(u)**2` (`1 - a.pow(2)`, `1 - torch.square(a)`, a = tanh(u)), else None."""
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Sub) and const_value(tensor_literal(expr.left)) == 1):
        return None
    base = square_base(ctx, strip_wrappers(ctx, expr.right))
    if base is None:
        return None
    t, _ = op_through_name(ctx, strip_wrappers(ctx, base))
    return t if t is not None and t.op == "tanh" else None


def _sigmoid_argument_bounded(ctx: Analysis, sig: OpCall, limit: float) -> bool:
    """Is the sigmoid's argument within +-`limit` by construction (bounded ops, constants)?"""
    bound = magnitude_bound(ctx, sig.input) if sig.input is not None else None
    return bound is not None and bound <= limit


def one_minus(ctx: Analysis, expr: ast.expr, op: str):
    """(`op` call, the value of the name looked through or None) for `1 - op(x)` (`1 - sigmoid(x)`,
    `1 - exp(logp)`, `1 - p` with `p = op(x)`), else (None, None)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Sub) and const_value(tensor_literal(expr.left)) == 1:
        inner, value = op_through_name(ctx, expr.right)
        if inner is not None and inner.op == op:
            return inner, value
    return None, None


def _one_minus_sigmoid(ctx: Analysis, expr: ast.expr):
    """(sigmoid call, direct?) for `1 - sigmoid(x)`."""
    sig, value = one_minus(ctx, expr, "sigmoid")
    return sig, sig is not None and value is None


def _scaled_max_subtraction(ctx: Analysis, expr: ast.expr | None) -> bool:
    """`k * (x - x_max)`, `(x - x_max) * k` or `(x - x_max) / k`, k not a literal: <= 0 when
    k > 0, which the code cannot show."""
    e = ctx.resolve(expr) if expr is not None else None
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Div))):
        return False
    sides = [e.left, e.right] if isinstance(e.op, ast.Mult) else [e.left]
    for side in sides:
        other = e.right if side is e.left else e.left
        if isinstance(side, ast.BinOp) and isinstance(side.op, ast.Sub) and is_max_like(ctx, side.right) \
                and const_value(other) is None:
            return True
    return False


# Index producers whose index points at an entry of positive probability: the mode (`argmax`,
# the indices of `max`) or a draw (`multinomial`, `categorical`) from the probabilities themselves.
_MODE_OR_SAMPLE = frozenset({"argmax", "max", "multinomial", "categorical"})


def _picked_at_a_mode_or_a_sample(ctx: Analysis, expr: ast.expr, base: ast.expr) -> bool:
    """Is the last index of `probs[..., i]` / `probs.gather(d, i)` the argmax or a sample of the
    distribution (ParlAI's greedy and top-k search log their chosen token's probability)?"""
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if isinstance(e, ast.Subscript):
        index = e.slice
        last = index.elts[-1] if isinstance(index, ast.Tuple) and index.elts else index
    elif isinstance(e, ast.Call) and callee_name(e.func) == "gather" and e.args:
        last = e.args[-1]
    else:
        return False
    if not isinstance(last, ast.Name):
        return False
    value = ctx.value_of(last)
    while isinstance(value, ast.Subscript):
        value = value.value  # `torch.multinomial(probs, 1)[:, 0]`
    scope, _ = ctx.lookup(last.id)
    sources = [value] + list(scope.unpacked.get(last.id, ()) if scope is not None else ())
    picked = _names(ctx, base)  # the index must come from the same distribution (or its logits)
    return any(isinstance(v, ast.Call) and callee_name(v.func) in _MODE_OR_SAMPLE and _names(ctx, v) & picked
               for v in sources)


def _names(ctx: Analysis, expr: ast.AST) -> set[str]:
    """Local names in `expr` and, one level down, in the values of those names."""
    found: set[str] = set()
    for node in bounded_walk(expr, 60):
        if isinstance(node, ast.Name) and node.id not in ctx.imports.aliases:
            found.add(node.id)
            value = ctx.value_of(node)
            if value is not None:
                found.update(n.id for n in bounded_walk(value, 60) if isinstance(n, ast.Name))
    return found


@checks("NG101", "NG102", "NG103", "NG104", "NG105")
def check_log(ctx: Analysis, oc: OpCall) -> None:
    arg = oc.input
    if arg is None:
        return
    if oc.op == "log1p":
        _check_log1p(ctx, oc, arg)
        return
    if oc.op != "log":
        return
    inner, value = op_through_name(ctx, arg)
    direct = value is None
    where = via(ctx, arg, value)
    if inner is None or inner.op not in ("softmax", "sigmoid"):
        picked = selected_from(ctx, arg)  # `log(p.gather(1, y))`, `probs[idx, y].log()`
        if picked is not arg and _picked_at_a_mode_or_a_sample(ctx, arg, picked):
            return  # `probs[rows, multinomial(probs, 1)]`, `softmax(x)[x.argmax()]`: never an exact 0
        if picked is not arg:
            found, picked_value = op_through_name(ctx, picked)
            if found is not None and found.op in ("softmax", "sigmoid"):
                inner, direct = found, False
                where = f" of entries picked from `{describe(picked, 30)}`" + via(ctx, picked, picked_value)
    if inner is not None:
        if ctx.only_reported(oc.node):
            return  # `sigmoid(x).log() > threshold`: a -inf only compared, sorted or shown is no NaN
        if inner.op == "softmax":
            fix = (lambda src, o=oc, i=inner: fixes.log_softmax_fix(src, o, i)) if direct else None
            ctx.report(LOG_SOFTMAX, oc.node, "`log(softmax(x))`" + where, "log_softmax", fix)
            return
        if inner.op == "sigmoid":
            if _sigmoid_argument_bounded(ctx, inner, 15.0):
                return  # sigmoid(acos(a) - acos(b)) >= sigmoid(-2 pi): never 0, even in float16
            fix = (lambda src, o=oc, i=inner: fixes.log_sigmoid_fix(src, ctx.spell, o, i, False)) \
                if direct else None
            ctx.report(LOG_SIGMOID, oc.node, "`log(sigmoid(x))`" + where, "log_sigmoid", fix)
            return
        if inner.op in ("sum", "mean") and inner.input is not None:
            exp, exp_value = op_through_name(ctx, inner.input)
            if exp is not None and exp.op == "exp" and _exp_can_overflow(ctx, exp) \
                    and not _guarded_by_where(ctx, oc.node, exp) and not _known_empty(ctx, exp.input, oc.node):
                fix = None
                if direct and exp_value is None and inner.op == "sum":
                    fix = partial(fixes.logsumexp_fix, spell=ctx.spell, log=oc, total=inner, exp=exp)
                what = "sum" if inner.op == "sum" else "mean"
                # `exp(r * (x - x_max))` (timm's LSE pooling): stable for the positive
                # temperature it is meant for; only a negative r can overflow it
                scaled = _scaled_max_subtraction(ctx, exp.input)
                ctx.report(LOGSUMEXP, oc.node, f"`log({what}(exp(x)))`" + via(ctx, arg, value or exp_value),
                           "logsumexp_overflow", fix, confidence=POSSIBLE if scaled else None)
            return
    for expr in (arg, ctx.value_of(arg)):
        if expr is None:
            continue
        sig, sig_direct = _one_minus_sigmoid(ctx, expr)
        if sig is not None and _sigmoid_argument_bounded(ctx, sig, 7.0):
            return  # 1 - sigmoid(x) for |x| <= 7 stays above float16's rounding of 1
        if sig is not None:
            fix = None
            if sig_direct and expr is arg:
                fix = partial(fixes.log_sigmoid_fix, spell=ctx.spell, outer=oc, sigmoid=sig, negate=True)
            ctx.report(LOG_ONE_MINUS_SIGMOID, oc.node,
                       "`log(1 - sigmoid(x))`" + via(ctx, arg, None if expr is arg else expr), "log_one_minus_sigmoid",
                       fix)
            return
        if _one_minus_tanh_squared(ctx, expr) is not None:
            ctx.report(LOG_ONE_MINUS_SIGMOID, oc.node, "`log(1 - tanh(x)**2)`" + via(ctx, arg, None if expr is arg
                       else expr), "log_one_minus_tanh_squared")
            return
        exp = _one_plus_exp(ctx, expr)
        if exp is not None and _exp_can_overflow(ctx, exp) and not _guarded_by_where(ctx, oc.node, exp):
            ctx.report(SOFTPLUS, oc.node, "`log(1 + exp(x))`" + via(ctx, arg, None if expr is arg else expr),
                       "softplus", confidence=_learned_confidence(ctx, exp))
            return


def _check_log1p(ctx: Analysis, oc: OpCall, arg: ast.expr) -> None:
    if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        sig, value = op_through_name(ctx, arg.operand)
        if sig is not None and sig.op == "sigmoid":
            fix = (lambda src, o=oc, s=sig: fixes.log_sigmoid_fix(src, ctx.spell, o, s, True)) \
                if value is None else None
            ctx.report(LOG_ONE_MINUS_SIGMOID, oc.node, "`log1p(-sigmoid(x))`" + via(ctx, arg.operand, value),
                       "log_one_minus_sigmoid", fix)
        return
    exp, value = op_through_name(ctx, arg)
    if exp is not None and exp.op == "exp" and _exp_can_overflow(ctx, exp) \
            and not _guarded_by_where(ctx, oc.node, exp):
        ctx.report(SOFTPLUS, oc.node, "`log1p(exp(x))`" + via(ctx, arg, value), "softplus",
                   confidence=_learned_confidence(ctx, exp))


def _learned_confidence(ctx: Analysis, exp: OpCall) -> str | None:
    """POSSIBLE for the softplus of a learned weight (Bayes by backprop's `log1p(exp(self.rho))`):
    it overflows only if training drives the weight past 88, as NG106 says of log-scales."""
    return POSSIBLE if exp.input is not None and learned_parameter(ctx, exp.input) else None


ON_CALL = {"log": [check_log], "log1p": [check_log]}
