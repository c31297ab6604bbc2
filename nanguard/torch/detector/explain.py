"""Explanations and fixes: why this op made NaN/Inf here, in plain language, and what to use.

Each rule is keyed by the *forward* op's base name (``sqrt``, ``log``, ``exp`` ...) and the
phase. A rule reads the evidence (exact counts of the inputs, the user's line of code, and
the input tensors themselves when they are still at hand) and returns two sentences: the
explanation, with the counts that prove it, and a suggestion naming the nanguard op or torch
rewrite that removes the problem at its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch

from nanguard.torch.detector.frames import op_base
from nanguard.core.summary import ScalarArg, TensorSummary


@dataclass
class Evidence:
    """Everything a rule may look at. Tensors are None when only summaries survived."""

    phase: str
    kind: str
    op: str                                  # the aten op that produced the value
    forward_op: Optional[str]                # for backward: the forward op whose backward failed
    node: Optional[str]
    code: str
    inputs: List[Tuple[TensorSummary, Optional[torch.Tensor]]] = field(default_factory=list)
    forward_inputs: List[Tuple[TensorSummary, Optional[torch.Tensor]]] = field(default_factory=list)
    scalars: List[ScalarArg] = field(default_factory=list)
    outputs: List[TensorSummary] = field(default_factory=list)
    dim: Optional[int] = None

    @property
    def base(self) -> str:
        return op_base(self.forward_op or self.op)

    @property
    def what(self) -> str:
        return "NaN" if self.kind == "nan" else "Inf"

    def args(self) -> List[Tuple[TensorSummary, Optional[torch.Tensor]]]:
        """The forward op's inputs: those of the op itself for a forward finding."""
        return self.forward_inputs if self.phase == "backward" else self.inputs

    def first(self) -> Optional[TensorSummary]:
        args = [s for s, _ in self.args() if s.dtype.startswith(("float", "bfloat", "complex"))]
        return args[0] if args else None

    def output_dtype(self) -> str:
        return self.outputs[0].dtype if self.outputs else (self.first().dtype if self.first() else "float32")


Rule = Callable[[Evidence], Optional[Tuple[str, str]]]
_FORWARD: Dict[str, Rule] = {}
_BACKWARD: Dict[str, Rule] = {}


def _rule(table: Dict[str, Rule], *names: str):
    def register(fn: Rule) -> Rule:
        for n in names:
            table[n] = fn
        return fn
    return register


def _n(s: TensorSummary) -> int:
    return s.numel


def _fmt(v: Optional[float]) -> str:
    if v is None:
        return "?"
    return f"{v:.4g}"


_MAX_FINITE = {"float16": 65504.0, "bfloat16": 3.39e38, "float32": 3.4028e38, "float64": 1.7977e308}


def _exp_limit(dtype: str) -> float:
    return math.log(_MAX_FINITE.get(dtype, 3.4028e38))


def _looks_like_distance(code: str) -> bool:
    c = code.replace(" ", "")
    return any(k in c for k in ("dist", "diag", "gram", "-2*", "-(2*", "cdist", "**2).sum", "pow(2).sum"))


def _rows_all_neginf(t: Optional[torch.Tensor], dim: Optional[int]) -> Optional[Tuple[int, int]]:
    """(rows whose every entry is -inf, number of rows) along ``dim``."""
    if t is None or t.dim() == 0 or not t.dtype.is_floating_point:
        return None
    d = dim if dim is not None else -1
    with torch.no_grad():
        full = (t == -math.inf).all(dim=d)
    return int(full.sum()), full.numel()


# ------------------------------------------------------------------------------ forward
@_rule(_FORWARD, "sqrt")
def _sqrt_fwd(ev: Evidence):
    s = ev.first()
    if s is None or not s.negative:
        return None
    why = (f"sqrt of a negative number is NaN; {s.negative} of {_n(s)} inputs are negative "
           f"(min {_fmt(s.min)}). Values that should be ≥ 0, such as a² + b² − 2ab, come out slightly "
           f"negative from round-off.")
    if _looks_like_distance(ev.code):
        fix = ("nanguard.distance_matrix(x) computes pairwise distances without cancellation and with a "
               "finite gradient; or nanguard.sqrt(...), which treats round-off negatives as 0.")
    else:
        fix = "nanguard.sqrt(...) treats round-off negatives as 0 (value 0, gradient 0); or clamp_min(0) first."
    return why, fix


