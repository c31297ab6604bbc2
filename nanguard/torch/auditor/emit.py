"""Replaying a saved witness: what the tests that ``nanguard audit --emit-tests`` writes call.

A witness file holds the finding, the source values that trigger it, and the slice of the
trace that computes the flagged op's inputs (ops by name, constants), so the replay needs
neither the program nor its data. A value finding fails while the op's output is
non-finite; a gradient finding while the op's local gradient at the witness is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

import torch

from nanguard.torch.auditor.replay import replay_spec


@dataclass
class Outcome:
    finite: bool
    message: str


def replay_witness(path: str) -> Outcome:
    payload: Dict[str, Any] = torch.load(path, weights_only=False)
    finding = payload["finding"]
    spec = payload["spec"]
    where = f"{finding['file']}:{finding['line']} {finding['op']}"
    if finding["phase"] == "gradient":
        return _gradient_outcome(spec, where, finding)
    _, outs = replay_spec(spec)
    bad = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point() and not bool(torch.isfinite(o).all())]
    if bad:
        t = bad[0]
        return Outcome(False, f"{where} made {int(torch.isnan(t).sum())} NaN and {int(torch.isinf(t).sum())} inf "
                              f"from the witness input; fix: {finding['fix']}")
    return Outcome(True, f"{where} is finite at the witness input")


def _gradient_outcome(spec: Dict[str, Any], where: str, finding: Dict[str, Any]) -> Outcome:
    from torch.utils import _pytree as pytree

    from nanguard.torch.auditor.replay import SavedNode, _resolve

    ins, _ = replay_spec(spec)
    last = spec["ops"][-1]
    func = _resolve(last["op"])
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) if isinstance(t, torch.Tensor) else t
              for t in ins]
    it = iter(leaves)

    def fill(x: Any) -> Any:
        return next(it) if isinstance(x, SavedNode) else x

    args = pytree.tree_map(fill, last["args"])
    kwargs = pytree.tree_map(fill, last["kwargs"])
    with torch.enable_grad():
        outs = [o for o in pytree.tree_leaves(func(*args, **kwargs)) if isinstance(o, torch.Tensor) and o.requires_grad]
        leaf_ts = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
        grads = torch.autograd.grad(sum(o.sum() for o in outs), leaf_ts, allow_unused=True)
    for g in grads:
        if g is not None and not bool(torch.isfinite(g).all()):
            return Outcome(False, f"{where}: its gradient is non-finite at the witness input "
                                  f"({int(torch.isnan(g).sum())} NaN, {int(torch.isinf(g).sum())} inf); "
                                  f"fix: {finding['fix']}")
    return Outcome(True, f"{where}: the gradient is finite at the witness input")


__all__ = ["Outcome", "replay_witness"]
