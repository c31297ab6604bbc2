"""The op-level check of a replay (`replay.Replay`): a dispatch mode that runs every aten op
of the replayed call, forward then backward, judges its outputs by the detector's rule
(`values.judge`) and stops the replay at the first op that creates a non-finite value by
raising `Found` with its report. Ops that check no values are kept pending, so that the
autograd node they create learns the forward line that made it (`Replay.flush`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import torch

from nanguard.core.report import Report
from nanguard.torch._compat import TorchDispatchMode, pytree
from nanguard.torch.detector import sharded
from nanguard.torch.detector.aten import checks_values, result_outputs, written_tensors
from nanguard.torch.detector.build import ForwardInfo, named_args, split_args
from nanguard.torch.detector.safe_ops import WatchesSafeOps, judge_backward, judge_op
from nanguard.torch.detector.values import checkable, fast_finite, judge

if TYPE_CHECKING:
    from nanguard.torch.detector.replay import Replay


class Found(BaseException):
    """Stops a replay at the first finding. A BaseException, so that ``except Exception`` in
    the replayed user code cannot swallow it."""

    def __init__(self, report: Report) -> None:
        super().__init__(report.message)
        self.report = report


class ReplayMode(WatchesSafeOps, TorchDispatchMode):
    """Checks every op of a replay; raises `Found` at the first that makes NaN/Inf."""

    def __init__(self, replay: "Replay") -> None:
        super().__init__()
        self.replay = replay
        self.opaque = 0   # > 0 while a safe op runs: judged as one op (safe_ops.py)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.opaque:
            return func(*args, **kwargs)
        r = self.replay
        r.flush()
        if sharded.route(func):   # a collective (refused: other ranks are not replaying) or FSDP's copies
            return sharded.replay_special(func, args, kwargs)
        out = func(*args, **kwargs)
        if not checks_values(func):
            if func.is_view or not torch.is_grad_enabled():
                return out
            r.pending = (out if isinstance(out, (tuple, list)) else (out,), func, args, kwargs, sys._getframe(1))
            return out
        results = result_outputs(func, out) if isinstance(out, (tuple, list)) else out
        outs = [o for o in pytree.tree_leaves(results) if isinstance(o, torch.Tensor)]
        written = written_tensors(func, args, kwargs)
        checked = [o for o in outs if checkable(o)]
        checked += [t for t in written if checkable(t) and all(t is not o for o in checked)]
        if len(checked) < len(outs) + len(written):
            sharded.replay_dtensor(r, func, args, kwargs, out)   # judged on this rank's shard
        if any(not fast_finite(o) for o in checked if o.numel()):
            pairs = named_args(func, args, kwargs)
            tensors, scalars, _ = split_args(pairs)
            ids = {id(t) for t in written}               # an in-place target's old value is gone
            verdict = judge([t for _, t in tensors if id(t) not in ids], [s.value for s in scalars],
                            checked, r.check)
            if verdict is not None:
                raise Found(r.capture(func, args, kwargs, out, verdict, sys._getframe(1)))
        if torch.is_grad_enabled() and outs:
            r.pending = (outs, func, args, kwargs, sys._getframe(1))
        return out

    def watch_safe_op(self, fn, args, kwargs, reports_inf: bool):
        if self.opaque:
            return fn(*args, **kwargs)
        r = self.replay
        r.flush()
        out, finding = self.run_judged(lambda: fn(*args, **kwargs),
                                       lambda o: judge_op(fn, args, kwargs, o, r.check, reports_inf))
        frame = sys._getframe(2)
        if finding is not None:
            raise Found(r.capture_values(finding.op, finding.verdict, finding.inputs, finding.scalars,
                                         finding.dim, finding.outputs, frame, f"nanguard.{fn.__name__}"))
        if torch.is_grad_enabled():
            outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
            info = ForwardInfo(op=f"nanguard.{fn.__name__}", frame=r.user_frame(frame), module=r.module_path(),
                               api=f"nanguard.{fn.__name__}")
            r.pending = (outs, info)
        return out

    def watch_safe_backward(self, function, ctx, grads, backward):
        if self.opaque:
            return backward(ctx, *grads)
        r = self.replay
        r.flush()
        out, finding = self.run_judged(lambda: backward(ctx, *grads),
                                       lambda o: judge_backward(function, ctx, grads, o, r.check))
        if finding is not None:
            raise Found(r.capture_values(finding.op, finding.verdict, finding.inputs, finding.scalars,
                                         finding.dim, finding.outputs, sys._getframe(2), None))
        return out


__all__ = ["Found", "ReplayMode"]
