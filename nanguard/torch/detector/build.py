"""Turn the raw facts of a finding (op, tensors, frames) into a `Report`.

Live checks and replays both end here, so every report is assembled the same way, once:
exact summaries of the tensors, the user's line, the module path, the explanation and the
fix; and, given what the detection knows of optimizer steps (`OptimizerContext`), whether
the finding is really an optimizer step's doing (a parameter it left non-finite).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from nanguard.core.report import Report
from nanguard.core.report_builder import build_report
from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.torch.detector.explain import Evidence, explain, optimizer_explanation
from nanguard.torch.detector.frames import Frame, guess_torch_function, op_base
from nanguard.torch.detector.sharded import PENDING, local, process_rank
from nanguard.torch.detector.values import has_nan, is_finite, summarize

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
    api: Optional[str]
    inputs: List[Tuple[str, torch.Tensor]] = field(default_factory=list)
    scalars: List[ScalarArg] = field(default_factory=list)
    dim: Optional[int] = None
    created_in: Optional[str] = None   # for nodes made during a backward (double backward)


@dataclass(frozen=True)
class OptimizerContext:
    """What a detection knows about optimizer steps when it builds a report."""

    check: frozenset                                   # the kinds detection reports
    steps: int = 0                                     # completed steps
    last: Optional[torch.optim.Optimizer] = None       # the optimizer of the last completed step
    step_frame: Optional[Frame] = None                 # the user's line of that step
    running: Optional[torch.optim.Optimizer] = None    # a step in progress (exhaustive mode sees inside)


@dataclass(frozen=True)
class _Blame:
    optimizer: torch.optim.Optimizer
    kind: str
    parameters: List[str]     # the names of the finding's inputs that are non-finite parameters


def _blame(phase: str, inputs: Sequence[Tuple[str, torch.Tensor]], ctx: Optional[OptimizerContext],
           aliases: Mapping[int, torch.Tensor]) -> Optional[_Blame]:
    """The last optimizer step, when a forward finding's input is a non-finite parameter.

    Parameters are leaves: no forward op writes them, so a NaN/Inf in one comes from the
    optimizer step (or code outside the checked program, such as loading weights). The
    default mode does not look inside the step; it learns of it at the first op that uses
    the parameter. ``aliases`` maps a replay's stand-ins to the parameters they stand for.
    """
    if phase not in ("input", "forward") or ctx is None or ctx.last is None:
        return None
    params = {id(p) for g in ctx.last.param_groups for p in g["params"]}
    hits = []
    kinds = set()
    for name, t in inputs:
        base = t._base if t._base is not None else t          # linear passes weight.t()
        p = aliases.get(id(base), base)
        if id(p) in params and not is_finite(t):
            hits.append(name)
            kinds.add("nan" if has_nan(t) else "inf")
    if not hits:
        return None
    return _Blame(ctx.last, "nan" if "nan" in kinds else "inf", hits)


def _summaries(pairs: Sequence[Tuple[str, torch.Tensor]], role: str, limit: int = 6) -> List[Tuple[TensorSummary, Optional[torch.Tensor]]]:
    out = []
    for name, t in pairs[:limit]:
        out.append((summarize(t, name, role), t))
    return out


def make_report(*, phase: str, kind: str, op: str, inputs: Sequence[Tuple[str, torch.Tensor]],
                outputs: Sequence[Tuple[str, torch.Tensor]], scalars: Sequence[ScalarArg] = (),
                frame: Optional[Frame] = None, module: Optional[str] = None,
                api: Optional[str] = None, node: Optional[str] = None,
                forward: Optional[ForwardInfo] = None, call_frame: Optional[Frame] = None,
                stack: Sequence[Frame] = (), step: Optional[int] = None, how: str = "",
                notes: Sequence[str] = (), dim: Optional[int] = None,
                optimizer: Optional[OptimizerContext] = None,
                aliases: Mapping[int, torch.Tensor] = {}) -> Report:
    """Assemble the Report, once: every field is settled before it is made, and nothing
    rewrites it afterwards. Only here are tensors reduced to exact summaries.

    With ``optimizer``, a forward (or input) finding whose input is a parameter the last
    optimizer step left non-finite is reported as that step (phase ``"optimizer"``, at the
    step's line), and a finding made inside a running step (exhaustive mode) explains the step.
    """
    notes = list(notes) + PENDING.notes
    inputs = [(n, local(t)) for n, t in inputs]       # a DTensor: this rank's shard, never the
    outputs = [(n, local(t)) for n, t in outputs]     # whole (reading that would communicate)
    blame = _blame(phase, inputs, optimizer, aliases)
    if blame is not None and optimizer is not None and blame.kind not in optimizer.check:
        opt = type(blame.optimizer).__name__
        notes.append(f"{', '.join(blame.parameters)} held {blame.kind} after {opt}.step (step {optimizer.steps})")
        blame = None
    in_sum = _summaries(list(inputs), "input")
    out_sum = [s for s, _ in _summaries(outputs, "output")]
    if blame is not None and optimizer is not None:
        return _optimizer_report(blame, optimizer, op=op, module=module, frame=frame, inputs=in_sum,
                                 outputs=out_sum, scalars=scalars, stack=stack, how=how, notes=notes)
    fwd_sum: List[Tuple[TensorSummary, Optional[torch.Tensor]]] = []
    if phase == "backward":
        # A backward finding is reported at the forward line that made the failing node:
        # that is where the fix goes. Without a replay that line is unknown (None).
        location = forward.frame if forward is not None else None
        if forward is not None:
            fwd_sum = _summaries(forward.inputs, "forward input")
            module = forward.module if forward.module is not None else module
            if forward.api:
                api = forward.api
            if forward.dim is not None:
                dim = forward.dim
    else:
        location = frame
    code = location.code if location is not None else ""
    if api is None:
        api = guess_torch_function(forward.op if (phase == "backward" and forward) else op, code)
    ev = Evidence(phase=phase, kind=kind, op=op, forward_op=forward.op if forward is not None and phase == "backward" else None,
                  node=node, code=code, inputs=in_sum, forward_inputs=fwd_sum,
                  scalars=list(forward.scalars) if (phase == "backward" and forward is not None) else list(scalars),
                  outputs=out_sum, dim=dim)
    explanation, suggestion = explain(ev)
    fn_name = (api or op_base(forward.op if (phase == "backward" and forward) else op))
    if phase == "optimizer" and optimizer is not None and optimizer.running is not None:
        # Exhaustive mode found the op inside the step: the op's explanation, then the step's.
        why, suggestion = optimizer_explanation(optimizer.running, kind)
        explanation = f"{explanation} {why[0].upper()}{why[1:]}"
        api = f"torch.optim.{type(optimizer.running).__name__}.step"
        step = optimizer.steps + 1
    # where backward() was called (its forward line is the location, `build_report` says so)
    call_at = call_frame if phase == "backward" else None
    if phase == "backward" and forward is not None and forward.created_in:
        notes.append(f"this node was created while differentiating {forward.created_in} (double backward)")
    return build_report(
        framework="torch", rank=process_rank(), global_index=PENDING.global_index,
        phase=phase, kind=kind, op=op, api=api, node=node, module=module, where=location,
        code=code, forward_op=forward.op if phase == "backward" and forward is not None else None,
        call=call_at, inputs=[s for s, _ in in_sum], outputs=out_sum, forward_inputs=[s for s, _ in fwd_sum],
        scalars=scalars, step=step, explanation=explanation, suggestion=suggestion,
        stack=stack, how=how, notes=notes, fn=fn_name,
    )


def _optimizer_report(blame: _Blame, ctx: OptimizerContext, *, op: str, module: Optional[str],
                      frame: Optional[Frame], inputs: Sequence[Tuple[TensorSummary, Optional[torch.Tensor]]],
                      outputs: List[TensorSummary], scalars: Sequence[ScalarArg], stack: Sequence[Frame],
                      how: str, notes: List[str]) -> Report:
    """The optimizer step that left a parameter non-finite, reported at the step's line; the
    op that first used the parameter (``op`` at ``frame``) is named in the message and notes."""
    opt = type(blame.optimizer).__name__
    first = f"{op} at {frame.file}:{frame.line}" if frame is not None and frame.file else op
    if module:
        first += f" (module {module})"
    explanation, suggestion = optimizer_explanation(blame.optimizer, blame.kind)
    where = ctx.step_frame if ctx.step_frame is not None else frame
    return build_report(
        framework="torch", rank=process_rank(), global_index=PENDING.global_index,
        phase="optimizer", kind=blame.kind, op=f"{opt}.step", api=f"torch.optim.{opt}.step", where=where,
        inputs=[s for s, _ in inputs], outputs=outputs, scalars=scalars,
        step=ctx.steps, explanation=explanation, suggestion=suggestion, stack=list(stack), how=how,
        notes=notes + [f"the parameter was first used by {first}"],
        message=(f"{opt}.step (step {ctx.steps}) left {'NaN' if blame.kind == 'nan' else 'Inf'} in "
                 f"{', '.join(blame.parameters)}; first used by {first}"),
    )


def optimizer_step_report(optimizer: torch.optim.Optimizer, ctx: OptimizerContext, kind: str,
                          params: Sequence[Tuple[str, torch.Tensor]]) -> Report:
    """The step just completed left ``params`` non-finite (the default mode's check after a step).

    Reported at the user's ``step()`` line, with the parameters as outputs and their gradients
    as inputs; the op inside the step is known only to exhaustive mode, which checks each one.
    """
    opt = type(optimizer).__name__
    grads = [(f"{name}.grad", p.grad) for name, p in params if isinstance(p.grad, torch.Tensor)]
    explanation, suggestion = optimizer_explanation(optimizer, kind)
    where = ctx.step_frame
    names = ", ".join(name for name, _ in params[:4]) + (" ..." if len(params) > 4 else "")
    what = "NaN" if kind == "nan" else "Inf"
    notes = []
    if any(not is_finite(g) for _, g in grads):
        notes.append("some gradients were already non-finite when the step ran")
    return build_report(
        framework="torch", rank=process_rank(), global_index=PENDING.global_index,
        phase="optimizer", kind=kind, op=f"{opt}.step", api=f"torch.optim.{opt}.step", where=where,
        inputs=[s for s, _ in _summaries(grads, "input")], outputs=[s for s, _ in _summaries(list(params), "output")],
        step=ctx.steps, explanation=explanation, suggestion=suggestion,
        how="checked the parameters after the optimizer step (exhaustive=True names the op inside it)",
        notes=notes + [f"{names} held {what} after {opt}.step (step {ctx.steps})"],
        message=f"{opt}.step (step {ctx.steps}) left {what} in {names}")
