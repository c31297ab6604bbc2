"""Turn the raw facts of a finding (op, tensors, frames) into a `Report`.

Live checks and replays both end here, so every report is assembled the same way: exact
summaries of the tensors, the user's line, the module path, the explanation and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from nanguard.torch.detector.explain import Evidence, explain, message
from nanguard.torch.detector.frames import Frame, guess_torch_function, op_base
from nanguard.core.report import Report
from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.torch.detector.values import summarize

_ARG_NAMES: Dict[Any, Tuple[str, ...]] = {}


def arg_names(func: Any) -> Tuple[str, ...]:
    """Schema names of an aten op's arguments (``self``, ``other``, ``dim`` ...)."""
    names = _ARG_NAMES.get(func)
    if names is None:
        schema = getattr(func, "_schema", None)
        names = tuple(a.name for a in schema.arguments) if schema is not None else ()
        _ARG_NAMES[func] = names
    return names


def named_args(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[Tuple[str, Any]]:
    names = arg_names(func)
    out = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(args)]
    out.extend(kwargs.items())
    return out


def split_args(pairs: Sequence[Tuple[str, Any]]) -> Tuple[List[Tuple[str, torch.Tensor]], List[ScalarArg], Optional[int]]:
    """Tensors (lists of tensors flattened as name[i]), float scalars, and a ``dim`` if any."""
    tensors: List[Tuple[str, torch.Tensor]] = []
    scalars: List[ScalarArg] = []
    dim = None
    for name, value in pairs:
        if isinstance(value, torch.Tensor):
            tensors.append((name, value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            tensors.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, float) and not isinstance(value, bool):
            scalars.append(ScalarArg(name, value))
        elif name == "dim" and isinstance(value, int) and not isinstance(value, bool):
            dim = value
        elif name == "dim" and isinstance(value, (list, tuple)) and len(value) == 1:
            dim = int(value[0])
    return tensors, scalars, dim


def output_pairs(out: Any) -> List[Tuple[str, torch.Tensor]]:
    if isinstance(out, torch.Tensor):
        return [("out", out)]
    if isinstance(out, (list, tuple)):
        return [(f"out[{i}]", o) for i, o in enumerate(out) if isinstance(o, torch.Tensor)]
    return []


@dataclass
class ForwardInfo:
    """What a replay remembers about a forward op, attached to the autograd node it created."""

    op: str
    frame: Optional[Frame]
    module: Optional[str]
    torch_function: Optional[str]
    inputs: List[Tuple[str, torch.Tensor]] = field(default_factory=list)
    scalars: List[ScalarArg] = field(default_factory=list)
    dim: Optional[int] = None
    created_in: Optional[str] = None   # for nodes made during a backward (double backward)


def _summaries(pairs: Sequence[Tuple[str, torch.Tensor]], role: str, limit: int = 6) -> List[Tuple[TensorSummary, Optional[torch.Tensor]]]:
    out = []
    for name, t in pairs[:limit]:
        out.append((summarize(t, name, role), t))
    return out


def make_report(*, phase: str, kind: str, op: str, inputs: Sequence[Tuple[str, torch.Tensor]],
                outputs: Sequence[Tuple[str, torch.Tensor]], scalars: Sequence[ScalarArg] = (),
                frame: Optional[Frame] = None, module: Optional[str] = None,
                torch_function: Optional[str] = None, node: Optional[str] = None,
                forward: Optional[ForwardInfo] = None, call_frame: Optional[Frame] = None,
                stack: Sequence[Frame] = (), step: Optional[int] = None, how: str = "",
                notes: Sequence[str] = (), dim: Optional[int] = None) -> Report:
    """Assemble a Report; only here are tensors reduced to exact summaries."""
    in_sum = _summaries(list(inputs), "input")
    out_sum = [s for s, _ in _summaries(outputs, "output")]
    fwd_sum: List[Tuple[TensorSummary, Optional[torch.Tensor]]] = []
    if phase == "backward":
        # A backward finding is reported at the forward line that made the failing node:
        # that is where the fix goes. Without a replay that line is unknown (None).
        location = forward.frame if forward is not None else None
        if forward is not None:
            fwd_sum = _summaries(forward.inputs, "forward input")
            module = forward.module if forward.module is not None else module
            if forward.torch_function:
                torch_function = forward.torch_function
            if forward.dim is not None:
                dim = forward.dim
    else:
        location = frame
    code = location.code if location is not None else ""
    if torch_function is None:
        torch_function = guess_torch_function(forward.op if (phase == "backward" and forward) else op, code)
    ev = Evidence(phase=phase, kind=kind, op=op, forward_op=forward.op if forward is not None and phase == "backward" else None,
                  node=node, code=code, inputs=in_sum, forward_inputs=fwd_sum,
                  scalars=list(forward.scalars) if (phase == "backward" and forward is not None) else list(scalars),
                  outputs=out_sum, dim=dim)
    explanation, suggestion = explain(ev)
    fn_name = (torch_function or op_base(forward.op if (phase == "backward" and forward) else op))
    where = f"{location.short_file}:{location.line}" if location is not None else "an unknown line"
    report = Report(
        phase=phase, kind=kind, op=op, torch_function=torch_function, node=node, module=module,
        file=location.file if location else None, line=location.line if location else None,
        function=location.function if location else None, code=code if location else None,
        inputs=[s for s, _ in in_sum], outputs=out_sum, forward_inputs=[s for s, _ in fwd_sum],
        scalars=list(scalars), step=step, explanation=explanation, suggestion=suggestion,
        stack=list(stack), how=how, notes=list(notes),
        message=message(phase, kind, fn_name, where),
    )
    if phase == "backward":
        if forward is not None:
            report.forward_op = forward.op
            if location is not None:
                report.forward_file, report.forward_line = location.file, location.line
                report.forward_function, report.forward_code = location.function, code
            if forward.created_in:
                report.notes.append(f"this node was created while differentiating {forward.created_in} "
                                    f"(double backward)")
        if call_frame is not None:
            report.call_file, report.call_line, report.call_code = call_frame.file, call_frame.line, call_frame.code
    return report
