"""Demo section "jax_stories": the JAX FAQ's double-where story, replayed in JAX.

Runs only where JAX is installed; elsewhere it prints one line saying how to get it
(``pip install 'nanguard[jax]'``) and the demo goes on. ``jnp.where(x > 0, jnp.sqrt(x), 0.)``
has the right value and a NaN gradient at 0; the story program in ``nanguard.stories``
(``jax_sqrt_where_nan`` / ``_fixed``) trains on it, ``nanguard.jax.detect`` names the first
NaN-producing primitive at the story's own line (backward phase), the double where fixes it,
and ``nanguard.jax.guarded`` skips the NaN optax step of the naive program.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import textwrap
from typing import Any, Callable, List, Tuple

import nanguard.stories
from nanguard.demo import Show, installed

HINT = "JAX story (the double where) skipped: JAX is not installed; pip install 'nanguard[jax]'"
STORY = nanguard.stories.get("jax_sqrt_where")


def _fmt(values: Any) -> str:
    flat = [float(v) + 0.0 for v in values.reshape(-1).tolist()]  # + 0.0 prints -0.0 as 0
    return "[" + ", ".join("nan" if v != v else f"{v:.6g}" for v in flat) + "]"


def _quietly(fn: Callable[[], Any]) -> Tuple[Any, List[str], Any]:
    """Run a story's main(): its result, the lines it printed, and the error it raised (or None)."""
    out = io.StringIO()
    result, error = None, None
    with contextlib.redirect_stdout(out):
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001  (the story's own failure is what we show)
            error = exc
    return result, out.getvalue().splitlines(), error


def _steps(show: Show, lines: List[str]) -> None:
    """The story's own lines, 'step 1: loss 0.0627  w [1.1000, 0.9000]'."""
    for line in lines:
        if line.startswith("step"):
            show.note(line)


def _show_line(show: Show, text: str, version: str = "nan") -> None:
    n = STORY.line(text, version)
    show.code(f"{n:3} │ {STORY.source(version).splitlines()[n - 1].strip()}")


def run(show: Show) -> None:
    if not installed("jax"):
        show.skip(HINT)
        return
    try:
        jax = importlib.import_module("jax")
        jnp = importlib.import_module("jax.numpy")
        ngj = importlib.import_module("nanguard.jax")
    except ImportError as error:  # installed but broken: say so in one line and go on
        show.skip(f"{HINT.split(':')[0]}: JAX does not import ({error}); pip install 'nanguard[jax]'")
        return
    show.title("JAX: the double where")

    show.story("jnp.where(x > 0, jnp.sqrt(x), 0.) has the right value and a NaN gradient at 0")
    x = jnp.array([0.0, 1.0, 4.0])
    single = jax.grad(lambda v: jnp.sum(jnp.where(v > 0, jnp.sqrt(v), 0.0)))(x)
    show.bad("jax.grad at x = [0, 1, 4]", f"{_fmt(single)}  (sqrt' = inf at 0, times the where's 0)")

    show.story("A training loop on it: a padding row of zeros, and every weight turns NaN")
    _show_line(show, "length = jnp.where(sq > 0, jnp.sqrt(sq), 0.0)")
    module = importlib.import_module(STORY.module("nan"))
    _, lines, _ = _quietly(lambda: module.main(3))
    show.bad(f"python -m {STORY.module('nan')}", "the weights are NaN after the second batch")
    _steps(show, lines)

    show.code("with nanguard.jax.detect(check='nan'): main()")
    with ngj.detect(mode="record", check="nan") as found:
        _quietly(lambda: module.main(3))
    report = found.report
    if report is not None:
        show.good("nanguard.jax.detect", f"{report.headline} ({report.what}, primitive {report.op} in "
                                         f"{report.node}) at {os.path.basename(report.file or '?')}:{report.line}")
        show.note(f"{report.line} │ {(report.code or '').strip()}")
        for n, text in enumerate(textwrap.wrap(report.explanation, 84)):
            show.note(("why " if n == 0 else "    ") + text)
    else:
        show.bad("nanguard.jax.detect", "no report")

    show.story("The fix: the double where (the inner one keeps sqrt away from 0)")
    show.code("jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)")
    double = jax.grad(lambda v: jnp.sum(jnp.where(v > 0, jnp.sqrt(jnp.where(v > 0, v, 1.0)), 0.0)))(x)
    show.good("jax.grad at x = [0, 1, 4]", f"{_fmt(double)}  (finite; 0 at 0)")
    fixed = importlib.import_module(STORY.module("fixed"))
    _show_line(show, "length = jnp.where(sq > 0, jnp.sqrt(jnp.where(", "fixed")
    with ngj.detect(mode="record") as clean:
        _, lines, error = _quietly(lambda: fixed.main(3))
    if clean.report is None and error is None:
        show.good(f"python -m {STORY.module('fixed')}", "finite at every step; detect() found nothing")
    else:
        show.bad(f"python -m {STORY.module('fixed')}", f"failed: {error or clean.report.headline}")
    _steps(show, lines)
    show.note("nanguard.jax.safe_where(x > 0, jnp.sqrt, x) writes the two wheres for you.")

    if not installed("optax"):
        show.skip("the optax guard skipped: optax is not installed; pip install 'nanguard[jax]'")
        return
    optax = importlib.import_module("optax")
    show.story("Or keep the naive loss and guard the optax step")
    show.code("optimizer = nanguard.jax.guarded(optax.adam(0.1))   # skip a step with NaN/Inf gradients")
    result, lines, error = _quietly(lambda: module.main(3, optimizer=ngj.guarded(optax.adam(0.1))))
    if error is None:
        records = ngj.guard_records(result[1])
        if records.events:
            show.good("the naive program, guarded", records.events[0].describe())
        else:
            show.bad("the naive program, guarded", "no step was skipped")
        _steps(show, lines)
    else:
        show.bad("the naive program, guarded", str(error))
