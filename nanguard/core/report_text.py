"""The readable block of a `Report`: what `print(report)` shows, coloured on a terminal."""

from __future__ import annotations

import os
import sys
import textwrap
from typing import TYPE_CHECKING, Callable, Optional

from nanguard.core.location import Frame
from nanguard.core.opnames import op_base

if TYPE_CHECKING:
    from nanguard.core.report import Report


def format_report(report: Report, color: Optional[bool] = None, width: int = 92) -> str:
    """The readable block; ``color=None`` colours only when stderr is a terminal."""
    if color is None:
        color = _stderr_is_terminal()
    paint = _painter(color)
    lines = [paint(f"nanguard: first non-finite value ({report.what}) — {headline(report)}", "1;31")]
    loc = report.location()
    if loc is not None:
        at = f"{loc.short_file}:{loc.line} in {loc.function}"
        if report.module:
            at += f"      (module: {report.module})"
        lines.append(f"  {paint('at', '1')}  {at}")
        code = report.code if report.code is not None else loc.code
        if code:
            lines.append(f"      {paint(f'{loc.line} │ {code}', '33')}")
        caller = report.user_call_site()
        if caller is not None:
            lines.append(f"  {paint('from', '1')} {caller.short_file}:{caller.line} in {caller.function}")
            if caller.code:
                lines.append(f"      {paint(f'{caller.line} │ {caller.code}', '33')}")
    elif report.module:
        lines.append(f"  {paint('in', '1')}  module {report.module}")
    op_line = report.op
    if report.node:
        op_line += f" in {report.node}"
    if report.api and report.phase != "optimizer":
        op_line += f" (from {report.api})"
    lines.append(f"  {paint('op', '1')}  {op_line}")
    for label, text in (("why", report.explanation), ("fix", report.suggestion)):
        if text:
            wrapped = textwrap.wrap(text, width=width - 6) or [""]
            lines.append(f"  {paint(label, '1')} {wrapped[0]}")
            lines.extend(f"      {w}" for w in wrapped[1:])
    rows = [("forward input", t) for t in report.forward_inputs]
    in_label = "grad input" if report.phase == "backward" else "input"
    rows += [(in_label, t) for t in report.inputs]
    rows += [("output", t) for t in report.outputs]
    width = max((len(label) for label, _ in rows), default=0)
    names = max((len(t.name) for _, t in rows), default=0)
    for label, t in rows:
        lines.append(f"  {label:<{width}}  {t.name:<{names}}  {t.line()}")
    for sc in report.scalars:
        lines.append(f"  {'scalar':<{width}}  {sc.name:<{names}}  {sc.value}")
    if report.call_file is not None:
        call = Frame(report.call_file, report.call_line or 0, "")
        lines.append(f"  {report.call_name or 'backward()'} called at {call.short_file}:{report.call_line}")
    if report.step is not None:
        lines.append(f"  step {report.step} of the training loop")
    if report.rank is not None:
        lines.append(f"  rank {report.rank}" + (f", received through {report.received_through}"
                                                 if report.received_through else ""))
    if report.global_index is not None:
        lines.append(f"  global index {tuple(report.global_index)} of the sharded tensor")
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def headline(report: Report) -> str:
    fn = _display_function(report)
    if report.phase == "backward":
        return f"backward of {fn}"
    if report.phase == "input":
        return f"{report.what} entered from outside, first consumed by {fn}"
    if report.phase == "optimizer":
        return f"optimizer step ({fn})"
    return f"forward of {fn}"


def _display_function(report: Report) -> str:
    """The short name of what failed: ``sqrt`` for aten.sqrt or for the backward of torch.sqrt.

    JAX names it after the user's spelling (its primitives are not what the user wrote:
    ``jnp.divide`` is ``div``); torch and TensorFlow after their op (``Sqrt``)."""
    if report.framework == "jax":
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


def _stderr_is_terminal() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def _painter(color: bool) -> Callable[[str, str], str]:
    if not color:
        return lambda text, code: text
    return lambda text, code: f"\033[{code}m{text}\033[0m"


__all__ = ["format_report", "headline"]
