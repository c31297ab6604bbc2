"""Which hazard of the catalogue a finding is, read off the ops around it in the trace.

The singular table says *what* can go wrong (log at 0); the producer of the argument and the
consumers of the result say *which* story it is, and so which fix the catalogue words:
``log`` of a ``softmax`` is ``log_softmax``, ``log1p(exp(x))`` is ``softplus``,
``sqrt(|a|² + |b|² − 2a·b)`` is ``distance_matrix``, ``x / ‖x‖`` is ``norm_zero``
(``nanguard.normalize``), a division by the count of a mask is ``mean_empty``
(``nanguard.masked_mean``), a ``log`` whose NaN a ``where`` discards is ``where_gradient``
(``nanguard.safe_where``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import torch

from nanguard.torch.auditor.graph import EXACT, Node, OpRecord, Ref

if TYPE_CHECKING:
    from nanguard.torch.auditor.analysis import Analysis
    from nanguard.torch.auditor.checks import Hit

_PASS = frozenset({"detach", "alias", "clone", "contiguous", "lift_fresh", "_to_copy", "view", "_unsafe_view",
                   "reshape", "unsqueeze", "squeeze", "expand", "permute", "transpose", "t", "select", "slice",
                   "index", "gather", "diagonal", "flatten", "view_replay"})
_PRODUCTS = frozenset({"mm", "bmm", "matmul", "addmm", "baddbmm", "einsum", "mv", "dot"})


def producer(node: Optional[Node], through: frozenset = _PASS) -> Optional[OpRecord]:
    """The op that computed ``node``'s values, looking through views, copies and selections."""
    hops = 0
    while node is not None and node.producer is not None and hops < 32:
        rec = node.producer
        if rec.base not in through or not rec.args or not isinstance(rec.args[0], Ref):
            return rec
        node = rec.args[0].node
        hops += 1
    return None


def _arg(rec: Optional[OpRecord], i: int) -> Optional[Node]:
    if rec is None or i >= len(rec.args) or not isinstance(rec.args[i], Ref):
        return None
    return rec.args[i].node


def _made_by(node: Optional[Node], *bases: str) -> bool:
    p = producer(node)
    return p is not None and p.base in bases


def _is_softmax(node: Optional[Node]) -> bool:
    p = producer(node)
    if p is None:
        return False
    if p.base in ("_softmax", "softmax", "_safe_softmax"):
        return True
    # exp(x) / exp(x).sum(): a softmax by hand
    return p.base in ("div",) and _made_by(_arg(p, 0), "exp") and _made_by(_arg(p, 1), "sum")


def _is_sigmoid(node: Optional[Node]) -> bool:
    return _made_by(node, "sigmoid")


def _one_minus(node: Optional[Node]) -> Optional[Node]:
    """x where ``node`` is ``1 - x``."""
    p = producer(node)
    if p is None:
        return None
    if p.base == "rsub" and isinstance(p.args[1], (int, float)) and float(p.args[1]) == 1:
        return _arg(p, 0)
    if p.base == "sub" and isinstance(p.args[0], Ref) and p.args[0].node.kind == EXACT \
            and p.args[0].node.value is not None and bool((p.args[0].node.value == 1).all()):
        return _arg(p, 1)
    return None


def _plus_one_of_exp(node: Optional[Node]) -> bool:
    p = producer(node)
    if p is None or p.base != "add":
        return False
    return any(_made_by(_arg(p, i), "exp") for i in (0, 1))


def _sum_of_exp(node: Optional[Node]) -> bool:
    p = producer(node)
    return p is not None and p.base in ("sum", "mean") and _made_by(_arg(p, 0), "exp")


def _clamped(node: Optional[Node]) -> Optional[Node]:
    p = producer(node)
    if p is not None and p.base in ("clamp", "clamp_min", "clamp_max", "clip"):
        return _arg(p, 0)
    return None


def _gram_expansion(node: Optional[Node], depth: int = 0) -> bool:
    """``node`` is a sum/difference that takes in a matrix product (``|a|² + |b|² − 2a·b``)."""
    p = producer(node)
    if p is None or depth > 6:
        return False
    if p.base in _PRODUCTS:
        return depth > 0
    if p.base in ("add", "sub", "rsub", "mul", "clamp", "clamp_min", "relu", "abs"):
        return any(_gram_expansion(_arg(p, i), depth + 1) for i in (0, 1))
    return False


def _sum_of_squares(node: Optional[Node], analysis: "Analysis") -> bool:
    p = producer(node)
    hops = 0
    while p is not None and p.base in ("add", "clamp", "clamp_min") and hops < 4:
        # sum(x²) + eps, clamp(sum(x²), 0): look at the first operand
        p = producer(_arg(p, 0))
        hops += 1
    if p is None or p.base not in ("sum", "mean"):
        return False
    sq = producer(_arg(p, 0))
    if sq is None:
        return False
    if sq.base == "pow" and len(sq.args) > 1 and sq.args[1] == 2:
        return True
    if sq.base in ("square",):
        return True
    return sq.base == "mul" and len(sq.args) > 1 and analysis.same_value(sq.args[0], sq.args[1])


