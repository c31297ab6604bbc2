"""Forward or backward: which equations of a differentiated program belong to the gradient.

A jaxpr of ``value_and_grad`` (or of a train step that calls it) holds three kinds of
equations, all carrying the *forward* line in their ``source_info``:

* the primal computation (name stack ``jvp(...)`` or none);
* the derivatives' residuals, computed with the primal values by each op's JVP rule
  (``div(0.5, sqrt(x))`` for sqrt) — also named ``jvp(...)``, yet part of the gradient;
* the transposed (cotangent) equations, named ``transpose(jvp(...))``.

JAX's names alone cannot tell the first two apart; the data flow can: a residual is consumed
only by gradient equations, while a primal value reaches the function's outputs or more
primal equations. `is_backward` applies that rule, scope by scope from the top-level jaxpr
down to the equation's own (through ``jit`` and loop bodies).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from jax.extend import core as jcore

from nanguard.jax.detector.frames import Site, eqn_site
from nanguard.jax.detector.replay import Event, Scope, join_stack


def _backward_eqns(jaxpr: Any, out_backward: List[bool], prefix: str, inherited: bool) -> List[bool]:
    """Per equation of ``jaxpr``: part of the gradient. ``out_backward[i]`` says whether the
    scope's i-th output is (known from the enclosing scope)."""
    n = len(jaxpr.eqns)
    if inherited:
        return [True] * n
    outs: Dict[Any, bool] = {}
    for v, b in zip(jaxpr.outvars, out_backward):
        if not isinstance(v, jcore.Literal):
            outs[v] = outs.get(v, True) and b
    users: Dict[Any, List[int]] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                users.setdefault(v, []).append(i)
    flags = [False] * n

    def var_backward(v: Any) -> bool:
        used = users.get(v, [])
        if v in outs and not outs[v]:
            return False
        if not used and v not in outs:
            return False          # dead primal code (the loss of jax.grad) is forward
        return all(flags[u] for u in used)

    for i in range(n - 1, -1, -1):
        eqn = jaxpr.eqns[i]
        stack = join_stack(prefix, str(eqn.source_info.name_stack))
        live = [v for v in eqn.outvars if not isinstance(v, jcore.DropVar)]
        flags[i] = "transpose" in stack or (bool(live) and all(var_backward(v) for v in live))
    return flags


def _chain(scope: Scope) -> List[Scope]:
    chain = []
    s: Optional[Scope] = scope
    while s is not None:
        chain.append(s)
        s = s.parent
    return chain[::-1]


def scope_flags(scope: Scope) -> List[bool]:
    """The backward flag of every equation of ``scope``'s jaxpr."""
    chain = _chain(scope)
    flags = _backward_eqns(chain[0].jaxpr, [False] * len(chain[0].jaxpr.outvars), chain[0].prefix, False)
    for parent, child in zip(chain, chain[1:]):
        eqn = child.parent_eqn
        index = _index(parent.jaxpr, eqn)
        inherited = flags[index] if index is not None else False
        outs_backward = _outvar_flags(parent.jaxpr, flags, eqn)
        inner_outs = child.jaxpr.outvars
        if len(outs_backward) != len(inner_outs):
            # a loop body: carries and stacked outputs follow the equation's outputs in order
            outs_backward = (outs_backward + [False] * len(inner_outs))[:len(inner_outs)]
        flags = _backward_eqns(child.jaxpr, outs_backward, child.prefix, inherited)
    return flags


def _index(jaxpr: Any, eqn: Any) -> Optional[int]:
    for i, e in enumerate(jaxpr.eqns):
        if e is eqn:
            return i
    return None


def _outvar_flags(jaxpr: Any, flags: List[bool], eqn: Any) -> List[bool]:
    users: Dict[Any, List[int]] = {}
    for i, e in enumerate(jaxpr.eqns):
        for v in e.invars:
            if not isinstance(v, jcore.Literal):
                users.setdefault(v, []).append(i)
    outs = {v for v in jaxpr.outvars if not isinstance(v, jcore.Literal)}
    result = []
    for v in eqn.outvars:
        used = users.get(v, [])
        result.append(bool(used) and v not in outs and all(flags[u] for u in used))
    return result


def is_backward(event: Event) -> bool:
    """The event's equation belongs to the gradient computation."""
    stack = event.name_stack
    if "transpose" in stack:
        return True
    if "jvp" not in stack and not _under_jvp(event.scope):
        return False
    index = _index(event.scope.jaxpr, event.eqn)
    return bool(index is not None and scope_flags(event.scope)[index])


def _under_jvp(scope: Scope) -> bool:
    s: Optional[Scope] = scope
    while s is not None:
        if s.parent_eqn is not None and "jvp" in str(s.parent_eqn.source_info.name_stack):
            return True
        s = s.parent
    return False


def forward_eqn(event: Event, site: Optional[Site]) -> Optional[Any]:
    """The primal equation a backward event derives from: the first forward equation of the
    event's scope written at the same expression (``sqrt`` for sqrt's ``div`` residual)."""
    if site is None:
        return None
    flags = scope_flags(event.scope)
    inherited = enclosing_site(event.scope)
    for eqn, backward in zip(event.scope.jaxpr.eqns, flags):
        if backward:
            continue
        other = eqn_site(eqn) or inherited
        if other is not None and other.key == site.key:
            return eqn
    return None


def enclosing_site(scope: Scope) -> Optional[Site]:
    """The user frame of the nearest enclosing equation that has one: the equations inside a
    library's jitted function (``jnp.linalg.norm``) carry no user frame of their own."""
    while scope is not None and scope.parent_eqn is not None:
        site = eqn_site(scope.parent_eqn)
        if site is not None:
            return site
        scope = scope.parent
    return None


def eqn_function(eqn: Any) -> str:
    """The name a user knows an equation by: a jit's or custom rule's function name, else the
    primitive's."""
    name = eqn.primitive.name
    if name in ("jit", "pjit"):
        return str(eqn.params.get("name", name))
    for key in ("call_jaxpr", "fun_jaxpr"):
        body = eqn.params.get(key)
        info = getattr(getattr(body, "jaxpr", body), "debug_info", None)
        if info is not None and getattr(info, "func_name", None):
            return str(info.func_name)
    return name


__all__ = ["enclosing_site", "eqn_function", "forward_eqn", "is_backward", "scope_flags"]
