"""Eager JAX: an op that runs by itself (``jnp.log(x)`` outside any ``jit``) is judged on the
spot; inside an eager ``jax.grad``/``value_and_grad`` the differentiated call is replayed as
a whole, so that forward and backward equations are told apart as under ``jit``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Optional

import jax

from nanguard.core.location import Frame
from nanguard.core.nonfinite import Flags, made
from nanguard.core.report import Report
from nanguard.core.report_builder import build_report
from nanguard.jax.detector.build import summaries
from nanguard.jax.detector.frames import Site, api_spelling, base_name, eqn_site, is_internal
from nanguard.jax.detector.values import flags_of, rounded
from nanguard.jax.detector.why import Facts, diagnose, words

_JAX_SRC = os.sep + os.path.join("jax", "_src") + os.sep


def _jax_frame(name: str, file_tail: str) -> Optional[Any]:
    """The outermost running frame of JAX function ``name`` in a file ending with ``file_tail``."""
    found = None
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == name and code.co_filename.endswith(file_tail) and _JAX_SRC in code.co_filename:
            found = frame
        frame = frame.f_back
    return found


def live_site() -> Optional[Site]:
    """The innermost user frame of the running stack, with its expression's columns."""
    frame = sys._getframe(2)
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    code = frame.f_code
    try:
        line, end_line, col, end_col = list(code.co_positions())[frame.f_lasti // 2]
    except (IndexError, ValueError, TypeError):
        line, end_line, col, end_col = frame.f_lineno, -1, -1, -1
    return Site(Frame(code.co_filename, line or frame.f_lineno, code.co_name),
                -1 if col is None else col, -1 if end_line is None else end_line, -1 if end_col is None else end_col)


NOT_IN_GRAD = object()


def in_grad(session: Any) -> Any:
    """Inside an eager ``jax.grad``/``value_and_grad``: the report of replaying the whole
    differentiated call (None when it finds nothing); `NOT_IN_GRAD` outside one."""
    grad = _jax_frame("value_and_grad_f", os.path.join("_src", "api.py"))
    if grad is None:
        return NOT_IN_GRAD
    if grad is not None:
        key = id(grad)
        if key in session.replayed:
            return None
        session.replayed.add(key)
        local = grad.f_locals
        program = jax.value_and_grad(local["fun"], argnums=local["argnums"], has_aux=local["has_aux"],
                                     holomorphic=local.get("holomorphic", False),
                                     allow_int=local.get("allow_int", False))
        return session.replay(program, tuple(local["args"]), dict(local["kwargs"]), None,
                              f"value_and_grad({getattr(local['fun'], '__name__', 'f')})", expect=False)


def judge_primitive(session: Any, primitive: str, args: tuple, outputs: Any) -> Optional[Report]:
    """The report for an eager op whose output is non-finite, or None (deliberate infinities)."""
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    in_flags = [flags_of(a) for a in args]
    out_flags = [flags_of(o) for o in outs]
    out_inf = any(f[1] for f in out_flags)
    in_finite = not any(f[0] or f[1] for f in in_flags)
    verdict = made(Flags(out_nan=any(f[0] for f in out_flags), out_inf=out_inf, in_nan=any(f[0] for f in in_flags),
                         in_finite=in_finite, rounded_extreme=out_inf and in_finite and rounded(args, outs)),
                   session.check)
    if verdict is None:
        return None
    phase, kind = ("input" if verdict.origin == "input" else "forward"), verdict.kind
    backward = _jax_frame("backward_pass", os.path.join("interpreters", "ad.py"))
    site = live_site()
    if backward is not None and phase == "forward":
        phase = "backward"
        eqn = backward.f_locals.get("eqn")
        site = (eqn_site(eqn) if eqn is not None else None) or site
    return _report(phase, kind, primitive, site, list(args), outs)


def _report(phase: str, kind: str, primitive: str, site: Optional[Site], args: List[Any],
            outs: List[Any]) -> Report:
    from nanguard.jax.detector.build import _args
    api = api_spelling(site)
    fn = base_name(api) or primitive
    inputs, scalars = _args(args, "input")
    outputs = summaries(outs, "output")
    for s in outputs:
        s.name = "out"
    facts = Facts(phase=phase, kind=kind, fn=fn, primitive=primitive, inputs=inputs, forward_inputs=[],
                  scalars=[s.value for s in scalars], outputs=outputs)
    explanation, suggestion = words(diagnose(facts))
    frame = site.frame if site is not None else None
    return build_report(framework="jax", phase=phase, kind=kind, op=primitive, fn=fn, api=api or "", where=frame,
                        forward_op=fn if phase == "backward" else None, inputs=[s for s, _ in inputs],
                        outputs=outputs, scalars=scalars, explanation=explanation, suggestion=suggestion,
                        how="eager")


def unreplayable(label: str, reason: str, step: Optional[int]) -> Report:
    """A finding in ``label``'s outputs that could not be localised to an op."""
    return build_report(framework="jax", phase="forward", kind="nan", op=f"jit({label})", api="", step=step,
                        message=f"{label} returned a non-finite value", how="output check",
                        explanation="the outputs of a jitted call held NaN/Inf, but the op could not be localised.",
                        notes=[f"{label}: {reason}"])


__all__ = ["NOT_IN_GRAD", "in_grad", "judge_primitive", "live_site", "unreplayable"]
