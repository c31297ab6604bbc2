"""The hooks around a `Tracer` while ``audit`` traces a program: module paths and parameter
names (global module hooks) and the stop at the first backward, whose roots become
``trace.roots`` (the gradient path)."""

from __future__ import annotations

from typing import Any, List, Tuple

import torch

from nanguard.torch._compat import ENGINE_RUN_BACKWARD_SITES
from nanguard.torch.auditor.graph import StopTrace
from nanguard.torch.auditor.trace import Tracer


class trace_calls:
    """``with trace_calls() as tracer:`` records what runs inside into ``tracer.trace``.

    Installs the dispatch mode, global module hooks (module paths, parameter names) and a
    stop at the first backward (whose roots become ``trace.roots``). `StopTrace` is
    swallowed at the end of the block.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.tracer = Tracer(limit=limit)
        self._handles: List[Any] = []
        self._saved: List[Tuple[Any, str, Any]] = []

    def __enter__(self) -> Tracer:
        tracer = self.tracer
        from torch.nn.modules import module as module_mod

        def pre(module: torch.nn.Module, inputs: Any) -> None:
            tracer.enter_module(module)

        def post(module: torch.nn.Module, inputs: Any, output: Any) -> None:
            tracer.exit_module()

        self._handles.append(module_mod.register_module_forward_pre_hook(pre))
        self._handles.append(module_mod.register_module_forward_hook(post, always_call=True))

        def stop(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            roots = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
            nodes = []
            for r in roots:
                if isinstance(r, torch.Tensor):
                    entry = tracer._table.get(id(r))
                    if entry is not None and entry.ref() is r:
                        nodes.append(entry.node)
            tracer.trace.roots = nodes
            tracer.trace.stopped_at = "backward"
            raise StopTrace()

        for owner, attr in ENGINE_RUN_BACKWARD_SITES:
            if hasattr(owner, attr):
                self._saved.append((owner, attr, getattr(owner, attr)))
                setattr(owner, attr, stop)
        tracer.__enter__()
        return tracer

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            self.tracer.__exit__(exc_type, exc, tb)
        finally:
            for owner, attr, value in reversed(self._saved):
                setattr(owner, attr, value)
            self._saved.clear()
            for h in self._handles:
                h.remove()
            self._handles.clear()
        return exc_type is not None and issubclass(exc_type, StopTrace)
