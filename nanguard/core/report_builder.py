"""The one way a backend makes a `Report`: every framework's finding goes through `build_report`.

Each backend knows its own facts (torch's aten op and autograd node, TensorFlow's op type and
layer, JAX's primitive and name stack) and reduces its tensors to summaries; what a report
*is* — which places it names, that a backward finding's forward line is its line, the one-line
message in the same words on every backend — is settled here, once.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from nanguard.core.location import Frame, Place
from nanguard.core.report import Report, message as one_line, where as line_of
from nanguard.core.summary import ScalarArg, TensorSummary

FRAMEWORKS = ("torch", "tf", "jax")


def build_report(*, framework: str, phase: str, kind: str, op: str, fn: Optional[str] = None,
                 api: Optional[str] = None, node: Optional[str] = None, module: Optional[str] = None,
                 where: Optional[Frame] = None, code: Optional[str] = None, forward_op: Optional[str] = None,
                 call: Optional[Frame] = None, call_name: Optional[str] = None,
                 inputs: Iterable[TensorSummary] = (), outputs: Iterable[TensorSummary] = (),
                 forward_inputs: Iterable[TensorSummary] = (), scalars: Iterable[ScalarArg] = (),
                 explanation: str = "", suggestion: str = "", message: Optional[str] = None,
                 step: Optional[int] = None, stack: Iterable[Frame] = (), how: str = "",
                 notes: Iterable[str] = (), rank: Optional[int] = None,
                 received_through: Optional[str] = None,
                 global_index: Optional[Sequence[int]] = None) -> Report:
    """The report of a finding at ``where`` (the user's line; None when unknown).

    ``fn`` is the short name of what failed for the message (``sqrt``; default ``op``), and
    ``message`` replaces the standard one-line message where a finding says more (an optimizer
    step, a batch from the data). ``code`` is the line's code when the backend already read it
    (default: read from the file now). A backward finding is reported at its forward line, so
    its ``forward`` place is ``where`` with ``forward_op``; ``call`` is where the backward pass
    was started (``call_name``: what was called there; default ``backward()``).
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework must be one of {FRAMEWORKS}, not {framework!r}")
    place = Place.of(where, code)
    forward = Place.of(where, code, forward_op) if phase == "backward" else None
    call_place = Place(call.file, call.line, None, call.code) if call is not None else None
    if message is None:
        message = one_line(phase, kind, fn or op, line_of(where))
    return Report(
        phase=phase, kind=kind, op=op, api=api, framework=framework, node=node, module=module, where=place,
        forward=forward, call=call_place, call_name=call_name, inputs=tuple(inputs), outputs=tuple(outputs),
        forward_inputs=tuple(forward_inputs), scalars=tuple(scalars), step=step, message=message,
        explanation=explanation, suggestion=suggestion, stack=tuple(stack), how=how, notes=tuple(notes),
        rank=rank, received_through=received_through,
        global_index=tuple(global_index) if global_index is not None else None)


__all__ = ["FRAMEWORKS", "build_report"]