@_rule(_FORWARD, "rsqrt")
def _rsqrt_fwd(ev: Evidence):
    s = ev.first()
    if s is None:
        return None
    why = (f"rsqrt(x) = 1/sqrt(x) is inf at 0 and NaN below; {s.zeros} of {_n(s)} inputs are 0 and "
           f"{s.negative} negative.")
    return why, "Keep the argument positive (e.g. var + eps as torch.nn.LayerNorm does), or use nanguard.div/nanguard.sqrt."


@_rule(_FORWARD, "log", "log2", "log10")
def _log_fwd(ev: Evidence):
    s = ev.first()
    if s is None:
        return None
    parts = []
    if s.zeros:
        parts.append(f"{s.zeros} of {_n(s)} inputs are exactly 0 (log 0 = −inf)")
    if s.negative:
        parts.append(f"{s.negative} of {_n(s)} inputs are negative (log of a negative number is NaN)")
    if not parts:
        return None
    why = "; ".join(parts) + "."
    c = ev.code.replace(" ", "")
    if "softmax" in c:
        fix = "F.log_softmax(logits, dim) computes log(softmax(...)) in one stable step, with no log 0."
    elif "*" in c and ("log(" in c or ".log()" in c):
        fix = ("nanguard.xlogy(p, p) (or nanguard.entropy(p), nanguard.cross_entropy_probs(p, q)) uses "
               "0·log 0 = 0 with a finite gradient.")
    elif "sum" in c and "exp" in c:
        fix = "nanguard.logsumexp(x, dim) computes log(sum(exp(x))) without overflow or log 0."
    elif s.negative and not s.zeros:
        fix = ("The argument must be positive: check what makes it negative (a subtraction, a sign error), or "
               "produce it with a positive map (torch.exp, nanguard.softplus) and stay in log space.")
    else:
        fix = ("Stay in log space where the 0 comes from (F.log_softmax, nanguard.logsumexp), or use "
               "nanguard.xlogy(x, y) for x·log(y).")
    return why, fix


@_rule(_FORWARD, "log1p")
def _log1p_fwd(ev: Evidence):
    s = ev.first()
    if s is None:
        return None
    why = (f"log1p(x) is −inf at x = −1 and NaN below; the inputs range from {_fmt(s.min)} to {_fmt(s.max)} "
           f"({s.posinf} are +inf).")
    fix = "For log(1 + exp(x)) use nanguard.softplus(x) (or F.softplus), which never overflows."
    return why, fix


@_rule(_FORWARD, "exp", "expm1", "exp2")
def _exp_fwd(ev: Evidence):
    s = ev.first()
    if s is None:
        return None
    limit = _exp_limit(ev.output_dtype())
    over = None
    t = ev.args()[0][1] if ev.args() else None
    if t is not None:
        with torch.no_grad():
            over = int((t > limit).sum())
    count = f"{over} of {_n(s)} inputs exceed it" if over is not None else f"the largest input is {_fmt(s.max)}"
    why = (f"exp overflows {ev.output_dtype()} above {limit:.2f}; {count} (max {_fmt(s.max)}). "
           f"If a where() or mask later discards these entries, the backward still computes 0·inf = NaN.")
    c = ev.code.replace(" ", "")
    if "log1p" in c or "log(1+" in c:
        fix = "nanguard.softplus(x) computes log(1 + exp(x)) without overflow (≈ x for large x)."
    elif "log" in c and "sum" in c:
        fix = "nanguard.logsumexp(x, dim) (or torch.logsumexp) subtracts the max before exp."
    elif "where" in c:
        fix = ("nanguard.safe_where(...) keeps the discarded branch out of the gradient; better, use an op "
               "that cannot overflow (nanguard.softplus, nanguard.logaddexp).")
    else:
        fix = ("Work in log space (nanguard.logsumexp, nanguard.logaddexp, nanguard.softplus) or subtract "
               "the maximum before exp.")
    return why, fix


