"""nanguard's own safe ops, judged as one op each by the checking dispatch modes.

A safe op may make a non-finite intermediate and repair it (``nanguard.softmax`` turns the
NaN of a dead row into 0, ``nanguard.div`` fills the inf of ``a / 0``): judged op by op, the
fix a report recommends would itself be reported. So the live check and the replay run a
safe op (and each of its Functions' backward) with their op-level check switched off, then
judge the op as a whole by the rule of `values.judge`: a NaN out of NaN-free inputs is a
finding; an infinity out of finite inputs only for the ops whose infinities are real
singularities (``xlogy(1, 0)``), not conventions (``logsumexp`` of an empty slice is -inf).
See ``nanguard.torch.ops._core.public_op`` for the other side of this seam.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from nanguard.core.summary import ScalarArg
from nanguard.torch.detector.build import output_pairs, split_args
from nanguard.torch.detector.values import INF, Verdict, checkable, fast_finite, judge


@dataclass
class SafeOpFinding:
    """A safe op (or one of its backward passes) that made a non-finite value."""

    op: str                 # "nanguard.xlogy", or "_Xlogy.backward"
    verdict: Verdict
    inputs: List[Tuple[str, torch.Tensor]]
    scalars: List[ScalarArg]
    dim: Optional[int]
    outputs: List[Tuple[str, torch.Tensor]]


def _named(fn: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any]) -> List[Tuple[str, Any]]:
    try:
        return list(inspect.signature(fn).bind_partial(*args, **kwargs).arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def _judged(op: str, pairs: List[Tuple[str, Any]], outputs: List[Tuple[str, torch.Tensor]],
            check: frozenset, reports_inf: bool) -> Optional[SafeOpFinding]:
    with torch.no_grad():
        checked = [o for _, o in outputs if checkable(o) and o.numel()]
        if all(fast_finite(o) for o in checked):
            return None
        tensors, scalars, dim = split_args(pairs)
        verdict = judge([t for _, t in tensors], [s.value for s in scalars], checked, check)
    if verdict is None or (verdict.kind == INF and not reports_inf):
        return None
    return SafeOpFinding(op, verdict, tensors, scalars, dim, outputs)


class WatchesSafeOps:
    """For a dispatch mode: run a safe op (or a safe Function's backward) with the mode's
    op-level check off (``opaque``), then judge it as one op."""

    opaque = 0

    def run_judged(self, run: Callable[[], Any], judge_out: Callable[[Any], Optional[SafeOpFinding]]):
        """(what ``run`` returned, its finding or None)."""
        self.opaque += 1
        try:
            out = run()
            return out, judge_out(out)
        finally:
            self.opaque -= 1


def judge_op(fn: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any], out: Any,
             check: frozenset, reports_inf: bool) -> Optional[SafeOpFinding]:
    """The finding of one safe-op call, judged by its arguments and its result."""
    return _judged(f"nanguard.{fn.__name__}", _named(fn, args, kwargs), output_pairs(out), check, reports_inf)


def judge_backward(function: type, ctx: Any, grads: Sequence[Any], out: Any,
                   check: frozenset) -> Optional[SafeOpFinding]:
    """The finding of one safe Function's backward, judged by the upstream gradients and what
    the forward saved (a NaN there came from the data) against the gradients it returned.
    Every non-finite gradient from finite inputs counts: the ops' gradients are finite by
    contract, except at a real singularity (``xlogy``'s ∂y at y = 0 < |x|)."""
    pairs: List[Tuple[str, Any]] = [(f"grad_output[{i}]", g) for i, g in enumerate(grads)]
    saved = getattr(ctx, "saved_tensors", ()) or ()
    pairs += [(f"saved[{i}]", t) for i, t in enumerate(saved)]
    returned = out if isinstance(out, (tuple, list)) else (out,)
    outputs = [(f"grad_input[{i}]", g) for i, g in enumerate(returned) if isinstance(g, torch.Tensor)]
    return _judged(f"{function.__name__}.backward", pairs, outputs, check, True)
