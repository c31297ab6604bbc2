"""The interval analysis over a trace: a box for every value, then the singular sets each op
can reach.

Sources get their boxes from the mode: in ``structural`` mode parameters and data are
unbounded (any finite value), random factories stay inside their support, exact values keep
their observed value; in ``bounded`` mode the ranges the user states replace the unbounded
boxes of the sources they name. Each op's rule (`nanguard.torch.auditor.rules`) gives its
output boxes, rounded to the output's dtype; `checks.hits` says which singular sets its
arguments can reach. Gradient-only singularities (``sqrt``'s gradient at 0) count only on
the gradient path: ops that depend on a parameter and reach what the first ``backward()``
differentiated.

Precision rules that real programs need, each removing a measured false finding:
``x - max(x) ≤ 0`` and ``x - logsumexp(x) ≤ 0`` (also through ``detach``/``keepdim``);
``x * x ≥ 0``; ``where(x > 0, x, 1)`` refines ``x`` inside its branch (the double where);
a value an op makes non-finite and a ``where`` then discards is a finding only on the
gradient path (where it becomes the NaN gradient of the double-where story); a non-finite
value made from exact values only (T5's ``log`` of relative positions, cast to integers and
discarded) is a finding only if it reaches data-dependent code.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple


from nanguard.torch.auditor import checks, facts
from nanguard.torch.auditor.interval import Box
from nanguard.torch.auditor.replay import apply_chain, functional, view_scatter
from nanguard.torch.auditor.rules import RULES, Ctx
from nanguard.torch.auditor.safe_ops import safe_op_rule
from nanguard.torch.auditor.graph import DATA, EXACT, PARAM, RANDOM, Node, OpRecord, Ref, Trace

Ranges = Dict[str, Tuple[float, float]]
# no gradient flows through these (integer or boolean results, comparisons, detach)
_NO_GRAD_OPS = frozenset({"detach", "gt", "ge", "lt", "le", "eq", "ne", "argmax", "argmin", "isnan", "isinf",
                          "isfinite", "sign", "floor", "ceil", "round", "trunc", "logical_not", "logical_and",
                          "logical_or", "bitwise_and", "bitwise_or", "bitwise_not"})
# ops that look at non-finite values without computing with them, and ops that pass them on
_CHECKERS = frozenset({"isnan", "isinf", "isfinite", "nan_to_num", "isposinf", "isneginf", "eq", "ne"})
_PASSING = frozenset({"lift_fresh", "lift_fresh_copy", "clone", "contiguous", "detach", "alias", "view",
                      "_unsafe_view", "reshape", "_to_copy", "index", "index_select", "select", "slice", "cat",
                      "stack", "unsqueeze", "squeeze", "permute", "transpose", "t", "expand", "copy",
                      "view_replay", "view_scatter", "split", "unbind", "narrow", "flatten", "gather"})


@dataclass
class AnalysisResult:
    hits: List[checks.Hit]
    observed: List[OpRecord]            # ops that made a NaN/Inf in the traced run and no hit explains
    unsupported: Counter = field(default_factory=Counter)
    discarded: Set[int] = field(default_factory=set)     # hit ids whose value a where discards
    inputs: List[Tuple[Node, OpRecord]] = field(default_factory=list)   # data that arrived non-finite


class Analysis:
    """Boxes for every node of ``trace`` (see the module docstring)."""

    def __init__(self, trace: Trace, mode: str = "structural", ranges: Optional[Ranges] = None) -> None:
        if mode not in ("structural", "bounded"):
            raise ValueError(f"mode must be 'structural' or 'bounded', got {mode!r}")
        self.trace = trace
        self.mode = mode
        self.ranges = dict(ranges or {})
        self.boxes: Dict[int, Box] = {}
        self._requires: Dict[int, bool] = {}
        self.unsupported: Counter = Counter()
        self.reaches_root: Set[int] = set()
        self.consumers: Dict[int, List[OpRecord]] = {}
        self._ctx_cache: Dict[int, Ctx] = {}
        self._below: Set[int] = set()     # nodes computed from a finding's output

    # ------------------------------------------------------------------ sources
    def _range_for(self, node: Node) -> Optional[Tuple[float, float]]:
        if not self.ranges:
            return None
        names = [node.name or ""]
        if node.kind == PARAM:
            names += ["params", "parameters"]
        elif node.kind == DATA:
            names += ["data", "inputs"]
        elif node.kind == RANDOM:
            names += ["random"]
        for pattern, rng in self.ranges.items():
            for name in names:
                if not name:
                    continue
                if name == pattern or fnmatch.fnmatchcase(name, pattern) or name.startswith(pattern + "."):
                    return rng
        return None

    def box_of(self, node: Node) -> Box:
        b = self.boxes.get(node.id)
        if b is not None:
            return b
        if node.kind == EXACT and node.value is not None:
            b = Box.of_value(node.value)
        elif node.kind in (PARAM, DATA, RANDOM):
            rng = self._range_for(node)
            if rng is not None and node.is_float:
                b = Box.of(rng[0], rng[1], node.shape, node.dtype)
            elif node.kind == RANDOM and node.support is not None:
                b = Box.of(node.support[0], node.support[1], node.shape, node.dtype)
            elif node.value is not None and not node.is_float:
                b = Box.of_value(node.value)
            else:
                b = Box.top(node.shape, node.dtype)
        else:
            b = Box.top(node.shape, node.dtype)
        self.boxes[node.id] = b
        return b

    def ctx(self, rec: OpRecord) -> Ctx:
        return Ctx(rec, self.box_of, self)

    functional = staticmethod(functional)

    # ------------------------------------------------------------------ gradient path
    def requires(self, node: Node) -> bool:
        """Whether a gradient can flow from a parameter into ``node``."""
        hit = self._requires.get(node.id)
        if hit is not None:
            return hit
        if node.kind == PARAM:
            hit = True
        elif node.producer is None or node.kind == EXACT or not node.is_float or not node.grad_enabled:
            hit = False
        else:
            rec = node.producer
            hit = rec.grad_enabled and rec.base not in _NO_GRAD_OPS and any(
                self.requires(n) for n in rec.input_nodes())
        self._requires[node.id] = hit
        return hit

    def on_gradient_path(self, rec: OpRecord) -> bool:
        return rec.index in self.reaches_root and any(self.requires(n) for n in rec.outputs if n is not None)

    def _mark_reaching(self, roots: Sequence[Node]) -> None:
        stack = [r for r in roots]
        seen: Set[int] = set()
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            rec = node.producer
            if rec is None or rec.index in self.reaches_root:
                continue
            self.reaches_root.add(rec.index)
            stack.extend(rec.input_nodes())

    # ------------------------------------------------------------------ identities (facts.py)
    def canon(self, node: Node, through: frozenset = facts.IDENTITY) -> Node:
        return facts.canon(node, through)

    def same_value(self, a: Any, b: Any) -> bool:
        return facts.same_value(a, b)

    def max_subtracted(self, rec: OpRecord) -> bool:
        return facts.max_subtracted(rec)

    def refined(self, rec: OpRecord, arg_index: int, box: Box, cond_index: int, branch: bool) -> Box:
        return facts.refined(rec, arg_index, box, cond_index, branch)

    def comparison(self, cond: Node) -> Optional[Tuple[Node, str, float]]:
        return facts.comparison(cond)

    # ------------------------------------------------------------------ the analysis
    def run(self) -> AnalysisResult:
        ops = self.trace.ops
        self._mark_reaching(self.trace.roots)
        for rec in ops:
            for n in rec.input_nodes():
                self.consumers.setdefault(n.id, []).append(rec)
        last_use: Dict[int, int] = {}
        for rec in ops:
            for n in rec.input_nodes():
                last_use[n.id] = rec.index
        keep = {n.id for n in self.trace.roots}
        hits: List[checks.Hit] = []
        observed: List[OpRecord] = []
        for rec in ops:
            outs = [n for n in rec.outputs if n is not None]
            if outs and all(n.kind == EXACT for n in outs) and all(n.kind == EXACT for n in rec.input_nodes()):
                if rec.made_nonfinite and self._escapes(rec):
                    exact_hits = [h for h in checks.hits(rec, self) if h.phase == "value"]
                    if exact_hits:
                        hits.extend(exact_hits)
                    else:
                        observed.append(rec)
                continue
            self._transfer(rec)
            found = checks.hits(rec, self)
            found = [h for h in found if h.phase == "value" or self._gradient_counts(h)]
            below_a_finding = any(n.id in self._below for n in rec.input_nodes())
            if not found and not below_a_finding:
                h = checks.overflow_hit(rec, self)
                if h is not None:
                    found = [h]
            if found:
                hits.extend(found)
            elif rec.made_nonfinite and not below_a_finding:
                observed.append(rec)
            if found or below_a_finding:
                # what a finding's op computes was bounded as if its input had been clipped to
                # the op's domain: the overflow that follows below it is the same story
                self._below.update(n.id for n in rec.outputs if n is not None)
            # free what no later op reads
            for n in rec.input_nodes():
                if last_use.get(n.id) == rec.index and n.id not in keep and n.kind != PARAM:
                    self.boxes.pop(n.id, None)
        result = AnalysisResult(hits=hits, observed=observed, unsupported=self.unsupported,
                                inputs=self._non_finite_inputs())
        result.discarded = {id(h) for h in hits if h.phase == "value" and self.discarded_by_where(h)}
        return result

    def _gradient_counts(self, h: checks.Hit) -> bool:
        if not self.on_gradient_path(h.rec):
            return False
        if h.node is not None and not self.requires(h.node):
            return False
        if h.condition == "zero" and h.node is not None and facts.relu_zeros(h.node):
            return False   # relu's zeros come with a zero gradient (selected, not multiplied)
        return True

    def _transfer(self, rec: OpRecord) -> None:
        outs: Sequence[Optional[Box]]
        try:
            if rec.func in ("view_scatter", "view_replay"):
                outs = [self._view_op(rec)]
            elif all(n is None or n.kind == RANDOM for n in rec.outputs):
                outs = []   # random samples: their support (box_of)
            elif rec.base.startswith("nanguard."):
                outs = _as_list(safe_op_rule(self.ctx(rec)))
            else:
                rule = RULES.get(rec.base)
                if rule is None:
                    if any(n is not None and n.is_float for n in rec.outputs):
                        self.unsupported[rec.name] += 1
                    outs = []
                else:
                    outs = _as_list(rule(self.ctx(rec)))
        except Exception:   # a rule that cannot handle this call: sound fallback, and say so
            self.unsupported[rec.name] += 1
            outs = []
        for k, node in enumerate(rec.outputs):
            if node is None:
                continue
            box = outs[k] if k < len(outs) else None
            if node.kind == EXACT and node.value is not None:
                box = Box.of_value(node.value)
            elif node.kind == RANDOM:
                box = None   # its support (box_of)
            elif box is None:
                box = Box.top(node.shape, node.dtype)
            if box is not None:
                if tuple(box.shape) != tuple(node.shape):
                    box = Box(box.lo, box.hi, node.shape, node.dtype, nonzero=box.nonzero)
                self.boxes[node.id] = box.collapsed()
            else:
                self.boxes.pop(node.id, None)
                self.box_of(node)

    def _view_op(self, rec: OpRecord) -> Box:
        node = rec.outputs[0]
        assert node is not None
        if rec.func == "view_replay":
            src = self.box_of(rec.args[0].node)
            if src.uniform:
                return Box(src.lo, src.hi, node.shape, node.dtype)
            lo, hi = src.full()
            return Box.of(apply_chain(lo.contiguous(), rec.chain), apply_chain(hi.contiguous(), rec.chain),
                          node.shape, node.dtype)
        base, value = self.box_of(rec.args[0].node), self.box_of(rec.args[1].node)
        blo, bhi = base.full()
        vlo, vhi = value.full()
        return Box.of(view_scatter(blo.contiguous(), vlo, rec.chain), view_scatter(bhi.contiguous(), vhi, rec.chain),
                      node.shape, node.dtype)

    def _non_finite_inputs(self) -> List[Tuple[Node, OpRecord]]:
        """Data that arrived holding NaN/Inf (and constants holding NaN), with the first op that
        computes with those values (views, copies and selections pass them on; ``isnan``,
        ``nan_to_num`` and a selection that drops them end the story)."""
        out: List[Tuple[Node, OpRecord]] = []
        seen: Set[int] = set()
        for rec in self.trace.ops:
            for n in rec.input_nodes():
                if n.id in seen or n.producer is not None or not n.is_float or n.finite:
                    continue
                seen.add(n.id)
                if n.kind == DATA or (n.kind == EXACT and n.has_nan):
                    use = self._first_computing_use(n)
                    if use is not None:
                        out.append((n, use))
        return out

    def _first_computing_use(self, node: Node) -> Optional[OpRecord]:
        frontier = [node]
        seen: Set[int] = set()
        while frontier:
            n = frontier.pop(0)
            if n.id in seen:
                continue
            seen.add(n.id)
            for use in self._consumers_of(n):
                if use.base in _CHECKERS:
                    continue
                if use.base in _PASSING:
                    frontier.extend(o for o in use.outputs if o is not None and o.is_float and not o.finite)
                    continue
                return use
        return None

    def _escapes(self, rec: OpRecord) -> bool:
        """A NaN/Inf made from exact values matters only if it reaches data-dependent code
        (or what backward differentiates): follow non-finite exact values forward."""
        frontier = [n for n in rec.outputs if n is not None and n.is_float and not n.finite]
        roots = {n.id for n in self.trace.roots}
        seen: Set[int] = set()
        while frontier:
            node = frontier.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            if node.id in roots:
                return True
            for consumer in self._consumers_of(node):
                for out in consumer.outputs:
                    if out is None:
                        continue
                    if out.kind != EXACT:
                        return True
                    if out.is_float and not out.finite:
                        frontier.append(out)
        return False

    def _consumers_of(self, node: Node) -> List[OpRecord]:
        if not self.consumers:
            for rec in self.trace.ops:
                for n in rec.input_nodes():
                    self.consumers.setdefault(n.id, []).append(rec)
        return self.consumers.get(node.id, [])

    def discarded_by_where(self, h: checks.Hit) -> bool:
        """Every use of the op's output is a where/masked_fill that keeps it only where its
        singular argument is out of the singular set (``where(x > 0, log(x), 0)``)."""
        if h.node is None:
            return False
        subject = self.canon(h.node)
        outs = [n for n in h.rec.outputs if n is not None]
        if not outs:
            return False
        uses = [c for n in outs for c in self._consumers_of(n)]
        if not uses:
            return False
        for use in uses:
            if use.base == "where" and len(use.args) >= 3 and isinstance(use.args[0], Ref):
                cond = use.args[0].node
                kept_true = isinstance(use.args[1], Ref) and use.args[1].node in outs
                kept_false = isinstance(use.args[2], Ref) and use.args[2].node in outs
                if kept_true and kept_false:
                    return False
                branch = kept_true
            elif use.base == "masked_fill" and len(use.args) >= 2 and isinstance(use.args[1], Ref):
                cond = use.args[1].node
                branch = False
            else:
                return False
            fact = self.comparison(cond)
            if fact is None or fact[0] is not subject:
                return False
            op, c = fact[1], fact[2]
            if not branch:
                op = facts.NEGATE[op]
            if not facts.excludes(op, c, h.condition):
                return False
        return True


def _as_list(out: Any) -> List[Optional[Box]]:
    if out is None:
        return []
    if isinstance(out, Box):
        return [out]
    return list(out)


__all__ = ["Analysis", "AnalysisResult", "Ranges"]