@_rule(_FORWARD, "div", "true_divide", "reciprocal", "floor_divide")
def _div_fwd(ev: Evidence):
    args = ev.args()
    den = args[-1][0] if args else None
    if den is None:
        return None
    if ev.base == "reciprocal":
        why = f"1/x is inf at x = 0; {den.zeros} of {_n(den)} inputs are 0."
    else:
        num = args[0][0] if len(args) > 1 else None
        why = f"{den.zeros} of {_n(den)} denominators are 0"
        if ev.kind == "nan" and num is not None:
            why += f" (0/0 = NaN where the numerator is 0 too: {num.zeros} numerator zeros)"
        else:
            why += " (x/0 = ±inf)"
        why += "."
        if den.zeros == 0 and ev.kind == "nan":
            why = "the division met ±inf/±inf or 0/0 (see the inputs below)."
    c = ev.code.replace(" ", "")
    if any(k in c for k in ("sum(", "count", "len(", "mean", "lengths", "mask")):
        fix = ("nanguard.masked_mean(x, mask, dim) averages over a mask and gives 0 (not 0/0) for empty "
               "groups, with a finite gradient.")
    else:
        fix = "nanguard.div(a, b) returns a finite value and gradient where b = 0 (0 by convention)."
    return why, fix


@_rule(_FORWARD, "addcdiv")
def _addcdiv_fwd(ev: Evidence):
    den = next((s for s, _ in ev.inputs if s.name.startswith("tensor2")), None)
    if den is None:
        return None
    return (f"addcdiv computes x + value·a/b; {den.zeros} of {_n(den)} denominators are 0.",
            "Keep the denominator away from 0 (an eps > 0), or use nanguard.div(a, b).")


@_rule(_FORWARD, "pow", "float_power")
def _pow_fwd(ev: Evidence):
    s = ev.first()
    if s is None:
        return None
    why = (f"x**p is NaN for negative x with a fractional p and inf for x = 0 with p < 0; {s.negative} of "
           f"{_n(s)} bases are negative and {s.zeros} are 0.")
    return why, "nanguard.pow(x, p) gives finite values and gradients at 0 and refuses silent NaN for negative bases."


@_rule(_FORWARD, "mul")
def _mul_fwd(ev: Evidence):
    sums = [s for s, _ in ev.inputs]
    if ev.kind == "nan" and any(not s.finite for s in sums) and any(s.zeros for s in sums):
        why = "0 · ±inf = NaN: one factor holds ±inf where the other is 0."
        c = ev.code.replace(" ", "")
        if "log" in c:
            return (why + " This is 0·log(0) in an entropy-like sum.",
                    "nanguard.xlogy(p, p) or nanguard.entropy(p): 0·log 0 = 0 with a finite gradient.")
        return why, "Find where the ±inf comes from (see the inputs); use nanguard.safe_where to drop masked entries."
    return None


@_rule(_FORWARD, "add", "sub", "rsub")
def _add_fwd(ev: Evidence):
    infinite = any(s.posinf or s.neginf for s, _ in ev.inputs) or any(math.isinf(a.value) for a in ev.scalars)
    if ev.kind != "nan" or not infinite:
        return None
    why = "inf − inf = NaN: the operands hold infinities that cancel at the same position."
    return why, ("Track down where the infinities come from (see the inputs); for attention masks pass a mask "
                 "(nanguard.softmax(x, dim, mask=...)) instead of adding −inf to scores that may be −inf too.")


def _masked_rows_rule(kind: str) -> Rule:
    def rule(ev: Evidence):
        args = ev.args()
        t = args[0][1] if args else None
        rows = _rows_all_neginf(t, ev.dim)
        s = ev.first()
        if rows is not None and rows[0]:
            why = (f"every entry of {rows[0]} of {rows[1]} rows is −inf (fully masked): {kind} of such a row is "
                   f"0/0 = NaN.")
        elif s is not None and s.neginf:
            why = f"{kind} met rows whose entries are all −inf (fully masked) or inf − inf; {s.neginf} inputs are −inf."
        elif s is not None and s.posinf:
            why = f"{kind} of a row holding +inf is inf − inf = NaN; {s.posinf} inputs are +inf."
        else:
            return None
        fn = {"softmax": "nanguard.softmax", "log_softmax": "nanguard.log_softmax",
              "logsumexp": "nanguard.logsumexp"}.get(kind, "nanguard.softmax")
        fix = (f"{fn}(x, dim, mask=mask) gives 0 for fully masked rows (with zero gradient) instead of NaN; "
               f"or keep at least one unmasked position per row.")
        if kind == "logsumexp":
            fix = "nanguard.logsumexp(x, dim) returns −inf with a zero gradient for all −inf rows."
        return why, fix
    return rule


_FORWARD["softmax"] = _masked_rows_rule("softmax")
_FORWARD["log_softmax"] = _masked_rows_rule("log_softmax")
_FORWARD["logsumexp"] = _masked_rows_rule("logsumexp")


