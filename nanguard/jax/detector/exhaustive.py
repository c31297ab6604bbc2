"""``exhaustive=True``: every equation is checked, also when the outputs come out finite.

A value made non-finite and then discarded (a ``where`` branch not taken, a masked entry)
never reaches a call's outputs, so the output check cannot see it. Here the call's jaxpr is
re-staged with, after each equation, the rule of `nanguard.core.nonfinite` (`made_masks`: "NaN
where no input held NaN, ±Inf where every input was finite") as a few fused reductions, OR-ed
into one flag, and the result is compiled once per function and argument signature. A raised
flag sends the call to the replay, which then names the first such equation. ``jit`` and
custom-derivative bodies are inlined; loop and branch bodies are judged by their outputs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import jax
import jax.numpy as jnp
from jax.extend import core as jcore

from nanguard.core.nonfinite import Logic, made_masks
from nanguard.jax.detector.replay import _sub_jaxpr
from nanguard.jax.detector.values import is_float


# the rule of `nanguard.core.nonfinite`, over traced booleans
_LOGIC: Logic[Any] = Logic(and_=lambda a, b: a & b, not_=lambda a: ~a, false=lambda: jnp.zeros((), bool))


def _special(x: Any) -> Tuple[Any, Any]:
    """(holds NaN, holds ±Inf) of one value, as traced booleans; (False, False) if not float."""
    if not is_float(x):
        return False, False
    return jnp.isnan(x).any(), jnp.isinf(x).any()


def _any(flags: Any) -> Any:
    out: Any = jnp.zeros((), bool)
    for f in flags:
        out = out | f
    return out


def _eval(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], check: frozenset,
          arg_flags: Sequence[Tuple[Any, Any]] = ()) -> Tuple[List[Any], Any, List[Tuple[Any, Any]]]:
    """(outputs, "an equation made NaN/Inf", each output's (NaN, Inf) flags). Each value is
    reduced once, where it is made; its consumers reuse its flags."""
    env: Dict[Any, Any] = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    special: Dict[Any, Tuple[Any, Any]] = {v: _special(c) for v, c in zip(jaxpr.constvars, consts)}
    given = list(arg_flags) or [_special(a) for a in args]
    special.update(zip(jaxpr.invars, given))

    def read(v: Any) -> Any:
        return v.val if isinstance(v, jcore.Literal) else env[v]

    def flags(v: Any) -> Tuple[Any, Any]:
        return _special(v.val) if isinstance(v, jcore.Literal) else special[v]

    made: Any = False
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        in_flags = [flags(v) for v in eqn.invars]
        body = _sub_jaxpr(eqn)
        if body is not None:
            outs, inner, out_flags = _eval(body[0], body[1], invals, check, in_flags)
            made = made | inner
        else:
            bind_params = eqn.primitive.get_bind_params(eqn.params)
            subfuns, params = bind_params if isinstance(bind_params, tuple) else ((), bind_params)
            with eqn.ctx.manager:
                ans = eqn.primitive.bind(*subfuns, *invals, **params)
            outs = list(ans) if eqn.primitive.multiple_results else [ans]
            out_flags = [_special(o) for o in outs]
            in_nan = _any(f[0] for f in in_flags)
            in_finite = ~(in_nan | _any(f[1] for f in in_flags))
            nan_made, inf_made = made_masks(_any(f[0] for f in out_flags), _any(f[1] for f in out_flags), in_nan,
                                            in_finite, _LOGIC, check)
            made = made | nan_made | inf_made
        for v, val, f in zip(eqn.outvars, outs, out_flags):
            if not isinstance(v, jcore.DropVar):
                env[v], special[v] = val, f
    return [read(v) for v in jaxpr.outvars], made, [flags(v) for v in jaxpr.outvars]


class Checker:
    """Compiled "was any equation's output made non-finite?" functions, one per signature."""

    def __init__(self, check: frozenset) -> None:
        self.check = check
        self._compiled: Dict[Any, Any] = {}

    def any_made(self, fun: Any, args: tuple, kwargs: dict, trace: Any) -> bool:
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        dynamic = [x for x in leaves if isinstance(x, jax.Array)]
        fixed = tuple(x if _hashable(x) else id(x) for x in leaves if not isinstance(x, jax.Array))
        key = (id(fun), tree, tuple((x.shape, str(x.dtype)) for x in dynamic), fixed)
        compiled = self._compiled.get(key)
        if compiled is None:
            closed, _ = trace(fun, args, kwargs)
            check = self.check
            compiled = jax.jit(lambda *values: _eval(closed.jaxpr, closed.consts, values, check)[1])
            self._compiled[key] = compiled
        _, values = _split(leaves)
        return bool(compiled(*values))


def _split(leaves: Sequence[Any]) -> Tuple[List[Any], List[Any]]:
    import numpy as np
    arrays = (jax.Array, np.ndarray, np.generic)
    return [x for x in leaves if not isinstance(x, arrays)], [x for x in leaves if isinstance(x, arrays)]


def _hashable(x: Any) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


__all__ = ["Checker"]
