"""Can an op's argument reach its singular set? The conditions of `nanguard.core.singular`,
decided on boxes.

`hits` maps an aten op to the table's entries (``pow`` is ``pow_fractional``,
``pow_negative`` or ``pow_base`` by its exponent), evaluates each condition on the box of
the argument it is about, and returns a `Hit` per condition that some element can meet.
Infinities that are real values (a ``-inf`` mask) are left out: ``log(-inf)`` is NaN from a
non-finite input, which is not this op's doing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import torch

from nanguard.core.singular import Singularity, singularities
from nanguard.torch.auditor.interval import F64, INF, Box, dtype_max
from nanguard.torch.auditor.rules.elementwise import exp_limit
from nanguard.torch.auditor.rules.nn import all_masked
from nanguard.torch.auditor.rules.stats import correction_of, reduced_count
from nanguard.torch.auditor.graph import Node, OpRecord, Ref

if TYPE_CHECKING:
    from nanguard.torch.auditor.analysis import Analysis


@dataclass
class Hit:
    """One singular set an op can reach."""

    rec: OpRecord
    singularity: Singularity
    node: Optional[Node]             # the argument the condition is about
    mask: Optional[torch.Tensor]     # elements that can meet it (broadcast to the argument), or None
    range: Tuple[float, float]       # bounds of the argument
    limit: Optional[float] = None    # the threshold for exp_overflow / pow_base
    power: Optional[float] = None    # the exponent of pow_fractional / pow_negative

    @property
    def phase(self) -> str:
        return self.singularity.phase

    @property
    def condition(self) -> str:
        return self.singularity.condition


_TABLE_NAME = {"log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p", "exp": "exp", "expm1": "expm1",
               "exp2": "exp2", "sinh": "sinh", "cosh": "cosh", "sqrt": "sqrt", "rsqrt": "rsqrt", "div": "div",
               "true_divide": "div", "divide": "div", "floor_divide": "div", "remainder": "div", "fmod": "div",
               "reciprocal": "reciprocal", "addcdiv": "addcdiv", "acos": "acos", "arccos": "acos", "asin": "asin",
               "arcsin": "asin", "atanh": "atanh", "erfinv": "erfinv", "acosh": "acosh", "atan2": "atan2",
               "arctan2": "atan2", "lgamma": "lgamma", "digamma": "digamma", "polygamma": "polygamma",
               "logit": "logit", "xlogy": "xlogy", "special_xlogy": "xlogy", "_softmax": "softmax",
               "softmax": "softmax", "special_softmax": "softmax", "_log_softmax": "log_softmax",
               "log_softmax": "log_softmax", "add": "add", "sub": "sub", "subtract": "sub", "rsub": "rsub",
               "mul": "mul", "multiply": "mul", "var": "var", "std": "std", "var_mean": "var", "std_mean": "std",
               "nll_loss_forward": "nll_loss", "nll_loss2d_forward": "nll_loss", "nll_loss": "nll_loss",
               "_weight_norm_interface": "weight_norm", "_weight_norm": "weight_norm", "logsumexp": "logsumexp"}
# the argument position of the table's argument, where the aten op's differs
_ARG_POSITION = {("reciprocal", 1): 0, ("addcdiv", 1): 2, ("polygamma", 0): 1}


def _arg_box(rec: OpRecord, i: int, analysis: "Analysis") -> Tuple[Optional[Box], Optional[Node]]:
    a = rec.args[i] if i < len(rec.args) else None
    if isinstance(a, Ref):
        return analysis.box_of(a.node), a.node
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return Box.of(float(a), float(a), (), F64), None
    return None, None


def _finite(b: Box) -> torch.Tensor:
    return ~b.point_inf()


def _cond_mask(cond: str, b: Box, dtype: torch.dtype, limit: Optional[float]) -> Optional[torch.Tensor]:
    lo, hi = b.lo, b.hi
    ok = _finite(b)
    if cond == "nonpositive":
        m = lo <= 0
    elif cond == "negative":
        m = lo < 0
    elif cond in ("zero", "zero_divisor"):
        m = b.contains_zero()
    elif cond == "exp_overflow":
        m = hi > (limit if limit is not None else INF)
    elif cond == "outside_unit":
        m = (lo < -1) | (hi > 1)
    elif cond == "unit":
        m = ((lo <= 1) & (hi >= 1)) | ((lo <= -1) & (hi >= -1))
    elif cond == "not_inside_unit":
        m = (lo <= -1) | (hi >= 1)
    elif cond == "below_one":
        m = lo < 1
    elif cond == "one":
        m = (lo <= 1) & (hi >= 1)
    elif cond == "at_or_below_minus_one":
        m = lo <= -1
    elif cond == "pole":
        m = (lo <= 0) & (torch.ceil(lo) <= torch.minimum(hi, torch.tensor(0.0, dtype=F64)))
    elif cond == "outside_open_unit_interval":
        m = (lo <= 0) | (hi >= 1)
    else:
        return None
    return m & ok


def _masked_range(b: Box, mask: torch.Tensor) -> Tuple[float, float]:
    lo, hi = torch.broadcast_tensors(b.lo, b.hi)
    m = mask.expand(lo.shape) if mask.dim() <= lo.dim() else mask
    if m.shape != lo.shape:
        return b.bounds()
    if not bool(m.any()):
        return b.bounds()
    return float(lo[m].min()), float(hi[m].max())


def hits(rec: OpRecord, analysis: "Analysis") -> List[Hit]:
    """The singular sets ``rec`` can reach, given the analysis' boxes."""
    base = rec.base
    out: List[Hit] = []
    name = _TABLE_NAME.get(base)
    dtype = next((n.dtype for n in rec.outputs if n is not None), torch.float32)
    if base == "pow" or base == "float_power":
        return _pow_hits(rec, analysis, dtype)
    if base in ("mean", "nanmean") and _empty_selection(rec, analysis):
        s = singularities("mean_selection")[0]
        node = rec.args[0].node if isinstance(rec.args[0], Ref) else None
        out.append(Hit(rec, s, node, None, (0.0, 0.0)))
    if name is None:
        return out
    for s in singularities(name, "torch"):
        pos = _ARG_POSITION.get((name, s.argument), s.argument)
        cond = s.condition
        if cond == "empty_slice":
            if isinstance(rec.args[0], Ref) and len(rec.args) > 1:
                b = analysis.box_of(rec.args[0].node)
                d = rec.args[1]
                d = d[0] if isinstance(d, (list, tuple)) and len(d) == 1 else d
                if not isinstance(d, int) or not b.shape:
                    continue
                dead = all_masked(b, d % len(b.shape))
                if bool(dead.any()):
                    out.append(Hit(rec, s, rec.args[0].node, dead, (-INF, -INF)))
            continue
        special = _SPECIAL.get(cond)
        if special is not None:
            h = special(rec, analysis, s)
            if h is not None:
                out.append(h)
            continue
        if cond == "degenerate_count":
            b = analysis.box_of(rec.args[0].node)
            n = reduced_count(b.shape, rec.args[1] if len(rec.args) > 1 else rec.kwargs.get("dim"))
            if b.numel and n - correction_of(analysis.ctx(rec)) <= 0:
                out.append(Hit(rec, s, rec.args[0].node, None, b.bounds()))
            continue
        if cond == "both_zero":
            y, yn = _arg_box(rec, 0, analysis)
            x, _ = _arg_box(rec, 1, analysis)
            if y is None or x is None:
                continue
            m = y.contains_zero() & x.contains_zero()
            if bool(m.any()):
                out.append(Hit(rec, s, yn, m, y.bounds()))
            continue
        if s.phase == "gradient" and name == "weight_norm":
            v, vn = _arg_box(rec, 0, analysis)
            if v is not None and vn is not None and analysis.requires(vn):
                dim = int(rec.args[2]) if len(rec.args) > 2 else 0
                z = v.contains_zero().expand(v.shape) if v.numel else v.contains_zero()
                dims = [d for d in range(len(v.shape)) if d != dim % max(len(v.shape), 1)]
                if v.numel and bool(z.all(dim=dims[0]).any() if len(dims) == 1 else z.flatten(1).all(1).any()):
                    out.append(Hit(rec, s, vn, None, v.bounds()))
            continue
        b, node = _arg_box(rec, pos, analysis)
        if b is None:
            continue
        limit = exp_limit(base, dtype) if cond == "exp_overflow" else None
        m = _cond_mask(cond, b, dtype, limit)
        if m is None or not bool(m.any()):
            continue
        if name == "xlogy" and s.phase == "value":   # xlogy(0, 0) = 0: only where x can be non-zero
            x, _ = _arg_box(rec, 0, analysis)
            if x is None or bool(((x.lo == 0) & (x.hi == 0)).all()):
                continue
        out.append(Hit(rec, s, node, m, _masked_range(b, m), limit=limit))
    return out