@_rule(_FORWARD, "scaled_dot_product_attention", "multi_head_attention_forward")
def _attention_fwd(ev: Evidence):
    why = ("attention over a query whose keys are all masked is a softmax of an all −inf row: 0/0 = NaN.")
    fix = ("Make sure every query keeps at least one key (e.g. do not mask padding queries' own position), "
           "or write the attention with nanguard.softmax(scores, -1, mask=mask).")
    return why, fix


@_rule(_FORWARD, "acos", "asin")
def _acos_fwd(ev: Evidence):
    s = ev.first()
    if s is None:
        return None
    peak = max(abs(s.min or 0), abs(s.max or 0))
    why = (f"{ev.base} is defined on [−1, 1] only; the inputs reach {_fmt(peak)}. A cosine computed as "
           f"dot/(|a||b|) exceeds 1 by round-off.")
    return why, f"nanguard.{ev.base}(x) clamps to [−1, 1] with a finite gradient at the ends; nanguard.cosine_similarity for the cosine."


@_rule(_FORWARD, "atanh")
def _atanh_fwd(ev: Evidence):
    s = ev.first()
    return (f"atanh is ±inf at ±1 and NaN outside; inputs range over [{_fmt(s.min if s else None)}, "
            f"{_fmt(s.max if s else None)}].", "Clamp the argument into (−1, 1) or reparametrise.") if s else None


@_rule(_FORWARD, "std", "var", "std_mean", "var_mean")
def _std_fwd(ev: Evidence):
    s = ev.first()
    n = s.numel if s else 0
    why = ("std/var with Bessel's correction divides by (n − 1), which is 0 for a single element "
           f"(the input has {n} element{'s' if n != 1 else ''} along the reduced dims).")
    return why, "Use correction=0 for a single sample, or nanguard.std / nanguard.var."


@_rule(_FORWARD, "mean", "nanmean")
def _mean_fwd(ev: Evidence):
    s = ev.first()
    if s is not None and s.numel == 0:
        return "the mean of an empty tensor is 0/0 = NaN.", "nanguard.masked_mean(x, mask, dim) returns 0 for empty groups."
    return None


def _overflow(ev: Evidence) -> Optional[Tuple[str, str]]:
    """An op (matmul, sum, a cast...) whose result exceeds the dtype's range."""
    dtype = ev.output_dtype()
    limit = _MAX_FINITE.get(dtype)
    if ev.kind != "inf" or limit is None:
        return None
    peak = max((max(abs(s.min or 0), abs(s.max or 0)) for s, _ in ev.inputs if s.min is not None), default=None)
    why = f"the result exceeds {dtype}'s largest finite value {limit:.6g}"
    if peak is not None:
        why += f" (the inputs reach {_fmt(peak)})"
    why += "."
    if dtype in ("float16", "bfloat16"):
        fix = ("Compute this op in float32 (x.float()), or use torch.autocast, which keeps overflow-prone ops "
               "in float32, with torch.amp.GradScaler for the gradients.")
    else:
        fix = "Rescale the values (normalise inputs, lower the learning rate) or compute in float64."
    return why, fix


# ------------------------------------------------------------------------------ backward
def _zeros_of_first(ev: Evidence) -> Tuple[int, int]:
    s = ev.first()
    return (s.zeros, s.numel) if s else (0, 0)


@_rule(_BACKWARD, "sqrt")
def _sqrt_bwd(ev: Evidence):
    z, n = _zeros_of_first(ev)
    why = "sqrt's gradient is 1/(2·sqrt(x))"
    if z:
        why += (f"; {z} of {n} inputs were exactly 0, so the gradient there is inf, and 0·inf (or 0/0 where "
                f"the incoming gradient is 0) = NaN.")
    else:
        why += "; it is inf where x = 0."
    if _looks_like_distance(ev.code):
        fix = ("nanguard.distance_matrix(coordinates) (zero gradient on the diagonal), or nanguard.sqrt(...) "
               "for a zero gradient at 0.")
    else:
        fix = "nanguard.sqrt(...) has gradient 0 at 0 (minimum-norm subgradient); nanguard.norm for vector lengths."
    return why, fix


@_rule(_BACKWARD, "log", "log2", "log10")
def _log_bwd(ev: Evidence):
    z, n = _zeros_of_first(ev)
    why = f"log's gradient is 1/x; {z} of {n} inputs were 0, so the gradient is inf there (NaN once multiplied by 0)."
    return why, _log_fwd(ev)[1] if _log_fwd(ev) else "Use nanguard.xlogy or stay in log space (F.log_softmax)."


