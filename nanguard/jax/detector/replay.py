"""The replay: evaluate a program's jaxpr equation by equation, checking every output.

It runs only after a cheap check saw a non-finite output (it costs a few hundred times a
jitted step). Each equation is bound eagerly, so every intermediate value is at hand; the
interpreter recurses into ``jit``, ``custom_jvp``/``custom_vjp``, ``checkpoint``, ``scan``,
``cond`` and ``while`` bodies, so the equation it names is a primitive the user can find.

Which equation is to blame follows one rule per value, `nanguard.core.nonfinite.made` (the
torch and TensorFlow detectors' rule): an equation *made* NaN where no input held NaN, and
*made* ±Inf where every input was finite (not by rounding a ``finfo(dtype).min`` mask).
Each non-finite value remembers its origin, the equation that made it (``INPUT`` when it
came in through the arguments, None for deliberate infinities such as a ``-inf`` mask
constant). The finding is the earliest origin of a non-finite *output*, so a NaN made and
then discarded (a ``where`` branch that is not taken) is not blamed unless ``exhaustive``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
from jax.extend import core as jcore

from nanguard.core.nonfinite import INF, NAN, Flags, made
from nanguard.jax.detector.values import flags_of, rounded

INPUT = "input"                      # origin marker: the value came in through the arguments
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                    "custom_vjp_call_jaxpr", "checkpoint", "remat", "remat2", "custom_lin"})


@dataclass(eq=False)
class Scope:
    """One jaxpr being evaluated: its values, their origins and where it sits."""

    jaxpr: Any
    parent: Optional["Scope"]
    parent_eqn: Any
    prefix: str                               # name stack of the enclosing equations
    env: Dict[Any, Any] = field(default_factory=dict)
    origin: Dict[Any, Any] = field(default_factory=dict)
    iteration: Optional[int] = None           # the loop step, inside scan/while bodies


@dataclass(eq=False)
class Event:
    """An equation that made a non-finite value from values that were not."""

    order: int
    kind: str
    eqn: Any
    scope: Scope
    inputs: List[Any]
    outputs: List[Any]

    @property
    def name_stack(self) -> str:
        return join_stack(self.scope.prefix, str(self.eqn.source_info.name_stack))


@dataclass
class Outcome:
    """What a replay found: the blamed event (None when nothing was made inside), or the first
    equation that consumed a NaN argument (``input_use``), and whether outputs were non-finite."""

    event: Optional[Event]
    input_use: Optional[Event]
    outputs_bad: bool


def join_stack(prefix: str, inner: str) -> str:
    return "/".join(p for p in (prefix, inner) if p)


def _earliest(origins: Sequence[Any]) -> Any:
    events = [o for o in origins if isinstance(o, Event)]
    if events:
        return min(events, key=lambda e: e.order)
    return INPUT if INPUT in origins else None


def _sub_jaxpr(eqn: Any) -> Optional[Tuple[Any, Sequence[Any]]]:
    """(jaxpr, consts) of a call-like equation whose body takes the equation's own operands."""
    if eqn.primitive.name not in _CALLS:
        return None
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        body = eqn.params.get(name)
        if body is None:
            continue
        jaxpr, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, ())
        if len(jaxpr.invars) == len(eqn.invars) and len(jaxpr.outvars) == len(eqn.outvars):
            return jaxpr, consts
    return None


@functools.lru_cache(maxsize=4096)
def _compiled(primitive: Any, params: tuple) -> Any:
    kwargs = dict(params)
    return jax.jit(lambda *args: primitive.bind(*args, **kwargs))


def execute(eqn: Any, invals: Sequence[Any]) -> Any:
    """Run one equation on concrete values, as JAX's eager dispatch does (one compiled
    primitive), but through our own cache: an eager op that is finishing its own first call
    may be the one being replayed, and JAX refuses to re-enter that call."""
    bind_params = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = bind_params if isinstance(bind_params, tuple) else ((), bind_params)
    if not subfuns and not eqn.effects:
        try:
            key = tuple(sorted(params.items()))
            hash(key)
        except TypeError:
            key = None
        if key is not None:
            try:
                return _compiled(eqn.primitive, key)(*invals)
            except Exception:  # noqa: BLE001  (a primitive that cannot be compiled alone: bind it)
                pass
    return eqn.primitive.bind(*subfuns, *invals, **params)