def _pow_hits(rec: OpRecord, analysis: "Analysis", dtype: torch.dtype) -> List[Hit]:
    base_arg, exp_arg = rec.args[0], rec.args[1] if len(rec.args) > 1 else rec.kwargs.get("exponent")
    out: List[Hit] = []
    if isinstance(base_arg, (int, float)) and isinstance(exp_arg, Ref):   # c ** x
        c = float(base_arg)
        if c > 1:
            b = analysis.box_of(exp_arg.node)
            limit = math.log(dtype_max(dtype)) / math.log(c) * (1 - 1e-7) if dtype.is_floating_point else INF
            m = (b.hi > limit) & _finite(b)
            if bool(m.any()):
                s = singularities("pow_base")[0]
                out.append(Hit(rec, s, exp_arg.node, m, _masked_range(b, m), limit=limit))
        return out
    if not isinstance(base_arg, Ref):
        return out
    e = analysis.box_of(exp_arg.node) if isinstance(exp_arg, Ref) else (
        Box.of(float(exp_arg), float(exp_arg), (), F64) if isinstance(exp_arg, (int, float)) else None)
    if e is None or not e.numel or float(e.lo.min()) != float(e.hi.max()):
        return out
    p = float(e.lo.min())
    b = analysis.box_of(base_arg.node)
    node = base_arg.node
    entries: List[Singularity] = []
    if p != int(p):
        entries += singularities("pow_fractional")
    if p < 0:
        entries += singularities("pow_negative")
    for s in entries:
        if s.condition == "zero" and s.phase == "gradient" and not (0 < p < 1):
            continue
        m = _cond_mask(s.condition, b, dtype, None)
        if m is not None and bool(m.any()):
            out.append(Hit(rec, s, node, m, _masked_range(b, m), power=p))
    return out