@_rule(_BACKWARD, "exp", "expm1")
def _exp_bwd(ev: Evidence):
    s = ev.first()
    limit = _exp_limit(s.dtype if s else "float32")
    why = ("exp's gradient is exp(x) itself; it overflowed to inf in the forward "
           f"(inputs up to {_fmt(s.max if s else None)} > {limit:.2f}). A where()/mask discarded those entries, "
           "but the backward multiplies their zero gradient by inf: 0·inf = NaN.")
    c = ev.code.replace(" ", "")
    if "log1p" in c or "log(1+" in c or "where" in c:
        fix = ("nanguard.softplus(x) for log(1 + exp(x)); in general nanguard.safe_where (the double-where "
               "trick) keeps a discarded branch from poisoning the gradient.")
    else:
        fix = "nanguard.softplus / nanguard.logsumexp / nanguard.logaddexp, or nanguard.safe_where around the exp."
    return why, fix


@_rule(_BACKWARD, "log1p")
def _log1p_bwd(ev: Evidence):
    s = ev.first()
    why = f"log1p's gradient is 1/(1 + x); the input held {s.posinf if s else '?'} +inf and values down to {_fmt(s.min if s else None)}."
    return why, "nanguard.softplus(x) for log(1 + exp(x)); nanguard.safe_where for a discarded branch."


@_rule(_BACKWARD, "div", "true_divide", "reciprocal")
def _div_bwd(ev: Evidence):
    args = ev.args()
    den = args[-1][0] if args else None
    zeros = den.zeros if den else 0
    why = f"the gradient of a/b is 1/b and −a/b²; {zeros} denominators were 0."
    return why, _div_fwd(ev)[1] if _div_fwd(ev) else "nanguard.div(a, b)"


@_rule(_BACKWARD, "pow")
def _pow_bwd(ev: Evidence):
    s = ev.first()
    exps = [a.value for a in ev.scalars]
    p = f" (p = {exps[0]:g})" if exps else ""
    why = (f"the gradient of x**p is p·x**(p−1), inf at x = 0 when p < 1{p}; {s.zeros if s else '?'} of "
           f"{s.numel if s else '?'} bases were 0.")
    return why, "nanguard.pow(x, p) (finite gradient at 0), or nanguard.sqrt / nanguard.norm for p = 0.5."


@_rule(_BACKWARD, "xlogy", "special_xlogy")
def _xlogy_bwd(ev: Evidence):
    args = ev.forward_inputs
    zx = args[0][0].zeros if args else 0
    why = f"xlogy(x, y)'s gradient with respect to y is x/y, which is 0/0 = NaN where x = y = 0 ({zx} zeros in x)."
    return why, ("nanguard.xlogy(x, y) gives gradient 0 where x = 0; nanguard.entropy(p) / "
                 "nanguard.cross_entropy_probs(p, q) for the usual sums.")


def _masked_rows_bwd(kind: str) -> Rule:
    def rule(ev: Evidence):
        t = ev.forward_inputs[0][1] if ev.forward_inputs else None
        rows = _rows_all_neginf(t, ev.dim)
        s = ev.first()
        n_rows = f"{rows[0]} of {rows[1]} rows" if rows else f"rows with −inf ({s.neginf if s else '?'} −inf inputs)"
        why = (f"the gradient of {kind} is exp(x − {kind}(x)); on {n_rows} whose entries are all −inf this is "
               f"exp(−inf − (−inf)) = exp(NaN).")
        fix = {"logsumexp": "nanguard.logsumexp(x, dim) has a zero gradient on all −inf rows.",
               "log_softmax": "nanguard.log_softmax(x, dim, mask=mask) (zero gradient on fully masked rows).",
               }.get(kind, "nanguard.softmax(x, dim, mask=mask) (zero gradient on fully masked rows).")
        return why, fix
    return rule


_BACKWARD["logsumexp"] = _masked_rows_bwd("logsumexp")
_BACKWARD["softmax"] = _masked_rows_bwd("softmax")
_BACKWARD["log_softmax"] = _masked_rows_bwd("log_softmax")


@_rule(_BACKWARD, "norm", "linalg_vector_norm", "frobenius_norm")
def _norm_bwd(ev: Evidence):
    return ("the gradient of ‖x‖ is x/‖x‖, which is 0/0 at the zero vector.",
            "nanguard.norm(x, dim) / nanguard.normalize(x, dim) have gradient 0 at the zero vector.")


