"""The finding: a frozen `Report` dataclass, its readable block and its JSON form."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from nanguard.core.location import Frame, Place
from nanguard.core.report_text import format_report, headline
from nanguard.core.summary import ScalarArg, TensorSummary


class NonFiniteWarning(RuntimeWarning):
    """Issued by ``nanguard.detect(mode="warn")``; its message is the report."""


@dataclass(frozen=True)
class Report:
    """The first non-finite value nanguard found, where it came from, and how to fix it.

    Frozen: a report is settled when it is made (`nanguard.core.report_builder.build_report`,
    which every backend calls); a later addition makes a new one (`with_notes`,
    ``dataclasses.replace``), so a report already handed out never changes under its reader.

    ``phase`` is ``"forward"``, ``"backward"``, ``"input"`` (a NaN that entered from outside
    the checked code, e.g. in the data) or ``"optimizer"`` (an optimizer step turned finite
    parameters non-finite). ``kind`` is ``"nan"`` or ``"inf"``. ``framework`` is ``"torch"``,
    ``"tf"`` or ``"jax"``. ``op`` is the framework's op: torch's aten op
    (``"aten.sqrt.default"``), TensorFlow's op type (``"Sqrt"``), JAX's primitive (``"div"``).
    ``api`` is the spelling the user wrote (``"torch.sqrt"``, ``"tf.math.sqrt"``,
    ``"jnp.divide"``; ``""`` for an operator or when it is not known on the line). ``node`` is
    the backward node (``"SqrtBackward0"``; JAX: the equation's name stack).

    ``where`` is the user's line: the innermost frame outside the framework and nanguard. For
    a backward finding it is the *forward* line that created the failing backward op, which
    ``forward`` repeats with the forward ``op``; ``call`` is where the backward pass was
    started and ``call_name`` what the user called there (``backward()``, ``tape.gradient()``,
    ``model.fit()``). The flat names of the JSON form (``file``, ``forward_line``,
    ``call_code``...) are read-only shorthands for these.

    Example:
        >>> with nanguard.detect(mode="record") as d:
        ...     torch.log(torch.zeros(3))
        >>> d.report.op, d.report.line
        ('aten.log.default', 2)
        >>> print(d.report)            # a readable block, coloured on a terminal
        >>> d.report.to_dict()         # JSON-serialisable; Report.from_dict reads it back
    """

    phase: str
    kind: str
    op: str
    api: Optional[str] = None
    framework: str = ""
    node: Optional[str] = None
    module: Optional[str] = None
    where: Optional[Place] = None
    forward: Optional[Place] = None
    call: Optional[Place] = None
    call_name: Optional[str] = None      # what was called at ``call`` (``backward()`` when not said)
    inputs: Tuple[TensorSummary, ...] = ()
    outputs: Tuple[TensorSummary, ...] = ()
    forward_inputs: Tuple[TensorSummary, ...] = ()
    scalars: Tuple[ScalarArg, ...] = ()
    step: Optional[int] = None
    message: str = ""
    explanation: str = ""
    suggestion: str = ""
    stack: Tuple[Frame, ...] = ()
    how: str = ""
    notes: Tuple[str, ...] = ()
    # multi-rank runs (torch.distributed): the process rank that made the finding; the collective
    # through which the values arrived from another rank (None: made on this rank); the first
    # non-finite output element's index in the whole (global) tensor of a sharded DTensor
    rank: Optional[int] = None
    received_through: Optional[str] = None
    global_index: Optional[Tuple[int, ...]] = None

    def __post_init__(self) -> None:
        # sequences are stored as tuples, whatever the caller passed, so that a report cannot
        # be changed through a list it shares with its maker, and equal reports compare equal
        for name in ("inputs", "outputs", "forward_inputs", "scalars", "stack", "notes"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        if self.global_index is not None and not isinstance(self.global_index, tuple):
            object.__setattr__(self, "global_index", tuple(self.global_index))
        if self.call is not None and self.call_name is None:
            object.__setattr__(self, "call_name", "backward()")   # PyTorch's, which says nothing

    def with_notes(self, *notes: str) -> Report:
        """This report with ``notes`` added after its own."""
        return dataclasses.replace(self, notes=self.notes + notes)

    # ------------------------------------------------------------------ flat shorthands
    # The JSON form's names, read off the nested places (None where the place is unknown).
    @property
    def file(self) -> Optional[str]:
        return self.where.file if self.where else None

    @property
    def line(self) -> Optional[int]:
        return self.where.line if self.where else None

    @property
    def function(self) -> Optional[str]:
        return self.where.function if self.where else None

    @property
    def code(self) -> Optional[str]:
        return self.where.code if self.where else None

    @property
    def forward_file(self) -> Optional[str]:
        return self.forward.file if self.forward else None

    @property
    def forward_line(self) -> Optional[int]:
        return self.forward.line if self.forward else None

    @property
    def forward_function(self) -> Optional[str]:
        return self.forward.function if self.forward else None

    @property
    def forward_code(self) -> Optional[str]:
        return self.forward.code if self.forward else None

    @property
    def forward_op(self) -> Optional[str]:
        return self.forward.op if self.forward else None

    @property
    def call_file(self) -> Optional[str]:
        return self.call.file if self.call else None

    @property
    def call_line(self) -> Optional[int]:
        return self.call.line if self.call else None

    @property
    def call_code(self) -> Optional[str]:
        return self.call.code if self.call else None

    @property
    def torch_function(self) -> Optional[str]:
        """Deprecated: `api` (of a torch report; None on the other frameworks)."""
        return self.api if self.framework == "torch" else None

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
        return headline(self)

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
        """A JSON-serialisable dict (NaN/Inf numbers are written as strings); `from_dict` reads it back."""
        return {
            "found": True,
            "phase": self.phase,
            "kind": self.kind,
            "op": self.op,
            "torch_function": self.torch_function,
            "api": self.api,
            "framework": self.framework,
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
            "call_name": self.call_name,
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
            **({"rank": self.rank} if self.rank is not None else {}),
            **({"received_through": self.received_through} if self.received_through is not None else {}),
            **({"global_index": list(self.global_index)} if self.global_index is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> Report:
        """The report `to_dict` wrote (``nanguard run --json``, a rank's file): the exact inverse,
        ``Report.from_dict(r.to_dict()) == r``. Keys it does not know (``status``,
        ``world_size``) are ignored; a file written before ``api`` and ``framework`` existed
        reads ``api`` from ``torch_function``."""
        framework = d.get("framework")
        if framework is None:   # written by an older nanguard: only torch wrote torch_function
            framework = "torch" if d.get("torch_function") is not None or str(d.get("op", "")).startswith("aten.") \
                else "jax" if "api" in d else ""
        api = d["api"] if "api" in d else d.get("torch_function")
        forward = _place(d, "forward_")
        if forward is None and d.get("forward_op") is not None:
            forward = Place(op=d["forward_op"])
        elif forward is not None:
            forward = dataclasses.replace(forward, op=d.get("forward_op"))
        return cls(
            phase=d["phase"], kind=d["kind"], op=d["op"], api=api, framework=framework, node=d.get("node"),
            module=d.get("module"), where=_place(d, ""), forward=forward, call=_place(d, "call_"),
            call_name=d.get("call_name"),
            inputs=tuple(TensorSummary.from_dict(s) for s in d.get("inputs") or ()),
            outputs=tuple(TensorSummary.from_dict(s) for s in d.get("outputs") or ()),
            forward_inputs=tuple(TensorSummary.from_dict(s) for s in d.get("forward_inputs") or ()),
            scalars=tuple(ScalarArg.from_dict(s) for s in d.get("scalars") or ()),
            step=d.get("step"), message=d.get("message") or "", explanation=d.get("explanation") or "",
            suggestion=d.get("suggestion") or "", stack=tuple(Frame.from_dict(f) for f in d.get("stack") or ()),
            how=d.get("how") or "", notes=tuple(d.get("notes") or ()), rank=d.get("rank"),
            received_through=d.get("received_through"),
            global_index=tuple(d["global_index"]) if d.get("global_index") is not None else None)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def format(self, color: Optional[bool] = None, width: int = 92) -> str:
        """The readable block; ``color=None`` colours only when stderr is a terminal."""
        return format_report(self, color, width)

    def __str__(self) -> str:
        return self.format()


def _place(d: Dict[str, Any], prefix: str) -> Optional[Place]:
    """The place a JSON report names under ``prefix`` (``forward_``: its forward line), if any."""
    parts = [d.get(prefix + k) for k in ("file", "line", "function", "code")]
    if all(p is None for p in parts):
        return None
    return Place(*parts)


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