def _inf_minus_inf(rec: OpRecord, analysis: "Analysis", s: Singularity) -> Optional[Hit]:
    a, an = _arg_box(rec, 0, analysis)
    b, _ = _arg_box(rec, 1, analysis)
    if a is None or b is None:
        return None
    pa, pb = a.point_inf(), b.point_inf()
    if not (bool(pa.any()) and bool(pb.any())):
        return None
    alpha = float(rec.args[2]) if len(rec.args) > 2 and isinstance(rec.args[2], (int, float)) else \
        float(rec.kwargs.get("alpha", 1))
    sign = -1.0 if rec.base in ("sub", "subtract", "rsub") else 1.0
    sb = torch.sign(b.lo) * sign * (1 if alpha >= 0 else -1)
    m = pa & pb & (torch.sign(a.lo) != sb)
    if not bool(m.any()):
        return None
    return Hit(rec, s, an, m, (-INF, INF))


def _zero_times_inf(rec: OpRecord, analysis: "Analysis", s: Singularity) -> Optional[Hit]:
    a, an = _arg_box(rec, 0, analysis)
    b, bn = _arg_box(rec, 1, analysis)
    if a is None or b is None:
        return None
    m = (a.point_inf() & b.contains_zero()) | (b.point_inf() & a.contains_zero())
    if not bool(m.any()):
        return None
    return Hit(rec, s, an if bool(a.point_inf().any()) else bn, m, (-INF, INF))


def _no_target(rec: OpRecord, analysis: "Analysis", s: Singularity) -> Optional[Hit]:
    reduction = rec.args[3] if len(rec.args) > 3 else rec.kwargs.get("reduction", 1)
    if int(reduction) != 1:
        return None
    target = rec.args[1]
    if not isinstance(target, Ref):
        return None
    t = analysis.box_of(target.node)
    ignore = int(rec.args[4] if len(rec.args) > 4 else rec.kwargs.get("ignore_index", -100))
    if t.exact is not None:
        return None   # an observed target: its outcome is what the run showed
    if bool(((t.lo <= ignore) & (t.hi >= ignore)).all()):
        return Hit(rec, s, target.node, None, t.bounds())
    return None


# conditions about several arguments at once, each decided by its own function
_SPECIAL = {"inf_minus_inf": _inf_minus_inf, "zero_times_inf": _zero_times_inf, "no_target": _no_target}


def _empty_selection(rec: OpRecord, analysis: "Analysis") -> bool:
    """The mean of a selection (``x[mask]``, ``masked_select``) whose mask is not exact."""
    if rec.kwargs.get("dim") is not None or (len(rec.args) > 1 and rec.args[1] not in (None, [], ())):
        return False
    a = rec.args[0]
    if not isinstance(a, Ref) or a.node.producer is None:
        return False
    prod = a.node.producer
    if prod.base not in ("index", "masked_select"):
        return False
    masks: List[Any] = []
    if prod.base == "masked_select":
        masks = [prod.args[1]]
    else:
        masks = [m for m in (prod.args[1] if len(prod.args) > 1 else []) if isinstance(m, Ref)]
    for m in masks:
        if isinstance(m, Ref) and m.node.dtype == torch.bool and m.node.kind != "exact":
            return True
    return False


# ops whose rules bound their result tightly enough to tell an overflow from imprecision
OVERFLOW_OPS = frozenset({"add", "sub", "rsub", "mul", "pow", "square", "mm", "bmm", "matmul", "addmm", "baddbmm",
                          "mv", "dot", "linear", "convolution", "_convolution", "sum", "cumsum", "_to_copy",
                          "addcmul", "einsum"})


def overflow_hit(rec: OpRecord, analysis: "Analysis") -> Optional[Hit]:
    """Finite inputs whose result the dtype cannot hold (float16 products and sums)."""
    if rec.base not in OVERFLOW_OPS:
        return None
    ins = [analysis.box_of(n) for n in rec.input_nodes() if n.is_float]
    if not ins or any(not b.numel for b in ins):
        return None
    if any(bool(torch.isinf(b.lo).any()) or bool(torch.isinf(b.hi).any()) for b in ins):
        return None
    for k, node in enumerate(rec.outputs):
        if node is None or not node.is_float:
            continue
        b = analysis.box_of(node)
        if b.numel and (bool(torch.isinf(b.lo).any()) or bool(torch.isinf(b.hi).any())):
            s = singularities("overflow")[0]
            return Hit(rec, s, node, None, (float(b.lo.min()), float(b.hi.max())))
    return None


__all__ = ["Hit", "hits", "overflow_hit"]
