"""Transfer rules: from the boxes of an op's inputs to the boxes of its outputs.

One rule per aten op family, registered by functional base name (``add`` covers ``add``
and ``add_``). A rule gets a `Ctx` (the op record, its input boxes, its output shapes and
dtypes) and returns one `Box` per output (None where it cannot say: the output is then
unbounded, which is sound). Rules for ops with a domain (``log``, ``sqrt``, ``acos``)
compute their output from the input *clipped to the domain*: a violation is the checks'
business (`nanguard.torch.auditor.checks`), and the ops below it must not be flagged again
for the same cause.

Each rule is sound: every value the op can produce from inputs inside their boxes lies in
the output box (tests sample points inside random boxes to check this, rule by rule).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from nanguard.torch.auditor.interval import Box
from nanguard.torch.auditor.graph import Node, OpRecord, Ref

Rule = Callable[["Ctx"], "Sequence[Optional[Box]] | Box | None"]
RULES: Dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return register


class Ctx:
    """What a rule sees of one op."""

    def __init__(self, rec: OpRecord, box_of: Callable[[Node], Box], analysis: Any) -> None:
        self.rec = rec
        self._box_of = box_of
        self.analysis = analysis

    # arguments -------------------------------------------------------------------
    def arg(self, i: int, default: Any = None, name: Optional[str] = None) -> Any:
        """The recorded positional argument ``i`` (or keyword ``name``): a `Ref`, a number, a list ..."""
        if i < len(self.rec.args):
            return self.rec.args[i]
        if name is not None and name in self.rec.kwargs:
            return self.rec.kwargs[name]
        return default

    def kw(self, name: str, default: Any = None) -> Any:
        return self.rec.kwargs.get(name, default)

    def box(self, x: Any) -> Optional[Box]:
        """The box of a `Ref`, a point box of a Python number, None otherwise."""
        if isinstance(x, Ref):
            return self._box_of(x.node)
        if isinstance(x, bool):
            return Box.of(float(x), float(x), (), torch.bool)
        if isinstance(x, (int, float)):
            return Box.of(float(x), float(x), (), torch.float64 if isinstance(x, float) else torch.int64)
        return None

    def in_box(self, i: int, name: Optional[str] = None) -> Box:
        b = self.box(self.arg(i, name=name))
        if b is None:
            raise TypeError(f"{self.rec.name}: argument {i} is not a tensor")
        return b

    def node(self, i: int) -> Optional[Node]:
        a = self.arg(i)
        return a.node if isinstance(a, Ref) else None

    # outputs ---------------------------------------------------------------------
    @property
    def outputs(self) -> List[Optional[Node]]:
        return self.rec.outputs

    def out(self, k: int = 0) -> Node:
        node = self.rec.outputs[k]
        assert node is not None
        return node

    def out_box(self, lo: Any, hi: Any, k: int = 0, nonzero: bool = False) -> Box:
        node = self.out(k)
        return Box.of(lo, hi, node.shape, node.dtype, nonzero=nonzero)

    def top(self, k: int = 0) -> Box:
        node = self.out(k)
        return Box.top(node.shape, node.dtype)


def exact_value(b: Optional[Box]) -> Optional[torch.Tensor]:
    return None if b is None else b.exact


# the rule modules register themselves on import
from nanguard.torch.auditor.rules import arithmetic, elementwise, linear, losses, nn, shape, stats  # noqa: E402,F401,I001

__all__ = ["Ctx", "RULES", "Rule", "exact_value", "rule"]
