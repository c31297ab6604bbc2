"""The op-level check: a dispatch mode that judges every aten op's outputs as they run.

Default mode keeps it only in top-level code (it is taken off the stack inside outermost
module calls, backward passes and optimizer steps), where it also records the tape.
Exhaustive mode keeps it everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from nanguard.errors import NonFiniteError
from nanguard.torch.detector._state import STATE
from nanguard.torch.detector.aten import _CHECK, checks_values, mutated_args, written_tensors
from nanguard.torch.detector.values import CHECKED, PLAIN_TYPES, fast_finite

if TYPE_CHECKING:
    from nanguard.torch.detector.activation import Activation

_strided = torch.strided


class LiveMode(TorchDispatchMode):
    """The op-level check that runs as the program runs.

    Default mode: active only in top-level code (suspended inside module calls, backward
    passes and optimizer steps). Exhaustive mode: active everywhere. In top-level code it
    also records the tape entries a backward replay may need.
    """

    def __init__(self, act: "Activation") -> None:
        super().__init__()
        self.act = act

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        act = self.act
        if act.tripped or act.replaying:
            return func(*args, **kwargs)
        st = STATE
        if not st.depth and not st.in_backward and not st.in_optimizer and torch.is_grad_enabled():
            entry = act.begin_op(func, args, kwargs)
            out = func(*args, **kwargs)
            if entry is not None:
                act.finish_op(entry, out)
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
                    act.live_nonfinite(func, args, kwargs, out)
                    return out
            elif isinstance(out, (tuple, list)):
                for o in out:
                    if type(o) in PLAIN_TYPES and o.dtype in CHECKED and o.layout is _strided and not fast_finite(o):
                        act.live_nonfinite(func, args, kwargs, out)
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
                        act.live_nonfinite(func, args, kwargs, out)
                        break
        except NonFiniteError as exc:
            raise exc.with_traceback(None)   # the report says where; drop nanguard's own frames
        return out


_WRITES: Dict[Any, bool] = {}


def _writes(func: Any) -> bool:
    positions, names = mutated_args(func)
    _WRITES[func] = hit = bool(positions or names)
    return hit