def _norm_like(node: Optional[Node], analysis: "Analysis") -> bool:
    p = producer(node, _PASS | {"expand_as"})
    if p is None:
        return False
    if p.base in ("linalg_vector_norm", "norm", "frobenius_norm"):
        return True
    if p.base == "sqrt" or (p.base == "pow" and len(p.args) > 1 and p.args[1] == 0.5):
        return _sum_of_squares(_arg(p, 0), analysis)
    if p.base == "mul":   # ‖a‖·‖b‖ (cosine similarity by hand)
        return any(_norm_like(_arg(p, i), analysis) for i in (0, 1))
    return False


def _count_like(node: Optional[Node]) -> bool:
    """A sum of a mask (or of its float cast): the number of kept entries."""
    p = producer(node, _PASS | {"_to_copy", "type_as"})
    if p is None or p.base not in ("sum", "count_nonzero"):
        return False
    src = _arg(p, 0)
    q = producer(src, _PASS | {"_to_copy", "type_as"})
    if src is not None and src.dtype in (torch.bool,):
        return True
    if q is not None and q.base in ("gt", "ge", "lt", "le", "eq", "ne", "logical_and", "logical_or", "logical_not",
                                    "bitwise_and", "bitwise_or"):
        return True
    return src is not None and src.kind == EXACT and src.value is not None and bool(
        ((src.value == 0) | (src.value == 1)).all())


def _std_like(node: Optional[Node]) -> bool:
    p = producer(node)
    return p is not None and p.base in ("std", "var", "std_mean", "var_mean")


def _consumers(analysis: "Analysis", rec: OpRecord) -> List[OpRecord]:
    out: List[OpRecord] = []
    for n in rec.outputs:
        if n is not None:
            out.extend(analysis._consumers_of(n))
    return out


def hazard_of(hit: "Hit", analysis: "Analysis", discarded: bool) -> str:
    """The catalogue key that explains ``hit`` and words its fix."""
    rec, cond = hit.rec, hit.condition
    base = rec.base
    arg = hit.node
    if discarded:
        return "where_gradient"
    if base in ("log", "log2", "log10"):
        if _is_softmax(arg):
            return "log_softmax"
        if _is_sigmoid(arg):
            return "log_sigmoid"
        inner = _clamped(arg)
        if inner is not None and (_is_softmax(inner) or _is_sigmoid(inner)):
            return "clamped_log"
        x = _one_minus(arg)
        if x is not None and _is_sigmoid(x):
            return "log_one_minus_sigmoid"
        if _plus_one_of_exp(arg):
            return "softplus"
        if _sum_of_exp(arg):
            return "logsumexp_overflow"
        if _sum_of_squares(arg, analysis) or _std_like(arg):
            return "log_zero"
        if any(c.base == "mul" for c in _consumers(analysis, rec)) and hit.range[0] >= 0:
            return "xlogy_zero"
        return "log_zero" if hit.range[0] >= 0 else "log_negative"
    if base == "log1p":
        return "softplus" if _made_by(arg, "exp") else "log1p_domain"
    if cond == "exp_overflow":
        for c in _consumers(analysis, rec):
            if c.base == "log1p" or (c.base == "add" and any(
                    k.base in ("log",) for k in _consumers(analysis, c))):
                return "softplus"
            if c.base in ("sum", "mean") and any(k.base == "log" for k in _consumers(analysis, c)):
                return "logsumexp_overflow"
            if c.base in ("sum",) or c.base == "div":
                return "softmax_overflow"
        return "exp_overflow"
    if base == "sqrt" or (base == "pow" and hit.power is not None and 0 < hit.power < 1):
        if _gram_expansion(arg):
            return "distance_matrix"
        if _sum_of_squares(arg, analysis):
            return "norm_zero"
        if base == "pow":
            return "fractional_power_zero"
        return "sqrt_zero" if hit.phase == "gradient" else "sqrt_negative"
    if base in ("rsqrt",) or (base == "pow" and hit.power is not None and hit.power < 0):
        return "negative_power_zero"
    if base == "pow":
        return "exp_overflow" if cond == "exp_overflow" else "fractional_power_zero"
    if cond in ("zero_divisor",):
        if base in ("mean", "nanmean"):
            return "mean_empty"
        den = _arg(rec, 2 if base == "addcdiv" else (0 if base == "reciprocal" else 1))
        if _norm_like(den, analysis):
            return "norm_zero"
        if _count_like(den):
            return "mean_empty"
        if _std_like(den) or _made_by(den, "sqrt") and _std_like(_arg(producer(den), 0)):
            return "std_degenerate"
        return "div_zero"
    if base in ("acos", "arccos"):
        return "acos_domain"
    if base in ("asin", "arcsin"):
        return "asin_domain"
    if cond == "overflow":
        dt = next((n.dtype for n in rec.outputs if n is not None), torch.float32)
        if dt in (torch.float16, torch.bfloat16):
            # under autocast the fix keeps autocast (the op in float32), never "use autocast"
            return "overflow_mixed_precision" if rec.autocast else "overflow_low_precision"
        return "overflow"
    return hit.singularity.hazard


__all__ = ["hazard_of", "producer"]
