"""A concrete input that makes a finding's op produce NaN/Inf: the *witness*.

The backward slice of the flagged op is rerun with its sources (parameters, data, random
samples) as free variables inside their boxes (an unbounded box becomes ±`UNBOUNDED_BOX`).
The search drives one element of the op's singular argument toward the singular set by
projected sign-gradient steps (the step keeps its last sign where the gradient is 0, as in a
saturated softmax; it grows while the objective improves and halves when it does not), with
restarts from random points (an all-zero start can cancel the gradient) and *snaps* for
targets that must be exactly 0 (every source 0; one Newton step on the source that moves
the element most). It succeeds when the op *creates* a non-finite value by the detector's
rule: a NaN/Inf out of finite inputs (value findings), or a non-finite local gradient at a
finite input (gradient findings).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from nanguard.core.nonfinite import Flags, created
from nanguard.torch.auditor.checks import Hit
from nanguard.torch.auditor.replay import Slice, run_op
from nanguard.torch.auditor.graph import DATA, PARAM, RANDOM, Node, Trace

UNBOUNDED_BOX = 1e4
# conditions met at exactly 0, where setting sources to 0 is the first thing to try
_ZERO_TARGETS = frozenset({"zero", "zero_divisor", "nonpositive", "negative", "both_zero", "degenerate_count",
                           "no_target", "empty_slice"})


@dataclass
class Witness:
    """Source values that trigger a finding, by node id, and a description of each source."""

    values: Dict[int, torch.Tensor]
    labels: Dict[int, str]
    how: str                # "observed", "zeros", "search", "snap"
    slice: Slice
    target: Any = None      # the flagged op's record


def _free(node: Node) -> bool:
    if node.kind in (PARAM, DATA):
        return node.is_float
    return node.kind == RANDOM and node.is_float and node.producer is not None and \
        node.producer.base not in ("bernoulli", "bernoulli_")


def _box_limits(analysis: Any, node: Node) -> Tuple[torch.Tensor, torch.Tensor]:
    b = analysis.box_of(node)
    lo, hi = b.full()
    big = min(UNBOUNDED_BOX, float(torch.finfo(node.dtype).max) / 4)
    return lo.clamp(-big, big).to(node.dtype), hi.clamp(-big, big).to(node.dtype)


def _sample(node: Node, lo: torch.Tensor, hi: torch.Tensor, gen: torch.Generator, scale: float) -> torch.Tensor:
    lo_s = torch.maximum(lo.double(), torch.full_like(lo.double(), -scale))
    hi_s = torch.minimum(hi.double(), torch.full_like(hi.double(), scale))
    lo_s = torch.minimum(lo_s, hi_s)
    u = torch.rand(lo.shape, generator=gen, dtype=torch.float64)
    return (lo_s + u * (hi_s - lo_s)).to(node.dtype)


def _initial(node: Node, gen: torch.Generator) -> torch.Tensor:
    if node.value is not None:
        return node.value.detach().clone()
    if node.kind == RANDOM and node.support is not None:
        lo, hi = node.support
        lo, hi = max(lo, -6.0), min(hi, 6.0)
        if node.producer is not None and node.producer.base in ("bernoulli", "bernoulli_"):
            return (torch.rand(node.shape, generator=gen) < 0.5).to(node.dtype)
        if node.producer is not None and node.producer.base in ("randn", "randn_like", "normal", "normal_"):
            return torch.randn(node.shape, generator=gen, dtype=torch.float64).clamp(lo, hi).to(node.dtype)
        return (lo + torch.rand(node.shape, generator=gen, dtype=torch.float64) * (hi - lo)).to(node.dtype)
    return torch.zeros(node.shape, dtype=node.dtype)


class Search:
    """The witness search for one `Hit`."""

    def __init__(self, trace: Trace, analysis: Any, hit: Hit, seed: int = 0) -> None:
        self.trace, self.analysis, self.hit = trace, analysis, hit
        rec = hit.rec
        # an overflow is about the op's own output: the slice then ends with the op
        targets = [hit.node] if hit.node is not None and hit.node.producer is rec else rec.input_nodes()
        self.slice = Slice(trace.ops[: rec.index + 1], targets)
        self.gen = torch.Generator().manual_seed(seed)
        self.free = [n for n in self.slice.sources + self.slice.random if _free(n)]
        self.fixed = [n for n in self.slice.sources + self.slice.random if not _free(n)]
        self.limits = {n.id: _box_limits(analysis, n) for n in self.free}
        # while only the parameters move, the data pipeline's values are read from a cache
        self._cache: Optional[Dict[int, Any]] = None
        self._moving: Optional[set] = None

    # --------------------------------------------------------------------- evaluation
    def _env(self, values: Dict[int, torch.Tensor]) -> Dict[int, torch.Tensor]:
        if self._cache is not None and self._moving is not None:
            return self.slice.run(values, self._cache, self._moving)
        return self.slice.run(values)

    def _op_inputs(self, env: Dict[int, torch.Tensor]) -> Callable[[Node], Any]:
        def value_of(node: Node) -> Any:
            v = env.get(node.id)
            return v if v is not None else node.value
        return value_of

    def triggers(self, values: Dict[int, torch.Tensor]) -> bool:
        """Whether the op creates a non-finite value (or local gradient) at these sources."""
        with torch.no_grad():
            try:
                env = self._env(values)
            except Exception:
                return False
        return self.triggers_in(env)

    def triggers_in(self, env: Dict[int, Any]) -> bool:
        """`triggers` on an already computed slice (its values are read detached)."""
        env = {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in env.items()}
        rec = self.hit.rec
        value_of = self._op_inputs(env)
        ins = [value_of(n) for n in rec.input_nodes()]
        if any(v is None for v in ins):
            return False
        floats = [v for v in ins if isinstance(v, torch.Tensor) and v.is_floating_point()]
        in_nan = any(bool(torch.isnan(v).any()) for v in floats)
        in_finite = all(bool(torch.isfinite(v).all()) for v in floats)
        if in_nan or (not in_finite and self.hit.phase != "value"):
            return False
        if self.hit.phase == "value":
            with torch.no_grad():
                try:
                    outs = [o for o in run_op(rec, value_of) if isinstance(o, torch.Tensor) and o.is_floating_point()]
                except Exception:
                    return False
            out_nan = any(bool(torch.isnan(o).any()) for o in outs)
            out_inf = any(bool(torch.isinf(o).any()) for o in outs)
            return created(Flags(out_nan=out_nan, out_inf=out_inf, in_nan=in_nan, in_finite=in_finite))
        return self._gradient_triggers(env)

    def _gradient_triggers(self, env: Dict[int, torch.Tensor]) -> bool:
        rec, arg = self.hit.rec, self.hit.node
        if arg is None:
            return False
        x = env.get(arg.id, arg.value)
        if x is None:
            return False
        leaf = x.detach().clone().requires_grad_(True)

        def value_of(node: Node) -> Any:
            if node is arg:
                return leaf
            v = env.get(node.id)
            return (v.detach() if isinstance(v, torch.Tensor) else v) if v is not None else node.value

        try:
            with torch.enable_grad():
                outs = [o for o in run_op(rec, value_of) if isinstance(o, torch.Tensor) and o.is_floating_point()
                        and o.requires_grad]
                if not outs:
                    return False
                total = sum(o.sum() for o in outs)
                (g,) = torch.autograd.grad(total, leaf, allow_unused=True)
        except Exception:
            return False
        return g is not None and not bool(torch.isfinite(g).all())

    # --------------------------------------------------------------------- objective
    def _objective(self, x: torch.Tensor) -> Tuple[torch.Tensor, int]:
        """(a value to minimise per element, the chosen element) for the hit's condition."""
        cond = self.hit.condition
        flat = x.reshape(-1).double()
        limit = self.hit.limit if self.hit.limit is not None else 88.0
        if cond in ("nonpositive", "negative", "below_one", "at_or_below_minus_one"):
            per = flat
        elif cond in ("zero", "zero_divisor"):
            per = flat.abs()
        elif cond == "exp_overflow":
            per = -(flat - limit)
        elif cond in ("outside_unit", "not_inside_unit", "overflow"):
            per = -flat.abs()
        elif cond == "unit":
            per = (flat.abs() - 1).abs()
        elif cond == "one":
            per = (flat - 1).abs()
        elif cond == "outside_open_unit_interval":
            per = torch.minimum(flat, 1 - flat)
        else:
            per = flat.abs()
        if self.hit.mask is not None:
            try:
                m = self.hit.mask.expand(x.shape).reshape(-1)
                per = torch.where(m, per, torch.full_like(per, math.inf))
            except RuntimeError:
                pass
        k = int(torch.argmin(per.detach()))
        return per, k

    # --------------------------------------------------------------------- search
    def run(self, budget_s: float = 2.0, max_steps: int = 300) -> Optional[Witness]:
        start = time.perf_counter()
        if self.hit.node is None and self.hit.condition not in ("empty_slice", "inf_minus_inf", "zero_times_inf",
                                                                 "degenerate_count", "overflow", "no_target",
                                                                 "zero_divisor"):
            return None
        base = {n.id: _initial(n, self.gen) for n in self.free + self.fixed}
        if self.triggers(base):
            return self._witness(base, "observed")
        if self.hit.condition in _ZERO_TARGETS:   # exactly 0 is where these conditions live
            zeros = dict(base)
            for n in self.free:
                zeros[n.id] = torch.zeros_like(base[n.id])
            if self.free and self.triggers(zeros):
                return self._witness(zeros, "zeros")
            for n in self.free[:8]:   # one source at 0, the others as observed
                one = dict(base)
                one[n.id] = torch.zeros_like(base[n.id])
                if self.triggers(one):
                    return self._witness(one, "zeros")
        if self.hit.node is None or not self.free:
            return None
        params = [n for n in self.free if n.kind == PARAM]
        if params and len(params) < len(self.free):
            # first the weights alone, the data as observed (most NaNs are reached by training)
            with torch.no_grad():
                try:
                    self._cache = {k: (v.detach() if isinstance(v, torch.Tensor) else v)
                                   for k, v in self.slice.run(base).items()}
                except Exception:
                    self._cache = None
            if self._cache is not None:
                self._moving = {n.id for n in params}
                everything = self.free
                self.free = params
                try:
                    remaining = budget_s - (time.perf_counter() - start)
                    found = self._descend(base, time.perf_counter(), remaining * 0.6, max_steps)
                finally:
                    self.free = everything
                    self._cache, self._moving = None, None
                if found is not None:
                    return found
        starts = [base]
        restarts = 0
        while time.perf_counter() - start < budget_s:
            init = starts.pop() if starts else self._random_start(restarts)
            restarts += 1
            found = self._descend(init, start, budget_s, max_steps)
            if found is not None:
                return found
            if restarts > 6:
                break
        return None

    def _random_start(self, i: int) -> Dict[int, torch.Tensor]:
        scale = [1.0, 3.0, 10.0, 0.1, 30.0, 100.0, 1.0][i % 7]
        out: Dict[int, torch.Tensor] = {}
        for n in self.fixed:
            out[n.id] = _initial(n, self.gen)
        for n in self.free:
            lo, hi = self.limits[n.id]
            out[n.id] = _sample(n, lo, hi, self.gen, scale)
        return out

    def _descend(self, init: Dict[int, torch.Tensor], t0: float, budget_s: float,
                 max_steps: int) -> Optional[Witness]:
        arg = self.hit.node
        assert arg is not None
        values = {k: v.detach().clone() for k, v in init.items()}
        steps = {n.id: 0.05 * max(1.0, float(values[n.id].abs().max()) if values[n.id].numel() else 1.0)
                 for n in self.free}
        signs: Dict[int, torch.Tensor] = {}
        best = math.inf
        k: Optional[int] = None
        for step in range(max_steps):
            if time.perf_counter() - t0 > budget_s:
                return None
            leaves = {n.id: values[n.id].detach().clone().requires_grad_(True) for n in self.free}
            env_in = dict(values)
            env_in.update(leaves)
            try:
                with torch.enable_grad():
                    env = self._env(env_in)
                    x = env.get(arg.id)
                    if x is None or not isinstance(x, torch.Tensor):
                        return None
                    per, k_now = self._objective(x)
                    if k is None:
                        k = k_now
                    obj = per[k]
                    grads = torch.autograd.grad(obj, list(leaves.values()), allow_unused=True)
            except Exception:
                return None
            value = float(obj.detach())
            if not math.isfinite(value):
                value = math.inf
            if self.triggers_in(env):
                return self._witness(values, "search")
            if step % 4 == 0:
                snapped = self._snap(values, leaves, grads, x.detach(), k)
                if snapped is not None:
                    return snapped
            improved = value < best
            best = min(best, value)
            for (node_id, leaf), g in zip(leaves.items(), grads):
                s = torch.zeros_like(leaf) if g is None else torch.sign(torch.nan_to_num(g))
                prev = signs.get(node_id)
                if prev is not None:
                    s = torch.where(s == 0, prev, s)
                signs[node_id] = s
                steps[node_id] *= 1.5 if improved else 0.7
                lo, hi = self.limits[node_id]
                new = (leaf.detach() - steps[node_id] * s).clamp(lo.to(leaf.dtype), hi.to(leaf.dtype))
                values[node_id] = new
        return None

    def _snap(self, values: Dict[int, torch.Tensor], leaves: Dict[int, torch.Tensor], grads: Tuple[Any, ...],
              x: torch.Tensor, k: int) -> Optional[Witness]:
        """For an exactly-0 (or exactly-1) target: move the source element with the largest
        derivative by the Newton step that lands the target element on it."""
        cond = self.hit.condition
        target = {"zero": 0.0, "zero_divisor": 0.0, "nonpositive": 0.0, "one": 1.0}.get(cond)
        if cond == "unit":
            target = 1.0 if float(x.reshape(-1)[k]) >= 0 else -1.0
        if target is None:
            return None
        xk = float(x.reshape(-1)[k])
        best: Optional[Tuple[float, int, int]] = None
        for (node_id, _), g in zip(leaves.items(), grads):
            if g is None:
                continue
            flat = g.reshape(-1)
            if not flat.numel():
                continue
            j = int(flat.abs().argmax())
            gj = float(flat[j])
            if gj != 0 and (best is None or abs(gj) > abs(best[0])):
                best = (gj, node_id, j)
        if best is None:
            return None
        gj, node_id, j = best
        trial = dict(values)
        v = values[node_id].detach().clone().reshape(-1)
        v64 = v.double()
        v64[j] = v64[j] - (xk - target) / gj
        trial[node_id] = v64.to(v.dtype).reshape(values[node_id].shape)
        if self.triggers(trial):
            return self._witness(trial, "snap")
        return None

    def _witness(self, values: Dict[int, torch.Tensor], how: str) -> Witness:
        labels = {}
        for n in self.slice.sources + self.slice.random:
            labels[n.id] = n.name or n.kind
        return Witness({k: v.detach() for k, v in values.items()}, labels, how, self.slice, self.hit.rec)


def find_witness(trace: Trace, analysis: Any, hit: Hit, budget_s: float = 2.0, seed: int = 0) -> Optional[Witness]:
    """A witness for ``hit`` within ``budget_s`` seconds, or None."""
    try:
        return Search(trace, analysis, hit, seed=seed).run(budget_s=budget_s)
    except Exception:   # the search is best effort: a finding without witness is still a finding
        return None


__all__ = ["UNBOUNDED_BOX", "Witness", "find_witness"]
