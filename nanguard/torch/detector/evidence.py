"""What the runtime knows about a finding, and the facts the explanations read off it.

`Evidence` holds the op, its inputs' exact summaries (and the tensors while they are still at
hand), the autograd node and, for a backward finding, the forward op and its inputs. The
helpers below turn that into facts: which ops produced a tensor (its autograd history), where
its zeros lie (the diagonal of a square matrix), whether its rows are fully masked, whether a
denominator holds counts. They never read the user's source code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.torch.detector.frames import op_base
from nanguard.torch.detector._state import in_autocast

Arg = tuple[TensorSummary, torch.Tensor | None]


@dataclass
class Evidence:
    """Everything an explanation may look at. Tensors are None when only summaries survived.

    ``code`` (the user's line) is kept for the report; explanations do not read it.
    """

    phase: str
    kind: str
    op: str                                  # the aten op that produced the value
    forward_op: str | None                   # for backward: the forward op whose backward failed
    node: str | None
    code: str
    inputs: list[Arg] = field(default_factory=list)
    forward_inputs: list[Arg] = field(default_factory=list)
    scalars: list[ScalarArg] = field(default_factory=list)
    outputs: list[TensorSummary] = field(default_factory=list)
    dim: int | None = None
    autocast: bool = field(default_factory=in_autocast)  # made inside a torch.autocast region

    @property
    def base(self) -> str:
        return op_base(self.forward_op or self.op)


# ----------------------------------------------------------------------- autograd history
_SEE_THROUGH = frozenset({"View", "UnsafeView", "Reshape", "ReshapeAlias", "Unsqueeze", "Squeeze", "Expand",
                          "Transpose", "T", "Permute", "Clone", "ToCopy", "Alias", "Contiguous", "Select",
                          "Slice", "Index", "AsStrided"})
_CLAMPS = frozenset({"Clamp", "ClampMin", "Relu", "Maximum"})
_MATMULS = frozenset({"Mm", "Bmm", "Matmul", "Addmm", "Baddbmm", "Mv", "Dot"})
_NODE_NAME = re.compile(r"Backward\d*$")


def node_base(node: Any) -> str:
    """``SqrtBackward0`` -> ``Sqrt``; ``AccumulateGrad`` (a leaf) stays."""
    return _NODE_NAME.sub("", type(node).__name__)


def _children(node: Any) -> list[Any]:
    try:
        return [n for n, _ in node.next_functions if n is not None]
    except (AttributeError, RuntimeError):
        return []


def _skip(node: Any, names: frozenset) -> Any:
    """The first node below ``node`` whose op is not one of ``names`` (views, casts...)."""
    for _ in range(16):
        if node is None or node_base(node) not in names:
            return node
        kids = _children(node)
        node = kids[0] if len(kids) == 1 else None
    return node


def producer(t: torch.Tensor | None, through_clamps: bool = False) -> Any:
    """The autograd node that made ``t``, looking through views, casts (and clamps)."""
    if t is None or not isinstance(t, torch.Tensor):
        return None
    names = _SEE_THROUGH | _CLAMPS if through_clamps else _SEE_THROUGH
    return _skip(t.grad_fn, names)


def made_by(t: torch.Tensor | None, *names: str) -> bool:
    node = producer(t)
    return node is not None and node_base(node) in names


def _below(node: Any, depth: int) -> Iterator[Any]:
    """Nodes under ``node`` to ``depth`` levels (views do not count as a level)."""
    frontier, seen = [node], 0
    for _ in range(depth):
        nxt = []
        for n in frontier:
            for kid in _children(n):
                kid = _skip(kid, _SEE_THROUGH)
                if kid is not None and seen < 64:
                    seen += 1
                    nxt.append(kid)
                    yield kid
        frontier = nxt


def _is_square(node: Any) -> bool:
    """``x ** 2``, ``torch.square(x)`` or ``x * x`` (both operands the same autograd node)."""
    name = node_base(node)
    if name == "Pow":
        return getattr(node, "_saved_exponent", None) == 2
    if name == "Mul":
        kids = [n for n, _ in node.next_functions]
        return len(kids) == 2 and kids[0] is not None and kids[0] is kids[1]
    return False


def sum_of_squares(t: torch.Tensor | None) -> bool:
    """``t`` is ``(x ** 2).sum(dim)`` or ``dx ** 2 + dy ** 2`` by its autograd history."""
    node = producer(t, through_clamps=True)
    if node is None:
        return False
    name = node_base(node)
    kids = [_skip(k, _SEE_THROUGH) for k in _children(node)]
    if name in ("Sum", "Mean"):
        return len(kids) == 1 and kids[0] is not None and _is_square(kids[0])
    if name == "Add":
        return len(kids) == 2 and all(k is not None and _is_square(k) for k in kids)
    return False


def gram_expansion(t: torch.Tensor | None) -> bool:
    """``t`` is |a|² + |b|² − 2a·b by its autograd history: a sum or difference that takes in
    a matrix product within two steps (``addmm(..., alpha=-2)`` directly)."""
    node = producer(t, through_clamps=True)
    if node is None:
        return False
    name = node_base(node)
    if name in ("Addmm", "Baddbmm"):
        return True
    if name not in ("Sub", "Add", "Rsub"):
        return False
    return any(node_base(n) in _MATMULS for n in _below(node, 3))


# ----------------------------------------------------------------------- value facts
def diagonal_zeros(t: torch.Tensor | None) -> int | None:
    """How many entries ≤ 0 lie on the diagonal of a square matrix (or batch of them) whose
    diagonal is all ≈ 0 and whose off-diagonal holds positive values: a distance matrix.
    None when ``t`` is not shaped or valued like one."""
    if t is None or t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2 or not t.dtype.is_floating_point:
        return None
    with torch.no_grad():
        x = t.detach()
        finite = torch.isfinite(x)
        if not bool(finite.all()):
            return None
        scale = float(x.abs().max())
        diag = x.diagonal(dim1=-2, dim2=-1)
        if scale <= 0 or float(diag.abs().max()) > 1e-3 * scale:
            return None
        eye = torch.eye(x.shape[-1], dtype=torch.bool, device=x.device)
        if not bool((x[..., ~eye] > 0).any()):
            return None
        return int((diag <= 0).sum())


def rows_all_neginf(t: torch.Tensor | None, dim: int | None) -> tuple[int, int] | None:
    """(rows whose every entry is −inf, number of rows) along ``dim``."""
    if t is None or t.dim() == 0 or not t.dtype.is_floating_point:
        return None
    with torch.no_grad():
        full = (t == -math.inf).all(dim=dim if dim is not None else -1)
    return int(full.sum()), full.numel()


def zero_vectors(t: torch.Tensor | None, dim: int | None) -> tuple[int, int] | None:
    """(vectors along ``dim`` that are exactly 0, number of vectors)."""
    if t is None or t.dim() == 0:
        return None
    with torch.no_grad():
        zero = (t == 0).all(dim=dim) if dim is not None else (t == 0).all().reshape(1)
    return int(zero.sum()), zero.numel()


def counts_of_empty_groups(num: torch.Tensor | None, den: torch.Tensor | None) -> bool:
    """``num / den`` is a mean: ``den`` holds whole numbers ≥ 0 (counts), 0 where ``num`` is 0
    too (an empty group), and ``num`` is a sum: by its history, or by ``den`` being a count per
    row broadcast over ``num``'s features."""
    if num is None or den is None or not den.dtype.is_floating_point:
        return False
    with torch.no_grad():
        d = den.detach()
        if not bool(torch.isfinite(d).all()) or bool((d < 0).any()) or not bool((d == d.round()).all()):
            return False
        empty = d == 0
        if not bool(empty.any()) or not bool((d > 0).any()):
            return False
        try:
            both = empty & (num.detach() == 0)
        except RuntimeError:  # shapes that do not broadcast: not a mean
            return False
        if not bool(both.any()):
            return False
    return den.numel() < num.numel() or made_by(num, "Sum", "Mean")


__all__ = [
    "Arg",
    "Evidence",
    "counts_of_empty_groups",
    "diagonal_zeros",
    "gram_expansion",
    "made_by",
    "node_base",
    "producer",
    "rows_all_neginf",
    "sum_of_squares",
    "zero_vectors",
]