class Replay:
    """One replay of one program; ``run`` returns its `Outcome`."""

    def __init__(self, check: frozenset, exhaustive: bool = False) -> None:
        self.check = check
        self.exhaustive = exhaustive
        self.events: List[Event] = []
        self.input_use: Optional[Event] = None
        self._order = 0

    # ------------------------------------------------------------------ entry point
    def run(self, closed: Any, args: Sequence[Any]) -> Outcome:
        jaxpr, consts = closed.jaxpr, closed.consts
        # NaN already in an argument or a captured constant came from outside; an infinity
        # there is deliberate (a mask) until an equation turns it into NaN
        arg_origins = [INPUT if flags_of(a)[0] else None for a in args]
        const_origins = [INPUT if flags_of(c)[0] else None for c in consts]
        outs, origins = self._eval(jaxpr, consts, const_origins, args, arg_origins, None, None, "")
        bad = [o for o, v in zip(origins, outs) if any(flags_of(v))]
        blamed = _earliest([o for o in bad if not isinstance(o, Event) or o.kind in self.check])
        if self.exhaustive and self.events:
            blamed = self.events[0]
        event = blamed if isinstance(blamed, Event) else None
        use = self.input_use if blamed == INPUT or (event is None and self.input_use is not None) else None
        return Outcome(event=event, input_use=use, outputs_bad=bool(bad))

    # ------------------------------------------------------------------ interpreter
    def _eval(self, jaxpr: Any, consts: Sequence[Any], const_origins: Sequence[Any], args: Sequence[Any],
              arg_origins: Sequence[Any], parent: Optional[Scope], parent_eqn: Any, prefix: str,
              iteration: Optional[int] = None) -> Tuple[List[Any], List[Any]]:
        scope = Scope(jaxpr, parent, parent_eqn, prefix, iteration=iteration)
        env, origin = scope.env, scope.origin
        for v, val, o in zip(jaxpr.constvars, consts, const_origins):
            env[v], origin[v] = val, o
        for v, val, o in zip(jaxpr.invars, args, arg_origins):
            env[v], origin[v] = val, o

        def read(v: Any) -> Any:
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            in_origins = [None if isinstance(v, jcore.Literal) else origin.get(v) for v in eqn.invars]
            outs, out_origins = self._eqn(eqn, scope, invals, in_origins)
            for v, val, o in zip(eqn.outvars, outs, out_origins):
                if not isinstance(v, jcore.DropVar):
                    env[v], origin[v] = val, o
        outvals = [read(v) for v in jaxpr.outvars]
        outorigins = [None if isinstance(v, jcore.Literal) else origin.get(v) for v in jaxpr.outvars]
        return outvals, outorigins

    def _eqn(self, eqn: Any, scope: Scope, invals: List[Any], in_origins: List[Any]) -> Tuple[List[Any], List[Any]]:
        stack = join_stack(scope.prefix, str(eqn.source_info.name_stack))
        name = eqn.primitive.name
        body = _sub_jaxpr(eqn)
        if body is not None:
            label = eqn.params.get("name", name) if name in ("jit", "pjit") else name
            return self._eval(body[0], body[1], [None] * len(body[1]), invals, in_origins, scope, eqn,
                              join_stack(stack, str(label)), scope.iteration)
        if name == "scan" and eqn.params.get("length", 0) > 0:
            return self._scan(eqn, scope, invals, in_origins, stack)
        if name == "cond":
            branches = eqn.params["branches"]
            index = min(max(int(invals[0]), 0), len(branches) - 1)
            branch = branches[index]
            return self._eval(branch.jaxpr, branch.consts, [None] * len(branch.consts), invals[1:], in_origins[1:],
                              scope, eqn, join_stack(stack, f"cond[{index}]"), scope.iteration)
        if name == "while":
            return self._while(eqn, scope, invals, in_origins, stack)
        return self._primitive(eqn, scope, invals, in_origins)

    def _primitive(self, eqn: Any, scope: Scope, invals: List[Any], in_origins: List[Any]) -> Tuple[List[Any], List[Any]]:
        with eqn.ctx.manager:
            ans = execute(eqn, invals)
        outs = list(ans) if eqn.primitive.multiple_results else [ans]
        return outs, self._judge(eqn, scope, invals, in_origins, outs)

    # ------------------------------------------------------------------ the rule
    def _judge(self, eqn: Any, scope: Scope, invals: List[Any], in_origins: List[Any],
               outs: List[Any]) -> List[Any]:
        in_flags = [flags_of(v) for v in invals]
        nan_in = [o for o, f in zip(in_origins, in_flags) if f[0]]
        inf_in = [o for o, f in zip(in_origins, in_flags) if f[1] and not f[0]]
        if self.input_use is None and INPUT in nan_in and NAN in self.check:
            self.input_use = Event(-1, NAN, eqn, scope, invals, outs)
        ours: List[Event] = []                    # this equation's event, made once

        def make(kind: str) -> Event:
            if not ours:
                ours.append(Event(self._order, kind, eqn, scope, invals, outs))
                self._order += 1
                self.events.append(ours[0])
            return ours[0]

        origins: List[Any] = []
        for out in outs:
            nan, inf = flags_of(out)
            if not (nan or inf):
                origins.append(None)
                continue
            in_finite = not (nan_in or inf_in)
            flags = Flags(out_nan=nan, out_inf=inf, in_nan=bool(nan_in), in_finite=in_finite,
                          rounded_extreme=inf and in_finite and rounded(invals, [out]))
            verdict = made(flags, self.check)
            if verdict is None:                       # a kind not checked, inherited, or deliberate
                origins.append(_earliest(nan_in + inf_in))
            elif verdict.origin == "input":
                origins.append(_earliest(nan_in))
            elif verdict.kind == NAN and INF in self.check and isinstance(_earliest(inf_in), Event):
                origins.append(_earliest(inf_in))     # 0·inf: blame the inf's maker
            else:
                origins.append(make(verdict.kind))
        return origins

    # ------------------------------------------------------------------ loops
    def _scan(self, eqn: Any, scope: Scope, invals: List[Any], in_origins: List[Any],
              stack: str) -> Tuple[List[Any], List[Any]]:
        p = eqn.params
        body, nc, nk, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
        consts, carry, xs = invals[:nc], invals[nc:nc + nk], invals[nc + nk:]
        c_o, k_o, x_o = in_origins[:nc], in_origins[nc:nc + nk], in_origins[nc + nk:]
        steps = range(length - 1, -1, -1) if p["reverse"] else range(length)
        ys: List[List[Any]] = []
        y_origins: List[List[Any]] = []
        for step in steps:
            x_step = [x[step] for x in xs]
            outs, origins = self._eval(body.jaxpr, body.consts, [None] * len(body.consts),
                                       [*consts, *carry, *x_step], [*c_o, *k_o, *x_o], scope, eqn,
                                       join_stack(stack, "scan"), step)
            carry, k_o = outs[:nk], origins[:nk]
            if not ys:
                ys = [[None] * length for _ in outs[nk:]]
                y_origins = [[] for _ in outs[nk:]]
            for j, (y, o) in enumerate(zip(outs[nk:], origins[nk:])):
                ys[j][step] = y
                y_origins[j].append(o)
        stacked = [jnp.stack([jnp.asarray(y) for y in column]) for column in ys]
        return [*carry, *stacked], [*k_o, *(_earliest(o) for o in y_origins)]

    def _while(self, eqn: Any, scope: Scope, invals: List[Any], in_origins: List[Any],
               stack: str) -> Tuple[List[Any], List[Any]]:
        p = eqn.params
        cond, body, cn, bn = p["cond_jaxpr"], p["body_jaxpr"], p["cond_nconsts"], p["body_nconsts"]
        c_consts, b_consts, carry = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]
        b_o, k_o = in_origins[cn:cn + bn], in_origins[cn + bn:]
        step = 0
        while bool(jcore.jaxpr_as_fun(cond)(*c_consts, *carry)[0]):
            carry, k_o = self._eval(body.jaxpr, body.consts, [None] * len(body.consts), [*b_consts, *carry],
                                    [*b_o, *k_o], scope, eqn, join_stack(stack, "while"), step)
            step += 1
        return list(carry), list(k_o)


__all__ = ["INPUT", "Event", "Outcome", "Replay", "Scope", "join_stack"]
