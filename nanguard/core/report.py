"""The finding: a `Report` dataclass, its readable block and its JSON form."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from nanguard.core.location import Frame
from nanguard.core.opnames import op_base
from nanguard.core.summary import ScalarArg, TensorSummary


class NonFiniteWarning(RuntimeWarning):
    """Issued by ``nanguard.detect(mode="warn")``; its message is the report."""


@dataclass
class Report:
    """The first non-finite value nanguard found, where it came from, and how to fix it.

    ``phase`` is ``"forward"``, ``"backward"``, ``"input"`` (a NaN that entered from outside
    the checked code, e.g. in the data) or ``"optimizer"`` (an optimizer step turned finite
    parameters non-finite). ``kind`` is ``"nan"`` or ``"inf"``. ``op`` is the aten op
    (``"aten.sqrt.default"``); ``torch_function`` the spelling the user wrote
    (``"torch.sqrt"``); ``node`` the autograd node of a backward finding (``"SqrtBackward0"``).
    For JAX, ``op`` is the primitive (``"div"``), ``api`` the spelling the user wrote
    (``"jnp.sqrt"``) and ``node`` the equation's name stack (``"transpose(jvp(loss))"``).

    ``file``/``line``/``code`` are the user's line: the innermost frame outside torch and
    nanguard. For a backward finding they are the *forward* line that created the failing
    backward op (also in ``forward_file``/``forward_line``), and ``call_file``/``call_line``
    say where the backward pass was started: ``call_name`` is what the user called there
    (``tape.gradient()``, ``model.fit()``; None for PyTorch's ``backward()``).

    Example:
        >>> with nanguard.detect(mode="record") as d:
        ...     torch.log(torch.zeros(3))
        >>> d.report.op, d.report.line
        ('aten.log.default', 2)
        >>> print(d.report)            # a readable block, coloured on a terminal
        >>> d.report.to_dict()         # JSON-serialisable
    """

    phase: str
    kind: str
    op: str
    torch_function: Optional[str] = None
    node: Optional[str] = None
    module: Optional[str] = None
    file: Optional[str] = None
    line: Optional[int] = None
    function: Optional[str] = None
    code: Optional[str] = None
    forward_file: Optional[str] = None
    forward_line: Optional[int] = None
    forward_function: Optional[str] = None
    forward_code: Optional[str] = None
    forward_op: Optional[str] = None
    call_file: Optional[str] = None
    call_line: Optional[int] = None
    call_code: Optional[str] = None
    call_name: Optional[str] = None  # what was called at call_line; None: "backward()"
    inputs: List[TensorSummary] = field(default_factory=list)
    outputs: List[TensorSummary] = field(default_factory=list)
    forward_inputs: List[TensorSummary] = field(default_factory=list)
    scalars: List[ScalarArg] = field(default_factory=list)
    step: Optional[int] = None
    message: str = ""
    explanation: str = ""
    suggestion: str = ""
    stack: List[Frame] = field(default_factory=list)
    how: str = ""
    notes: List[str] = field(default_factory=list)
    api: Optional[str] = None        # set by other frameworks: the user's spelling ("" for an operator)
    # multi-rank runs (torch.distributed): the process rank that made the finding; the collective
    # through which the values arrived from another rank (None: made on this rank); the first
    # non-finite output element's index in the whole (global) tensor of a sharded DTensor
    rank: Optional[int] = None
    received_through: Optional[str] = None
    global_index: Optional[List[int]] = None

    # ------------------------------------------------------------------ derived text
    @property
    def what(self) -> str:
        """``NaN`` or ``Inf`` (with sign when all infinities share one)."""
        if self.kind == "nan":
            return "NaN"
        signs = {("+" if s.posinf else "") + ("-" if s.neginf else "") for s in self.outputs if not s.finite}
        return "-Inf" if signs == {"-"} else "+Inf" if signs == {"+"} else "Inf"

    @property
    def headline(self) -> str:
        fn = _display_function(self)
        if self.phase == "backward":
            return f"backward of {fn}"
        if self.phase == "input":
            return f"{self.what} entered from outside, first consumed by {fn}"
        if self.phase == "optimizer":
            return f"optimizer step ({fn})"
        return f"forward of {fn}"

    def location(self) -> Optional[Frame]:
        if self.file is None or self.line is None:
            return None
        return Frame(self.file, self.line, self.function or "?")

    def user_call_site(self) -> Optional[Frame]:
        """The user's own line that led to a finding located in library code (an installed
        package such as transformers): the first frame of ``stack`` outside libraries. None
        when the finding is already in the user's code."""
        loc = self.location()
        if loc is None or not loc.in_library:
            return None
        for frame in self.stack:
            if not frame.in_library and (frame.file, frame.line) != (loc.file, loc.line):
                return frame
        return None

    # ------------------------------------------------------------------ formats
    def to_dict(self) -> Dict[str, Any]:
        """A JSON-serialisable dict (NaN/Inf numbers are written as strings)."""
        return {
            "found": True,
            "phase": self.phase,
            "kind": self.kind,
            "op": self.op,
            "torch_function": self.torch_function,
            "node": self.node,
            "module": self.module,
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "code": self.code,
            "forward_file": self.forward_file,
            "forward_line": self.forward_line,
            "forward_function": self.forward_function,
            "forward_code": self.forward_code,
            "forward_op": self.forward_op,
            "call_file": self.call_file,
            "call_line": self.call_line,
            "call_code": self.call_code,
            "call_name": self.call_name or ("backward()" if self.call_file is not None else None),
            "message": self.message,
            "explanation": self.explanation,
            "suggestion": self.suggestion,
            "inputs": [s.to_dict() for s in self.inputs],
            "outputs": [s.to_dict() for s in self.outputs],
            "forward_inputs": [s.to_dict() for s in self.forward_inputs],
            "scalars": [s.to_dict() for s in self.scalars],
            "step": self.step,
            "stack": [f.to_dict() for f in self.stack],
            "how": self.how,
            "notes": list(self.notes),
            **({"api": self.api} if self.api is not None else {}),
            **({"rank": self.rank} if self.rank is not None else {}),
            **({"received_through": self.received_through} if self.received_through is not None else {}),
            **({"global_index": list(self.global_index)} if self.global_index is not None else {}),
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def format(self, color: Optional[bool] = None, width: int = 92) -> str:
        """The readable block; ``color=None`` colours only when stderr is a terminal."""
        if color is None:
            color = _stderr_is_terminal()
        paint = _painter(color)
        lines = [paint(f"nanguard: first non-finite value ({self.what}) — {self.headline}", "1;31")]
        loc = self.location()
        if loc is not None:
            at = f"{loc.short_file}:{loc.line} in {loc.function}"
            if self.module:
                at += f"      (module: {self.module})"
            lines.append(f"  {paint('at', '1')}  {at}")
            code = self.code if self.code is not None else loc.code
            if code:
                lines.append(f"      {paint(f'{loc.line} │ {code}', '33')}")
            caller = self.user_call_site()
            if caller is not None:
                lines.append(f"  {paint('from', '1')} {caller.short_file}:{caller.line} in {caller.function}")
                if caller.code:
                    lines.append(f"      {paint(f'{caller.line} │ {caller.code}', '33')}")
        elif self.module:
            lines.append(f"  {paint('in', '1')}  module {self.module}")
        op_line = self.op
        if self.node:
            op_line += f" in {self.node}"
        spelling = self.torch_function or self.api
        if spelling and self.phase != "optimizer":
            op_line += f" (from {spelling})"
        lines.append(f"  {paint('op', '1')}  {op_line}")
        for label, text in (("why", self.explanation), ("fix", self.suggestion)):
            if text:
                wrapped = textwrap.wrap(text, width=width - 6) or [""]
                lines.append(f"  {paint(label, '1')} {wrapped[0]}")
                lines.extend(f"      {w}" for w in wrapped[1:])
        rows = [("forward input", t) for t in self.forward_inputs]
        in_label = "grad input" if self.phase == "backward" else "input"
        rows += [(in_label, t) for t in self.inputs]
        rows += [("output", t) for t in self.outputs]
        width = max((len(label) for label, _ in rows), default=0)
        names = max((len(t.name) for _, t in rows), default=0)
        for label, t in rows:
            lines.append(f"  {label:<{width}}  {t.name:<{names}}  {t.line()}")
        for sc in self.scalars:
            lines.append(f"  {'scalar':<{width}}  {sc.name:<{names}}  {sc.value}")
        if self.call_file is not None:
            call = Frame(self.call_file, self.call_line or 0, "")
            lines.append(f"  {self.call_name or 'backward()'} called at {call.short_file}:{self.call_line}")
        if self.step is not None:
            lines.append(f"  step {self.step} of the training loop")
        if self.rank is not None:
            lines.append(f"  rank {self.rank}" + (f", received through {self.received_through}"
                                                   if self.received_through else ""))
        if self.global_index is not None:
            lines.append(f"  global index {tuple(self.global_index)} of the sharded tensor")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _display_function(report: Report) -> str:
    """The short name of what failed: ``sqrt`` for aten.sqrt or for the backward of torch.sqrt."""
    if report.api is not None:
        # another framework (JAX sets ``api``, "" for an operator)
        if report.phase == "backward" and report.forward_op:
            return report.forward_op
        return report.api.rsplit(".", 1)[-1] if report.api else report.op
    if report.phase == "backward" and report.forward_op:
        return _op_base(report.forward_op)
    if report.op.startswith("aten."):
        return _op_base(report.op)
    return report.op


def _op_base(op: str) -> str:
    """A torch aten name's short form (``aten.sqrt.default`` -> ``sqrt``); other frameworks' op
    names (TensorFlow's ``Sqrt``) are already short."""
    if not op.startswith("aten.") and "." not in op:
        return op
    return op_base(op)


def message(phase: str, kind: str, fn: str, where: str) -> str:
    """The one-line summary of a finding (`Report.message`), the same words on every backend:
    ``fn`` is the short name of what failed, ``where`` the user's ``file:line`` (`where`).

        >>> message("forward", "inf", "log", "model.py:3")
        'log produced Inf from finite inputs at model.py:3'
    """
    what = "NaN" if kind == "nan" else "Inf"
    if phase == "backward":
        return f"backward of {fn} produced {what} from finite values at {where}"
    if phase == "input":
        return f"{what} entered from outside and was first consumed by {fn} at {where}"
    if phase == "optimizer":
        return f"the optimizer step ({fn}) produced {what} in the parameters from finite gradients at {where}"
    return f"{fn} produced {what} from finite inputs at {where}"


def where(frame: Optional[Frame]) -> str:
    """``file:line`` of ``frame`` for `message` (``an unknown line`` without one)."""
    return f"{frame.short_file}:{frame.line}" if frame is not None else "an unknown line"


def _stderr_is_terminal() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def _painter(color: bool) -> Callable[[str, str], str]:
    if not color:
        return lambda text, code: text
    return lambda text, code: f"\033[{code}m{text}\033[0m"


# ``status`` of ``nanguard run --json``: what became of the program
RUN_STATUSES = ("found", "clean", "script_error", "exited")


def not_found_dict(status: str = "clean", exit_code: Optional[int] = 0, error: Optional[str] = None) -> Dict[str, Any]:
    """The JSON written by ``nanguard run --json`` when no detector made a report.

    ``status`` says why the program ended: ``clean`` (ran to its end, or ``sys.exit(0)``),
    ``exited`` (``sys.exit`` with a non-zero status, ``exit_code``), ``script_error`` (an
    uncaught exception, ``error`` is its last traceback line) or ``found`` (a nanguard guard
    raised ``NonFiniteError``: a finding without a detection report). Only ``clean`` says the
    program ran clean: after a crash or an early exit the rest of it never ran.
    """
    if status not in RUN_STATUSES:
        raise ValueError(f"status must be one of {RUN_STATUSES}, not {status!r}")
    if status == "clean":
        message = "no NaN or Inf was detected"
    elif status == "exited":
        message = f"the program exited with status {exit_code} before its end; no NaN or Inf was detected until then"
    elif status == "script_error":
        message = f"the program failed ({error}); no NaN or Inf was detected before it did"
    else:
        message = error or "nanguard raised NonFiniteError"
    return {"found": status == "found", "status": status, "exit_code": exit_code, "phase": None, "op": None,
            "file": None, "line": None, "code": None, "module": None, "message": message, "explanation": None,
            "suggestion": None, "inputs": [], "forward_file": None, "forward_line": None,
            **({"error": error} if error is not None else {})}


__all__ = ["RUN_STATUSES", "NonFiniteWarning", "Report", "message", "not_found_dict", "where"]
