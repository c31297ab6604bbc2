"""What the analysis reads off the trace about values, beyond their bounds: which nodes hold
the same value (through copies and ``detach``), ``x - max(x)`` (every entry ≤ 0), and what a
comparison says inside a ``where``/``masked_fill`` branch (``where(x > 0, x, 1)``)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from nanguard.torch.auditor.graph import EXACT, Node, OpRecord, Ref
from nanguard.torch.auditor.interval import F64, Box, dtype_tiny

# ops whose output is the same value as their input (for x * x and x - max(x))
IDENTITY = frozenset({"detach", "alias", "clone", "contiguous", "lift_fresh", "lift_fresh_copy", "_to_copy"})
# ops that only reshape: a max taken with keepdim=False and unsqueezed is still the row max
RESHAPE = frozenset({"unsqueeze", "view", "_unsafe_view", "reshape", "expand", "squeeze"})
MAXIMA = frozenset({"amax", "max", "logsumexp"})
CMP = frozenset({"gt", "ge", "lt", "le", "ne", "eq"})
NEGATE = {"gt": "le", "ge": "lt", "lt": "ge", "le": "gt", "eq": "ne", "ne": "eq"}
FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}


def canon(node: Node, through: frozenset = IDENTITY) -> Node:
    seen = 0
    while node.producer is not None and node.producer.base in through and seen < 64:
        rec = node.producer
        if rec.base == "_to_copy" and rec.args and isinstance(rec.args[0], Ref) \
                and rec.args[0].node.dtype != node.dtype:
            break
        first = rec.args[0] if rec.args else None
        if not isinstance(first, Ref):
            break
        node = first.node
        seen += 1
    return node

def same_value(a: Any, b: Any) -> bool:
    return isinstance(a, Ref) and isinstance(b, Ref) and canon(a.node) is canon(b.node)

def max_subtracted(rec: OpRecord) -> bool:
    """``rec`` is ``x - max(x)`` (or ``x - logsumexp(x)``) along some dims: every entry ≤ 0."""
    if len(rec.args) < 2 or not isinstance(rec.args[0], Ref) or not isinstance(rec.args[1], Ref):
        return False
    alpha = rec.args[2] if len(rec.args) > 2 else rec.kwargs.get("alpha", 1)
    if alpha != 1:
        return False
    x = canon(rec.args[0].node)
    m = canon(rec.args[1].node, IDENTITY | RESHAPE)
    prod = m.producer
    if prod is None or prod.base not in MAXIMA or not prod.args or not isinstance(prod.args[0], Ref):
        return False
    if prod.base == "max" and prod.outputs and prod.outputs[0] is not m:
        return False
    return canon(prod.args[0].node) is x

def refined(rec: OpRecord, arg_index: int, box: Box, cond_index: int, branch: bool) -> Box:
    """``box`` of a where/masked_fill branch, narrowed by what the condition says there."""
    cond = rec.args[cond_index] if cond_index < len(rec.args) else None
    value = rec.args[arg_index] if arg_index < len(rec.args) else None
    if not isinstance(cond, Ref) or not isinstance(value, Ref):
        return box
    fact = comparison(cond.node)
    if fact is None:
        return box
    subject, op, c = fact
    if canon(value.node) is not subject:
        return box
    if not branch:
        op = NEGATE[op]
    return narrow(box, op, c)

def comparison(cond: Node) -> Optional[Tuple[Node, str, float]]:
    """(x, op, c) when ``cond`` is ``x op c`` for a constant ``c`` (``~(x == c)`` too)."""
    rec = cond.producer
    negate = False
    while rec is not None and rec.base in ("logical_not", "bitwise_not") and isinstance(rec.args[0], Ref):
        negate = not negate
        rec = rec.args[0].node.producer
    if rec is None or rec.base not in CMP or len(rec.args) < 2:
        return None
    a, b = rec.args[0], rec.args[1]
    op = rec.base
    if isinstance(a, Ref) and not isinstance(b, Ref):
        subject, c = a.node, b
    elif isinstance(a, Ref) and isinstance(b, Ref) and b.node.kind == EXACT and b.node.value is not None \
            and b.node.value.numel() == 1:
        subject, c = a.node, float(b.node.value.reshape(-1)[0])
    elif isinstance(b, Ref) and isinstance(a, Ref) and a.node.kind == EXACT and a.node.value is not None \
            and a.node.value.numel() == 1:
        subject, c, op = b.node, float(a.node.value.reshape(-1)[0]), FLIP[op]
    else:
        return None
    if not isinstance(c, (int, float)):
        return None
    if negate:
        op = NEGATE[op]
    return canon(subject), op, float(c)


def narrow(box: Box, op: str, c: float) -> Box:
    """``box`` where ``x op c`` holds."""
    lo, hi, nonzero = box.lo, box.hi, box.nonzero
    ct = torch.tensor(c, dtype=F64)
    step = dtype_tiny(box.dtype) if c == 0 else abs(c) * float(torch.finfo(box.dtype).eps if box.dtype.is_floating_point
                                                                 else 1.0)
    if op == "gt":
        lo = torch.maximum(lo, ct + step)
    elif op == "ge":
        lo = torch.maximum(lo, ct)
    elif op == "lt":
        hi = torch.minimum(hi, ct - step)
    elif op == "le":
        hi = torch.minimum(hi, ct)
    elif op == "eq":
        lo, hi = ct.expand_as(lo) if lo.dim() else ct, ct.expand_as(hi) if hi.dim() else ct
    elif op == "ne" and c == 0:
        nonzero = True
    lo = torch.minimum(lo, hi)
    return Box(lo, hi, box.shape, box.dtype, nonzero=nonzero or (op in ("gt", "ge") and c > 0)
               or (op in ("lt", "le") and c < 0) or (op == "gt" and c == 0) or (op == "lt" and c == 0))


def excludes(op: str, c: float, condition: str) -> bool:
    """Whether ``x op c`` keeps ``x`` out of the singular set ``condition``."""
    if condition in ("nonpositive",):
        return (op == "gt" and c >= 0) or (op == "ge" and c > 0)
    if condition == "negative":
        return op in ("gt", "ge") and c >= 0
    if condition in ("zero", "zero_divisor"):
        return (op == "ne" and c == 0) or (op == "gt" and c >= 0) or (op == "ge" and c > 0) or \
            (op == "lt" and c <= 0) or (op == "le" and c < 0)
    if condition == "exp_overflow":
        return op in ("lt", "le") and c < 80
    if condition in ("outside_unit", "not_inside_unit", "unit"):
        return False
    if condition == "at_or_below_minus_one":
        return (op == "gt" and c >= -1) or (op == "ge" and c > -1)
    return False


def relu_zeros(node: Node) -> bool:
    rec = node.producer
    return rec is not None and rec.base in ("relu", "threshold") and (
        rec.base == "relu" or (len(rec.args) > 2 and rec.args[1] == 0 and rec.args[2] == 0))


__all__ = ["CMP", "IDENTITY", "NEGATE", "RESHAPE", "canon", "comparison", "excludes", "max_subtracted", "narrow",
           "refined", "relu_zeros", "same_value"]
