"""Cross-entropy and entropy written out as `sum(y * log(p))` (NG201)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import PROBABILITY_WORDS, named_like
from nanguard.lint.patterns import selection_bound, strip_wrappers, tensor_literal
from nanguard.lint.positive import guarded_positive
from nanguard.lint.rules.base import checks
from nanguard.lint.rules.masking import neg_inf_source
from nanguard.lint.scope import name_key
from nanguard.lint.syntax import additive_terms, callee_name, const_value, describe, mult_factors

HAND_XENT = Rule(
    code="NG201",
    name="hand-written-cross-entropy",
    summary="`-sum(y * log(p))`, `(p * p.log()).sum()`, `nll_loss(log(p), y)` on probabilities",
    hazard=VALUE,
    hazards=("xlogy_zero",),
    explanation="""\
One NaN term makes the whole sum, the loss and, after the update, every weight NaN (the
seed story `-tf.reduce_sum(y_ * tf.log(y_conv))`).

The fix is not `log(p + 1e-10)` or `log(clip(p, 1e-10, 1))`: both bias the loss and
(clip) zero the gradient below the bound. Compute from logits, where nothing underflows:

    probs = torch.softmax(logits, -1)
    loss = -(target * torch.log(probs)).sum(-1).mean()
->  loss = F.cross_entropy(logits, target)        # target: indices or probabilities
    loss = -(target * F.log_softmax(logits, -1)).sum(-1).mean()

When only probabilities exist, nanguard.xlogy(y, p) is 0 where y == 0 (the limit of
y log p), and nanguard.entropy(p) / nanguard.cross_entropy_probs(target, probs, dim) handle
p == 0 with finite gradients.

