"""Clipping used as a NaN cure: log of a clamped probability, clamped logits (NG601, NG602)."""

from __future__ import annotations

import ast

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import CERTAIN, GRADIENT, POSSIBLE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import PROBABILITY_WORDS, named_like
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.positive import clamp_lower
from nanguard.lint.rules.base import checks, via
from nanguard.lint.syntax import const_value, describe, is_eps_like

LOG_OF_CLAMP = Rule(
    code="NG601",
    name="log-of-clamped-probability",
    summary="`log(clip(p, 1e-10, 1))`, `log(p.clamp(min=eps))`",
    hazard=GRADIENT,
    confidence=POSSIBLE,  # a bias and a dead gradient, never a NaN: not "certain"
    certain_when="a clip to exactly [eps, 1]",
    hazards=("clamped_log",),
    explanation="""\
It hides the problem instead of removing it (seed story: `tf.log(tf.clip_by_value(y_conv,
1e-10, 1.0))`).

    loss = -(y * torch.log(probs.clamp(min=1e-10))).sum(-1)
->  loss = F.cross_entropy(logits, y)            # from the logits that made `probs`
    loss = -(y * F.log_softmax(logits, -1)).sum(-1)
    # only probabilities? nanguard.xlogy(y, probs) / nanguard.cross_entropy_probs(y, probs, dim)

Reported when the lower bound is a small constant (float32's smallest normal number < bound
<= 1e-2) or an eps-like name. A bound of `finfo(dtype).tiny` (or below) is not reported: it
biases nothing measurable and only keeps an exact 0 out of the log.
Certain (the default) for the seed's clip to `[eps, 1]`: an upper bound of exactly 1 on a
probability clips nothing, so the clip is there only as a NaN cure, and a softmax entry below
`eps` (a logit ~23 below the row's largest for eps = 1e-10) is reached by ordinary inputs and
loses its gradient. Possible for a one-sided `p.clamp(min=eps)` or a clip to `[eps, 1 - eps]`:
the guard many real fixes (and Keras's own binary cross-entropy) use.
A gradient hazard: not reported inside `torch.no_grad()`.""",
)

CLAMP_BEFORE_SOFTMAX = Rule(
    code="NG602",
    name="clamped-logits",
    summary="`softmax(clamp(logits, -15, 15))`",
    hazard=GRADIENT,
    confidence=POSSIBLE,  # a bias and a dead gradient, never a NaN: not "certain"
    certain_when="logits clamped on both sides",
    hazards=("clamped_logits",),
    explanation="""\
The clamp silently freezes the most confident (or most wrong) predictions (seed story:
`tf.clip_by_value(logits, -15.0, 15.0)` before `tf.nn.softmax`).
Certain (the default) for a clamp with both bounds: every logit past a bound, which ordinary
inputs reach, gets a zero gradient and the softmax stops learning from it. Possible for a
one-sided clamp (`clamp(max=c)`), which also guards an overflow.

    probs = torch.softmax(torch.clamp(logits, -15, 15), dim=-1)
->  probs = torch.softmax(logits, dim=-1)
    # if logits really are inf/NaN, find where with `nanguard run`;
    # for masked classes, nanguard.softmax(logits, dim, mask=mask)

A gradient hazard: not reported inside `torch.no_grad()`.""",
)

RULES = [LOG_OF_CLAMP, CLAMP_BEFORE_SOFTMAX]


# At or below float32's smallest normal number a clamp biases nothing measurable: it only turns
# an exact 0 (or an underflowed subnormal) into a finite log, which is the point.
_NO_BIAS_BOUND = 1.2e-38


def _tiny(bound: ast.expr | None) -> bool:
    v = const_value(bound)
    if v is not None:
        return _NO_BIAS_BOUND < v <= 1e-2
    if isinstance(bound, ast.Attribute) and bound.attr == "tiny":
        return False  # `torch.finfo(dtype).tiny`, `np.finfo(...).tiny`
    return is_eps_like(bound)


def _probability(ctx: Analysis, clamp: OpCall) -> bool:
    """Is the clamped value a probability: clipped to at most 1, a softmax/sigmoid output, or
    named like one (`probs`, `p`, `y_conv`)? `log(duration.clamp(min=1e-5))` is not."""
    upper = _upper(clamp)
    v = const_value(upper)
    if v is not None and 0 < v <= 1:
        return True
    if upper is not None and isinstance(upper, ast.BinOp) and const_value(upper.left) == 1:
        return True  # `1 - eps`
    x = clamp.input
    for e in (x, ctx.value_of(x)):
        oc = ctx.op(e) if e is not None else None
        if oc is not None and oc.op in ("softmax", "sigmoid"):
            return True
    return named_like(ctx, x, PROBABILITY_WORDS)  # type: ignore[arg-type]


@checks("NG601")
def check_log_of_clamp(ctx: Analysis, oc: OpCall) -> None:
    if oc.op not in ("log", "log2", "log10") or oc.input is None:
        return
    arg = strip_wrappers(ctx, oc.input)
    clamp = ctx.op(arg)
    value = None
    if clamp is None:
        value = ctx.value_of(arg)
        clamp = ctx.op(strip_wrappers(ctx, value)) if value is not None else None
    if clamp is None or clamp.op not in ("clamp", "clamp_min", "maximum"):
        return
    bound = clamp_lower(clamp)
    named = ctx.value_of(bound) if bound is not None else None  # `tiny = torch.finfo(dt).tiny`
    if not _tiny(bound if named is None else named) or clamp.input is None or not _probability(ctx, clamp):
        return
    ctx.report(LOG_OF_CLAMP, oc.node, f"`log` of a probability clamped at `{describe(bound, 20)}`"
               + via(ctx, arg, value), "clamped_log", subject=clamp.input,
               confidence=CERTAIN if _upper_is_one(clamp) else None)


def _upper_is_one(clamp: OpCall) -> bool:
    """The seed's `clip_by_value(p, 1e-10, 1.0)`: a probability clipped above at exactly 1."""
    return const_value(_upper(clamp)) == 1


def _upper(clamp: OpCall) -> ast.expr | None:
    """A clamp's upper bound (`clamp(p, lo, hi)`, `max=`, `clip_value_max=`), else None."""
    return clamp.operand(2, "max", "clip_value_max", "max_value") if clamp.op == "clamp" else None


@checks("NG602")
def check_clamped_logits(ctx: Analysis, oc: OpCall) -> None:
    x = oc.input
    if x is None:
        return
    arg = strip_wrappers(ctx, x)
    clamp = ctx.op(arg)
    value = None
    if clamp is None:
        value = ctx.value_of(arg)
        clamp = ctx.op(strip_wrappers(ctx, value)) if value is not None else None
    if clamp is None or clamp.op != "clamp":
        return
    both = clamp.operand(1, "min", "clip_value_min") is not None \
        and clamp.operand(2, "max", "clip_value_max") is not None
    ctx.report(CLAMP_BEFORE_SOFTMAX, oc.node, f"`{oc.op}` of clamped logits" + via(ctx, arg, value),
               "clamped_logits", subject=clamp.input, confidence=CERTAIN if both else None)


ON_CALL = {"log": [check_log_of_clamp], "log2": [check_log_of_clamp], "log10": [check_log_of_clamp],
           "softmax": [check_clamped_logits], "log_softmax": [check_clamped_logits]}
