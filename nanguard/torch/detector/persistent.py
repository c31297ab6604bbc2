"""The default mode's checks of what outlives a step: parameters and buffers.

Parameters and buffers are written outside the values the boundaries check: the optimizer
step writes the parameters, a module's forward writes its buffers in place (batch norm's
running statistics). A NaN written there surfaces steps later, somewhere else: an embedding
row is looked up without any check and its NaN looks like bad data at the next norm; a
running variance gone to Inf breaks the output only once the model is evaluated. So:

* after each optimizer step, the step's parameters are checked (one reduction each, about
  a pass over the weights, small next to the step's own passes over weights, gradients and
  optimizer state) and a non-finite one is blamed on the step, at the user's ``step()`` line;
* after each outermost module call in training mode, the floating buffers are checked (one
  reduction each; they are small: running means and variances). One that was finite before
  and is not now was made non-finite by the call (batch norm writes its statistics inside
  the kernel, without a version bump, so every buffer is looked at), which is replayed
  under the op-level check to name the op. In evaluation mode buffers are not written and
  not checked.

A buffer seen non-finite before its first call (a ``-inf`` mask registered as a buffer) is
left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List

import torch

from nanguard.torch.detector.build import optimizer_step_report
from nanguard.torch.detector.frames import user_frame
from nanguard.torch.detector.outcome import Reproduced, replay_notes
from nanguard.torch.detector.replay import replay_module_forward
from nanguard.torch.detector.sharded import local
from nanguard.torch.detector.values import all_finite, checkable, has_nan, is_finite

if TYPE_CHECKING:
    from nanguard.torch.detector.activation import Activation


class PersistentChecks:
    """Parameters after optimizer steps, buffers after outermost module calls (default mode)."""

    def __init__(self, act: "Activation") -> None:
        self.act = act
        # id(buffer) -> whether it was finite when last looked at
        self._seen: Dict[int, bool] = {}

    # ------------------------------------------------------------------ parameters
    def after_step(self, optimizer: torch.optim.Optimizer) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if all_finite(params):
            return
        bad = [(self._parameter_name(optimizer, p), p) for p in params
               if checkable(local(p)) and not is_finite(p)]   # a DTensor parameter: this rank's shard
        kind = "nan" if any(has_nan(p) for _, p in bad) else "inf"
        if kind not in self.act.check:
            return
        act = self.act
        act.finish(optimizer_step_report(optimizer, act.optimizer_context(), kind, bad))

    def _parameter_name(self, optimizer: torch.optim.Optimizer, param: torch.Tensor) -> str:
        naming = self.act.naming
        for root in self.act.session.parameter_owners():
            for name, p in root.named_parameters():
                if p is param:
                    return naming.parameter_name(root, name)
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                if p is param:
                    return f"param_groups[{g}]['params'][{i}]"
        return "parameter"

    # ------------------------------------------------------------------ buffers
    def before_module(self, module: torch.nn.Module) -> None:
        """Note the buffers seen for the first time, and whether they are finite."""
        seen = self._seen
        for b in self.act.session.buffers_of(module):
            if id(b) not in seen:
                seen[id(b)] = is_finite(b)

    def after_module(self, module: torch.nn.Module, args: tuple, kwargs: dict, rng: tuple) -> None:
        if not module.training:
            return   # evaluation leaves the running statistics alone
        seen = self._seen
        tracked = [b for b in self.act.session.buffers_of(module) if seen.get(id(b), False)]
        if not tracked or all_finite(tracked):
            return
        broken = [b for b in tracked if not is_finite(b)]
        for b in broken:
            seen[id(b)] = False
        self._localise(module, args, kwargs, rng, user_frame(), broken)

    def _localise(self, module, args, kwargs, rng, frame, broken: List[torch.Tensor]) -> None:
        act = self.act
        kind = "nan" if any(has_nan(b) for b in broken) else "inf"
        if kind not in act.check:
            return
        result = replay_module_forward(act, module, args, kwargs, rng, frame)
        if isinstance(result, Reproduced):
            act.finish(result.report)
            return
        from nanguard.torch.detector.build import make_report
        names = {id(b): name for name, b in module.named_buffers()}
        outputs = [(act.naming.parameter_name(module, names.get(id(b), "buffer")), b) for b in broken]
        act.finish(make_report(
            phase="forward", kind=kind, op=f"{type(module).__name__}.forward", inputs=[], outputs=outputs,
            frame=frame, module=act.naming.root_name(module), step=act.step(),
            how="checked the buffers the module call wrote (the replay could not localise it further)",
            notes=replay_notes(result) + ["a buffer written during this call became non-finite"]))