Reported for a product with a log inside a sum or mean reduction (the shape of a
cross-entropy or entropy) when its operands are named like probabilities or targets
(`probs`, `p`, `y_`, `target`, `pred`...), and for `F.nll_loss(torch.log(p), y)` and
`F.kl_div(torch.log(q), p)` (a probability 0 in `q` is a −inf log-probability). Not
reported when the log's argument is visibly kept from 0 (`+ eps`, a positive clamp: NG601
covers clamps) or comes from softmax/sigmoid (NG101/NG102 report those with an exact fix).
An entropy `exp(logp) * logp` is not reported when `logp` is a log_softmax of logits that no
−inf fill reaches: every log-probability is then finite.""",
)

RULES = [HAND_XENT]

_LOGS = ("log", "log2", "log10")


def _products(expr: ast.expr) -> Iterator[tuple[ast.expr, list]]:
    for _sign, term in additive_terms(expr):
        while isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.USub):
            term = term.operand
        if isinstance(term, ast.BinOp) and isinstance(term.op, ast.Mult):
            yield term, mult_factors(term)


def _covered_elsewhere(ctx: Analysis, p: ast.expr) -> bool:
    """softmax/sigmoid/1-sigmoid/clamp arguments are reported (with better advice) by NG101-103/NG601."""
    for e in (p, ctx.value_of(p)):
        if e is None:
            continue
        oc = ctx.op(e)
        if oc is not None and oc.op in ("softmax", "sigmoid", "clamp", "clamp_min", "maximum", "sum", "mean",
                                        "exp", "softplus", "log_softmax"):
            return True
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and const_value(e.left) == 1:
            inner = ctx.op(e.right)
            if inner is not None and inner.op == "sigmoid":
                return True
    return False


_CE_WORDS = PROBABILITY_WORDS | frozenset({
    "y", "pred", "preds", "prediction", "predictions", "target", "targets", "label", "labels",
    "onehot", "gt", "truth", "output", "outputs", "dist", "distribution", "prior", "true",
})


def _probability_like(ctx: Analysis, expr: ast.expr) -> bool:
    """Names of probabilities or targets (`probs`, `y_`, `y_conv`, `target`, `p_hat`, `self.probs`):
    the operands of a cross-entropy, unlike `order * diag.log()`."""
    return named_like(ctx, expr, _CE_WORDS, y_prefix=True)


def _exp_times_itself(ctx: Analysis, factors: list) -> ast.expr | None:
    """`exp(logp) * logp`: p·log p from log-probabilities; the log-probability, else None."""
    dumps = [ast.dump(f) for f in factors]
    for f in factors:
        oc = ctx.op(f)
        if oc is not None and oc.op == "exp" and oc.input is not None and ast.dump(oc.input) in dumps:
            return oc.input
    return None


def _finite_log_probabilities(ctx: Analysis, logp: ast.expr, at: ast.AST) -> bool:
    """`logp = F.log_softmax(logits)` of logits no -inf fill reaches: every entry is finite
    (log_softmax is x − logsumexp(x), no log of an underflowed 0), so exp(logp)·logp is too.
    Only a −inf logit (a mask, a top-k filter) makes it 0·(−inf)."""
    value = ctx.value_of(logp)
    oc = ctx.op(strip_wrappers(ctx, value if value is not None else logp))
    if oc is None or oc.op not in ("log_softmax", "log_sigmoid") or oc.input is None:
        return False
    return neg_inf_source(ctx, oc.input, at) is None


@checks("NG201")
def check_reduction(ctx: Analysis, oc: OpCall) -> None:
    inp = oc.input
    if inp is None or (oc.qualname or "").rsplit(".", 1)[-1] in ("nansum", "nanmean"):
        return  # `torch.nansum(p * log(p))`: the NaN of a 0·log 0 term is dropped on purpose
    for product, factors in _products(inp):
        logp = _exp_times_itself(ctx, factors)
        if logp is not None:
            if not _finite_log_probabilities(ctx, logp, product):
                ctx.report(HAND_XENT, product, f"`{describe(product)}`, an entropy term from log-probabilities "
                           "(exp(−inf)·(−inf) = 0·(−inf) = NaN where a log-probability is −inf)", "xlogy_zero")
            continue
        log_call = None
        for f in factors:
            lo = ctx.op(f)
            if lo is not None and lo.op in _LOGS:
                log_call = lo
                break
        if log_call is None or log_call.input is None:
            continue
        others = [f for f in factors if f is not log_call.node]
        if not others or all(const_value(f) is not None or _index_sequence(ctx, f) for f in others):
            continue  # `0.5 * log(p)`, `jnp.arange(n, 0, -1) * log(diag)`: weights, not a target
        p = log_call.input
        if const_value(p) is not None or guarded_positive(ctx, p) or _covered_elsewhere(ctx, p):
            continue
        if all(_selected_positive(ctx, f) for f in others) and _selected_positive(ctx, _numerator(p)):
            continue  # `p[p > 0] * log(p[p > 0] / q[p > 0])`: the zeros are left out before the log
        if not (_probability_like(ctx, p) or any(_probability_like(ctx, f) for f in others)):
            continue  # a log-density term such as `order * diag.log()`, not a cross-entropy
        if not _probability_like(ctx, p) and _configured_constant(ctx, p):
            continue  # GPflow's Poisson `Y * log(self.binsize)`: a setting, not a predicted probability
        what = "an entropy term" if any(ast.dump(f) == ast.dump(p) for f in others) else "a cross-entropy term"
        ctx.report(HAND_XENT, product, f"`{describe(product)}`, {what}", "xlogy_zero")


def _numerator(e: ast.expr) -> ast.expr:
    return e.left if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) else e


def _selected_positive(ctx: Analysis, e: ast.expr) -> bool:
    """`p[p > 0]`, `p[pos]` with `pos = p > 0` (or `p != 0`): only the entries that are not 0."""
    picked = selection_bound(ctx, e)
    return picked is not None and (isinstance(picked[0], ast.Gt) and picked[1] >= 0
                                   or isinstance(picked[0], ast.NotEq) and picked[1] == 0)


_CONSTANT_WRAPPERS = frozenset({"array", "asarray", "float", "tensor", "as_tensor", "constant", "convert_to_tensor"})


def _configured_constant(ctx: Analysis, expr: ast.expr) -> bool:
    """`self.binsize` assigned once in the class, from a constructor argument (`np.array(binsize,
    dtype=...)`, or the argument itself): a setting that does not change with the data."""
    key = name_key(expr) if isinstance(expr, ast.Attribute) else None
    if key is None or not key.startswith("self.") or key.count(".") != 1:
        return False
    values = ctx.attribute_values(key)
    if len(values) != 1 or values[0] is None:
        return False
    value = values[0]
    while isinstance(value, ast.Call) and callee_name(value.func) in _CONSTANT_WRAPPERS and value.args:
        value = value.args[0]
    if not isinstance(value, ast.Name):
        return False
    method = next((n for n in ast.walk(ctx.tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__"
                   and n.lineno <= value.lineno <= (n.end_lineno or 0)), None)
    return method is not None and any(a.arg == value.id for a in method.args.args + method.args.kwonlyargs) \
        and ctx.lookup(value.id, ctx.scope_of.get(id(method)))[1] == [None]


def _index_sequence(ctx: Analysis, expr: ast.expr) -> bool:
    """`arange(...)`, `-arange(n, 0, -1)`, a shape entry, or a name holding one: fixed weights
    (a Jacobian's exponents, a dimension), neither a probability nor a target."""
    e = ctx.resolve(expr)
    while isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = ctx.resolve(e.operand)
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
        return True  # `feat_dim = p.mean.shape[-1]`: a size times a log-determinant
    if not isinstance(e, ast.Call):
        return False
    func = e.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in ("arange", "range")


def _constant_tensor(expr: ast.expr) -> bool:
    """A literal list/tuple of positive numbers (`[1. / num_tokens]`)."""
    if isinstance(expr, (ast.List, ast.Tuple)):
        return bool(expr.elts) and all(_constant_tensor(e) for e in expr.elts)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div) and const_value(expr.left) is not None:
        return const_value(expr.left) > 0  # type: ignore[operator]  # `1. / n`: positive for a count n
    v = const_value(expr)
    return v is not None and v > 0


@checks("NG201")
def check_nll_of_log(ctx: Analysis, oc: OpCall) -> None:
    """`F.nll_loss(torch.log(probs), y)`, `F.kl_div(q.log(), p)`: a cross-entropy on
    probabilities, spelled with a loss that takes log-probabilities (a 0 in `q` is −inf there)."""
    arg = oc.input
    lo = ctx.op(arg)
    if lo is None and arg is not None:
        value = ctx.value_of(arg)
        lo = ctx.op(value) if value is not None else None
    if lo is None or lo.op not in _LOGS or lo.input is None:
        return
    p = lo.input
    if const_value(p) is not None or guarded_positive(ctx, p) or _covered_elsewhere(ctx, p) \
            or _constant_tensor(tensor_literal(p)):
        return  # `torch.log(torch.tensor([1 / n]))`: a uniform prior, a constant
    ctx.report(HAND_XENT, oc.node, f"`{oc.op}({describe(lo.node, 30)}, ...)` on probabilities", "xlogy_zero")


ON_CALL = {"sum": [check_reduction], "mean": [check_reduction], "nll_loss": [check_nll_of_log],
           "kl_div": [check_nll_of_log]}
