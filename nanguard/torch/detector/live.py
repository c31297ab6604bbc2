"""The op-level check: a dispatch mode that judges every aten op's outputs as they run.

Default mode keeps it only in top-level code (it is taken off the stack inside outermost
module calls, backward passes and optimizer steps), where it also records the tape.
Exhaustive mode keeps it everywhere.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, Optional

import torch

from nanguard.errors import NonFiniteError
from nanguard.torch._compat import TorchDispatchMode, current_autograd_node, pytree
from nanguard.torch.detector import sharded
from nanguard.torch.detector._state import STATE, capture_rng
from nanguard.torch.detector.aten import (
    _CHECK, checks_values, mutated_args, mutated_ids, result_outputs, uses_rng, written_tensors,
)
from nanguard.torch.detector.build import make_report, named_args, output_pairs, split_args
from nanguard.torch.detector.frames import torch_api, user_frame, user_stack
from nanguard.torch.detector.safe_ops import WatchesSafeOps, judge_backward, judge_op
from nanguard.torch.detector.tape import Entry
from nanguard.torch.detector.values import CHECKED, PLAIN_TYPES, checkable, fast_finite, judge

if TYPE_CHECKING:
    from nanguard.torch.detector.activation import Activation

_Tensor = torch.Tensor
_strided = torch.strided
_current_node = current_autograd_node


class LiveMode(WatchesSafeOps, TorchDispatchMode):
    """The op-level check that runs as the program runs.

    Default mode: active only in top-level code (suspended inside module calls, backward
    passes and optimizer steps). Exhaustive mode: active everywhere. In top-level code it
    also records the tape entries a backward replay may need.
    """

    def __init__(self, act: "Activation") -> None:
        super().__init__()
        self.act = act
        # Set by the activation: True once it has tripped and while a replay runs.
        self.idle = False
        # > 0 while a safe op runs: it is judged as one op (safe_ops.py), not op by op.
        self.opaque = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if self.idle or self.opaque:
            return func(*args, **kwargs)
        special = _ROUTES.get(func)
        if special is None:
            special = sharded.route(func)
        if special:   # a collective, or FSDP's copies (sharded.py)
            if special == sharded.COLLECTIVE:
                return sharded.live_collective(self, func, args, kwargs)
            return func(*args, **kwargs)
        st = STATE
        if not st.depth and not st.in_backward and not st.in_optimizer and torch.is_grad_enabled():
            entry = self.begin_op(func, args, kwargs)
            out = func(*args, **kwargs)
            if entry is not None:
                self.finish_op(entry, out)
        else:
            out = func(*args, **kwargs)
        check = _CHECK.get(func)
        if check is None:
            check = checks_values(func)
        if not check:
            return out
        try:
            if type(out) in PLAIN_TYPES:   # in-place ops on a Parameter return the Parameter itself
                if out.dtype in CHECKED and out.layout is _strided and not fast_finite(out):
                    self.nonfinite(func, args, kwargs, out)
                    return out
            elif isinstance(out, (tuple, list)):
                for o in result_outputs(func, out):
                    if type(o) in PLAIN_TYPES:
                        if o.dtype in CHECKED and o.layout is _strided and not fast_finite(o):
                            self.nonfinite(func, args, kwargs, out)
                            return out
                    elif sharded.is_dtensor(o):
                        sharded.live_dtensor(self, func, args, kwargs, out)
                        return out
            elif sharded.is_dtensor(out):   # judged on this rank's shard
                sharded.live_dtensor(self, func, args, kwargs, out)
                return out
            written = _WRITES.get(func)
            if written is None:
                written = _writes(func)
            if written:
                # Written arguments that are not returned (batch norm's running statistics, the
                # tensors of a _foreach_*_ op) are outputs too.
                for t in written_tensors(func, args, kwargs):
                    if t is not out and type(t) in PLAIN_TYPES and t.dtype in CHECKED and t.layout is _strided \
                            and not fast_finite(t):
                        self.nonfinite(func, args, kwargs, out)
                        break
                    if t is not out and sharded.is_dtensor(t):
                        sharded.live_dtensor(self, func, args, kwargs, out)
                        break
        except NonFiniteError as exc:
            raise exc.with_traceback(None)   # the report says where; drop nanguard's own frames
        return out

    # ------------------------------------------------------------------ top-level ops (tape)
    def begin_op(self, func, args, kwargs) -> Optional[Entry]:
        if _current_node() is not None:
            return None  # an op run by a backward pass (e.g. in a hook)
        needs = False
        for a in args:
            if type(a) is _Tensor or isinstance(a, _Tensor):
                if a.requires_grad:
                    needs = True
                    break
            elif isinstance(a, (list, tuple)):
                if any(isinstance(t, _Tensor) and t.requires_grad for t in a):
                    needs = True
                    break
        if not needs:
            for v in kwargs.values():
                if isinstance(v, _Tensor) and v.requires_grad:
                    needs = True
                    break
        if not needs:
            return None
        e = Entry(self.act.tape, "op", func)
        e.set_args(args, kwargs, mutated_ids(func, args, kwargs))
        if uses_rng(func):
            e.rng = capture_rng()
        e.frame = user_frame(sys._getframe(2))
        return e

    def finish_op(self, e: Entry, out: Any) -> None:
        flat = [o for o in pytree.tree_leaves(out) if isinstance(o, _Tensor)]
        # An in-place op on a view returns that view: remember the base it changed.
        mutated_views = [(slot, o) for slot in e.views for o in flat if id(o) == e.in_keys[slot][0]]
        e.set_outputs(flat, mutated_views)
        self.act.tape.add(e)

    # ------------------------------------------------------------------ a finding
    def nonfinite(self, func, args, kwargs, out) -> None:
        """An output of ``func`` is not finite: judge it, and report what the op made."""
        act = self.act
        pairs = named_args(func, args, kwargs)
        tensors, scalars, dim = split_args(pairs)
        outs = output_pairs(out)
        # An in-place op's target already holds the result: its old value is unknown, so it is
        # not evidence that the NaN came in from outside.
        written_list = written_tensors(func, args, kwargs)
        written = {id(t) for t in written_list}
        outs = outs + [(f"{n} (written)", t) for n, t in tensors
                       if id(t) in written and all(t is not o for _, o in outs)]
        tensors = [(n, t) for n, t in tensors if id(t) not in written]   # their old values are gone
        verdict = judge([t for _, t in tensors], [s.value for s in scalars],
                        [o for _, o in outs if checkable(o)], act.check)
        if verdict is None:
            return
        frame_obj = sys._getframe(2)
        self.found(str(func), verdict, tensors, scalars, outs, dim, frame_obj,
                   torch_api(frame_obj) if _current_node() is None else None)

    def found(self, op: str, verdict, tensors, scalars, outs, dim, frame_obj, api) -> None:
        act = self.act
        node = _current_node()
        if verdict.origin == "input":
            phase = "input"
        elif node is not None:
            phase = "backward"
        else:
            phase = "optimizer" if STATE.in_optimizer else "forward"
        here = user_frame(frame_obj)
        if node is not None:
            location, call_frame, module = (here if phase == "input" else None), here, None
            notes = ["found by the live op-level check during backward()"]
        else:
            location, call_frame, module = here, None, act.naming.live_path()
            notes = []
        report = make_report(
            phase=phase, kind=verdict.kind, op=op, inputs=tensors, outputs=outs, scalars=scalars,
            frame=location, module=module, api=api,
            node=node.name() if node is not None else None, call_frame=call_frame,
            stack=user_stack(frame_obj) if node is None else [], step=act.step(),
            how="live op-level check" + (" (exhaustive)" if act.exhaustive else " of top-level code"),
            notes=notes, dim=dim, optimizer=act.optimizer_context())
        if phase == "backward":
            act.backward.found_live(report)
        else:
            act.finish(report)

    # ------------------------------------------------------------------ nanguard's safe ops
    def watch_safe_op(self, fn, args, kwargs, reports_inf: bool):
        """A safe op: its repaired intermediates are not findings, its result may be."""
        if self.idle or self.opaque:
            return fn(*args, **kwargs)
        out, finding = self.run_judged(lambda: fn(*args, **kwargs),
                                       lambda o: judge_op(fn, args, kwargs, o, self.act.check, reports_inf))
        if finding is not None:
            self._found_safe(finding, f"nanguard.{fn.__name__}")
        return out

    def watch_safe_backward(self, function, ctx, grads, backward):
        """One safe Function's backward, judged by what it was given and what it returns."""
        if self.idle or self.opaque:
            return backward(ctx, *grads)
        out, finding = self.run_judged(lambda: backward(ctx, *grads),
                                       lambda o: judge_backward(function, ctx, grads, o, self.act.check))
        if finding is not None:
            self._found_safe(finding, None)
        return out

    def _found_safe(self, f, api) -> None:
        try:
            self.found(f.op, f.verdict, f.inputs, f.scalars, f.outputs, f.dim, sys._getframe(2),
                       api if _current_node() is None else None)
        except NonFiniteError as exc:
            raise exc.with_traceback(None)


_WRITES: Dict[Any, bool] = {}
_ROUTES = sharded.ROUTES


def _writes(func: Any) -> bool:
    positions, names = mutated_args(func)
    _WRITES[func] = hit = bool(positions or names)
    return hit
