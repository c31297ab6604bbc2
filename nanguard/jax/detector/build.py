"""The report of a JAX finding: a `nanguard.core.report.Report` built from a replay's event.

The op is the JAX primitive (``div``); ``forward_op`` the function the user wrote at that
line (``sqrt`` for the gradient of ``jnp.sqrt``), ``api`` its spelling (``jnp.sqrt``),
``node`` the equation's name stack (``transpose(jvp(loss))``: the transformations JAX
applied). Lines are the user's innermost frame of the equation's ``source_info``: for a
backward equation, the forward line that it differentiates.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import jax
import numpy as np
from jax.extend import core as jcore

from nanguard.core.report import Report
from nanguard.core.report_builder import build_report
from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.jax.detector.frames import Site, api_spelling, base_name, eqn_site, traceback_sites
from nanguard.jax.detector.phase import enclosing_site, eqn_function, forward_eqn, is_backward, scope_flags
from nanguard.jax.detector.replay import Event, Outcome
from nanguard.jax.detector.values import host, is_float, summarize
from nanguard.jax.detector.why import Facts, diagnose, words

_BINARY_NAMES = ("x", "y")


def operand_names(n: int) -> List[str]:
    return ["x"] if n == 1 else list(_BINARY_NAMES) if n == 2 else [f"arg{i}" for i in range(n)]


def _site(event: Event) -> Optional[Site]:
    """The user frame of the event's equation, else of the nearest enclosing equation."""
    return eqn_site(event.eqn) or enclosing_site(event.scope)


def _forward(event: Event, site: Optional[Site]) -> tuple:
    """(forward equation, its scope's values) of a backward event: the outermost forward
    ``jit`` written at the same line (``jnp.linalg.norm``), else the scope's own primal
    equation at that expression."""
    scope, found = event.scope, None
    while scope.parent is not None and (eqn_site(scope.parent_eqn) or enclosing_site(scope.parent)) == site:
        flags = scope_flags(scope.parent)
        index = next((i for i, e in enumerate(scope.parent.jaxpr.eqns) if e is scope.parent_eqn), None)
        if index is None or flags[index]:
            break
        found = (scope.parent_eqn, scope.parent.env)
        scope = scope.parent
    if found is not None:
        return found
    eqn = forward_eqn(event, site)
    return (eqn, event.scope.env) if eqn is not None else (None, {})


def _values(eqn: Any, env: Dict[Any, Any]) -> List[Any]:
    return [v.val if isinstance(v, jcore.Literal) else env.get(v) for v in eqn.invars]


def _args(values: Sequence[Any], role: str) -> tuple:
    """(summaries with their host values) of the array operands, and the Python-number ones."""
    names = operand_names(len(values))
    arrays, scalars = [], []
    for name, v in zip(names, values):
        if v is None:
            continue
        if not isinstance(v, jax.Array) and np.ndim(v) == 0 and not isinstance(v, (bool, np.bool_)):
            try:                                         # a literal such as sqrt's 0.5
                scalars.append(ScalarArg(name, float(v)))
                continue
            except (TypeError, ValueError):
                pass
        arrays.append((summarize(v, name, role), host(v) if is_float(v) else None))
    return arrays, scalars


def _producers(eqn: Any, scope: Any, depth: int = 3) -> tuple:
    """Primitives and user functions that made ``eqn``'s first operand, nearest first."""
    made_by = {}
    for e in scope.jaxpr.eqns:
        for v in e.outvars:
            made_by[v] = e
    prims, fns = [], []
    frontier = [v for v in eqn.invars[:1] if not isinstance(v, jcore.Literal)]
    for _ in range(depth):
        nxt = []
        for v in frontier:
            e = made_by.get(v)
            if e is None:
                continue
            prims.append(e.primitive.name)
            fn = base_name(api_spelling(eqn_site(e))) or eqn_function(e)
            fns.append(fn)
            nxt.extend(w for w in e.invars if not isinstance(w, jcore.Literal))
        frontier = nxt
    return prims, fns


def _exponent(eqn: Any, values: Sequence[Any]) -> Optional[float]:
    if eqn is None:
        return None
    if eqn.primitive.name == "integer_pow":
        return float(eqn.params.get("y"))
    if eqn.primitive.name in ("pow",) and len(values) == 2 and np.size(values[1]) == 1:
        return float(np.asarray(values[1]).reshape(()))
    if eqn.primitive.name == "rsqrt":
        return -0.5
    if eqn.primitive.name == "sqrt":
        return 0.5
    return None


def build(outcome: Outcome, step: Optional[int] = None, program: str = "",
          call_site: Optional[Site] = None) -> Optional[Report]:
    """The report of a replay's finding; None when the replay found nothing to blame."""
    event = outcome.event or outcome.input_use
    if event is None:
        return None
    phase = "input" if outcome.event is None else "backward" if is_backward(event) else "forward"
    # an equation written inside a library (jnp.log is a jitted function) has no user frame of
    # its own: the user's line is where the program was called
    site = _site(event) or call_site
    api = api_spelling(site)
    fn = base_name(api)
    prim = event.eqn.primitive.name
    fwd, fwd_env = _forward(event, site) if phase == "backward" else (None, {})
    if fn is None:
        fn = eqn_function(fwd) if fwd is not None else prim
    inputs, scalars = _args(event.inputs, "input")
    fwd_values = _values(fwd, fwd_env) if fwd is not None else []
    fwd_inputs, _ = _args(fwd_values, "forward input") if fwd is not None else ([], [])
    outputs = [summarize(o, "out" if len(event.outputs) == 1 else f"out{i}", "output")
               for i, o in enumerate(event.outputs) if hasattr(o, "shape")]
    producers = _producers(fwd if fwd is not None else event.eqn, event.scope)
    facts = Facts(phase=phase, kind=event.kind, fn=fn, primitive=prim, inputs=inputs, forward_inputs=fwd_inputs,
                  scalars=[s.value for s in scalars], outputs=outputs,
                  producers=producers[0] + producers[1],
                  exponent=_exponent(fwd if fwd is not None else event.eqn,
                                     fwd_values if fwd is not None else event.inputs))
    if phase == "input":
        facts.kind = "nan"
    explanation, suggestion = words(diagnose(facts))
    frame = site.frame if site is not None else None
    notes = []
    if event.scope.iteration is not None:
        notes.append(f"in iteration {event.scope.iteration} of a loop (scan/while) body")
    if program:
        notes.append(f"found by replaying {program} equation by equation")
    return build_report(
        framework="jax", phase=phase, kind=facts.kind, op=prim, fn=fn, node=event.name_stack or None, api=api or "",
        forward_op=fn if phase == "backward" else None, where=frame,
        inputs=[s for s, _ in inputs], outputs=outputs, forward_inputs=[s for s, _ in fwd_inputs],
        scalars=scalars, step=step, explanation=explanation, suggestion=suggestion,
        stack=[s.frame for s in traceback_sites(event.eqn.source_info.traceback)], how="replay", notes=notes)


def summaries(values: Sequence[Any], role: str) -> List[TensorSummary]:
    return [summarize(v, n, role) for n, v in zip(operand_names(len(values)), values) if hasattr(v, "shape")]


__all__ = ["build", "operand_names", "summaries"]