@_rule(_BACKWARD, "std", "var", "std_mean", "var_mean")
def _std_bwd(ev: Evidence):
    return ("std's gradient is (x − mean)/((n − 1)·std); where all entries are equal, std = 0 and this is 0/0.",
            "nanguard.std / nanguard.var give gradient 0 for constant groups.")


@_rule(_BACKWARD, "acos", "asin")
def _acos_bwd(ev: Evidence):
    return (f"{ev.base}'s gradient is ∓1/sqrt(1 − x²), infinite at |x| = 1 (and NaN beyond, from round-off).",
            f"nanguard.{ev.base}(x) has a finite gradient at ±1; nanguard.cosine_similarity for the cosine.")


@_rule(_BACKWARD, "atan2")
def _atan2_bwd(ev: Evidence):
    return ("atan2's gradient is (x, −y)/(x² + y²), 0/0 at the origin.",
            "Exclude the origin with nanguard.safe_where, or add the angle only where x² + y² > 0.")


@_rule(_BACKWARD, "abs", "relu", "where", "masked_fill", "mul", "add", "sub")
def _passthrough_bwd(ev: Evidence):
    return None


def _input_rule(ev: Evidence) -> Tuple[str, str]:
    bad = [s for s, _ in ev.inputs if s.nan]
    if bad:
        s = bad[0]
        why = (f"{s.nan} of {s.numel} values of `{s.name}` were already NaN when it reached this op: the NaN came "
               f"from outside the code nanguard checks (the data, loaded weights, or code that ran before "
               f"detect() was entered).")
    else:
        why = "a NaN arrived from outside the checked code (data, weights, or a value set before detect())."
    fix = ("Check the data where it is loaded (torch.isnan(batch).any()), e.g. a header row or a missing value "
           "parsed as NaN; clean it (drop the rows, or torch.nan_to_num) before the model sees it.")
    return why, fix


def explain(ev: Evidence) -> Tuple[str, str]:
    """(explanation, suggestion) for a finding; never empty."""
    if ev.phase == "input":
        return _input_rule(ev)
    table = _BACKWARD if ev.phase == "backward" else _FORWARD
    rule = table.get(ev.base)
    result = None
    try:
        result = rule(ev) if rule is not None else None
    except Exception:  # an explanation must never hide the finding itself
        result = None
    if result is None and ev.phase == "forward":
        result = _overflow(ev)
    if result is None:
        fn = ev.base
        if ev.phase == "backward":
            why = (f"the backward of {fn} produced {ev.what} from finite values (node {ev.node or '?'}, "
                   f"op {ev.op}).")
        else:
            why = f"{fn} produced {ev.what} from finite inputs."
        fix = ("Look at the input ranges below for zeros, negatives or huge values; nanguard's safe ops "
               "(nanguard.sqrt, nanguard.div, nanguard.xlogy, nanguard.softmax ...) cover the usual cases.")
        if ev.kind == "inf" and ev.phase == "forward":
            over = _overflow(ev)
            if over:
                return over
        return why, fix
    return result


def message(phase: str, kind: str, fn: str, where: str) -> str:
    what = "NaN" if kind == "nan" else "Inf"
    if phase == "backward":
        return f"backward of {fn} produced {what} from finite values at {where}"
    if phase == "input":
        return f"{what} entered from outside and was first consumed by {fn} at {where}"
    if phase == "optimizer":
        return f"the optimizer step produced {what} in the parameters ({fn})"
    return f"{fn} produced {what} from finite inputs at {where}"


def optimizer_explanation(optimizer: torch.optim.Optimizer, kind: str) -> Tuple[str, str]:
    group = optimizer.param_groups[0] if optimizer.param_groups else {}
    name = type(optimizer).__name__
    hp = ", ".join(f"{k}={group[k]}" for k in ("lr", "eps", "weight_decay") if k in group)
    why = (f"the gradients were finite, but {name}.step ({hp}) made "
           f"{'NaN' if kind == 'nan' else 'Inf'} in the parameters.")
    if "eps" in group and not group["eps"]:
        why += " With eps=0, Adam-type updates divide 0/0 where a gradient has always been 0."
    fix = ("Use eps > 0 (Adam's default 1e-8), a smaller learning rate, or clip the gradients "
           "(torch.nn.utils.clip_grad_norm_); nanguard.GradGuard can skip a bad step.")
    return why, fix


__all__ = ["Evidence", "explain", "message", "optimizer_explanation"]
