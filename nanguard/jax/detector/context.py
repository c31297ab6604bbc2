"""`nanguard.jax.detect()`: the public context manager / decorator and its options.

How it works lives next door: `hooks` (the seam in JAX's dispatch that sees every executed
computation), `session` (what a detection does with each: one cheap output check, and the
replay only after a finding), `replay` (equation by equation), `phase` (forward or
backward), `why` (the hazard), `build` (the report), `eager` (ops outside ``jit``).

Why the dispatch hook rather than a wrapped ``jax.jit``: it needs no change to the program
(``nanguard run`` wraps a whole script), it sees jitted functions compiled before detection
began and eager ops alike, and it costs one fused reduction per executed computation. The
price of a precise answer, a replay of a few hundred times a step, is paid once, after a
non-finite output. ``exhaustive`` adds `exhaustive`'s compiled per-equation check.
"""

from __future__ import annotations

from typing import Any, Iterable, Union

from nanguard.core.detect_api import DetectBase
from nanguard.core.options import Check, Kind, Mode, parse_check, parse_exhaustive, parse_mode
from nanguard.core.report import NonFiniteWarning
from nanguard.jax.detector import hooks
from nanguard.jax.detector.session import Session


class detect(DetectBase):
    """Raise at the first JAX primitive, forward or backward, that turns finite values into
    NaN or ±Inf, naming your line, the phase, the inputs and a fix.

    Use it as a context manager around any JAX code, or as a decorator on a function (jitted
    or not). Every computation JAX executes while it is active is checked at its outputs:
    one fused reduction per call, about 1.0x a jitted training step. When an output is
    non-finite, the call is replayed equation by equation (its jaxpr, recursing into
    ``jit``, ``custom_jvp``/``custom_vjp``, ``scan``, ``cond`` and ``while``) to find the
    first primitive that made it, with the user line from the equation's ``source_info``.
    Equations of the gradient (JVP residuals and transposed equations) are reported as
    ``phase="backward"`` at the forward line they differentiate. Numerics are untouched.

    Args:
        check: which values count: ``"nan"``, ``"inf"``, or ``"both"`` (default; ``"all"`` is the same).
        mode: ``"raise"`` (default) raises ``nanguard.NonFiniteError`` (a
            ``FloatingPointError``) carrying ``.report``; ``"warn"`` issues a
            ``NonFiniteWarning`` and goes on; ``"record"`` keeps the first report on
            ``.report`` and goes on. After the first finding, checking stops.
        exhaustive: check every equation of every executed computation, also when its
            outputs come out finite: each jitted function is also run once more, compiled
            with the per-equation rule (about 2x a step); it finds a value made non-finite
            and then discarded (a ``where`` branch not taken, a masked entry), and the replay
            names the first such equation.

    Deliberate infinities are not reported: ``jnp.where(mask, x, -jnp.inf)`` followed by a
    softmax with a kept entry per row comes out finite and is never checked further; a
    non-finite output whose replay finds only infinities that flowed in (a ``-inf``
    constant) is not reported either. NaN that an argument already held is reported with
    phase ``"input"`` at the first equation that consumed it.

    Example:
        >>> @jax.jit
        ... def loss(x):
        ...     return jnp.where(x > 0, jnp.sqrt(x), 0.0).sum()
        >>> with nanguard.jax.detect():
        ...     jax.jit(jax.grad(loss))(jnp.zeros(3))
        Traceback (most recent call last):
        nanguard.errors.NonFiniteError: nanguard: first non-finite value (+Inf) — backward of sqrt ...
        >>> with nanguard.jax.detect(mode="record") as d:
        ...     jnp.log(jnp.zeros(2))
        >>> d.report.phase, d.report.op, d.report.kind
        ('forward', 'log', 'inf')

    Detection covers the thread that entered it. Inside a function being traced (under an
    outer ``jit``) nothing executes, so entering it there checks nothing: put it around the
    call of the jitted function, or decorate that function.
    """

    API = "nanguard.jax.detect"

    def __init__(self, *, check: Union[Check, Iterable[Kind]] = "both", mode: Mode = "raise",
                 exhaustive: bool = False) -> None:
        self._session = Session(check=parse_check(check, self.API), mode=parse_mode(mode, self.API),
                                exhaustive=parse_exhaustive(exhaustive, self.API))

    def __enter__(self) -> "detect":
        self._session.open()
        hooks.push(self._session.observe)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            hooks.pop(self._session.observe)
        finally:
            self._session.close()
        return False


__all__ = ["NonFiniteWarning", "detect"]
