"""The demo's JAX section and its story program (the double where, nanguard.stories).

Run plainly, the naive program's weights turn NaN at the padding batch; under
``nanguard.jax.detect`` the report names the story's where/sqrt line, backward phase; the
double where trains clean; ``nanguard.jax.guarded`` skips exactly the bad step. The section
prints those numbers and lines (expected values come from the story file, not the printout).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import subprocess
import sys

import jax.numpy as jnp
import optax
import pytest

import nanguard.jax as ngj
import nanguard.stories
from nanguard.demo import Show

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORY = nanguard.stories.get("jax_sqrt_where")
LINE = STORY.line("length = jnp.where(sq > 0, jnp.sqrt(sq), 0.0)")


def _main(version, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = importlib.import_module(STORY.module(version)).main(*args, **kwargs)
    return result, out.getvalue()


@pytest.fixture(scope="module")
def section_text() -> str:
    from nanguard.demo import jax_stories
    out = io.StringIO()
    jax_stories.run(Show(out))
    return out.getvalue()


def test_story_goes_nan_at_the_padding_batch_and_detect_names_the_where_line():
    assert STORY.framework == "jax"
    (loss, _), printed = _main("nan", 3)
    assert "step 1: loss 0.0627  w [1.1000, 0.9000]" in printed
    assert "step 2: loss 0.0009  w [nan, nan]" in printed
    assert "step 3: loss 5.6250  w [nan, nan]" in printed and loss == 5.625   # where(nan > 0) hides it
    with ngj.detect(mode="record", check="nan") as d:
        _main("nan", 3)
    r = d.report
    assert (r.file, r.line, r.phase, r.kind, r.op) == (str(STORY.path("nan")), LINE, "backward", "nan", "mul")
    assert r.forward_op == "sqrt" and "transpose" in r.node and r.function == "loss_fn"


def test_double_where_story_trains_clean_and_guard_skips_the_bad_step():
    with ngj.detect() as d:
        (loss, _), printed = _main("fixed", 3)
    assert d.report is None and math.isfinite(loss) and "nan" not in printed
    (loss, state), printed = _main("nan", 3, optimizer=ngj.guarded(optax.adam(0.1)))
    records = ngj.guard_records(state)
    assert records.bad_steps == [2] and records.skipped == 1 and math.isfinite(loss)
    assert "step 2: loss 0.0009  w [1.1000, 0.9000]" in printed   # the skipped step left w as it was


def test_section_prints_nan_then_the_finite_gradient_and_the_line(section_text):
    text = section_text
    assert "JAX: the double where" in text
    assert "✗ jax.grad at x = [0, 1, 4]: [nan, 0.5, 0.25]" in text
    assert "✓ jax.grad at x = [0, 1, 4]: [0, 0.5, 0.25]" in text
    assert "jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)" in text
    assert (f"nanguard.jax.detect: backward of sqrt (NaN, primitive mul in transpose(jvp())) at "
            f"jax_sqrt_where_nan.py:{LINE}") in text
    assert f"{LINE} │ length = jnp.where(sq > 0, jnp.sqrt(sq), 0.0)" in text
    assert "step 2: loss 0.0009  w [nan, nan]" in text
    fixed_line = STORY.line("jnp.sqrt(jnp.where(", "fixed")
    assert f"{fixed_line} │ length = jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)" in text
    assert "finite at every step; detect() found nothing" in text
    assert "step 3: loss 0.1428  w [1.1188, 0.8086]" in text
    assert "nanguard.jax.safe_where(x > 0, jnp.sqrt, x)" in text
    assert "the naive program, guarded: step 2: non-finite gradients in params (2 NaN of 2) -> skipped" in text
    assert "no report" not in text and "failed" not in text and "skipped: JAX" not in text


def test_double_where_gradient_is_the_true_derivative_away_from_zero():
    import jax
    x = jnp.array([0.0, 1.0, 4.0])
    g = jax.grad(lambda v: jnp.sum(jnp.where(v > 0, jnp.sqrt(jnp.where(v > 0, v, 1.0)), 0.0)))(x)
    assert g.tolist() == [0.0, 0.5, 0.25]


@pytest.mark.slow
def test_demo_command_runs_the_jax_section():
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "nanguard", "demo", "--section", "jax_stories"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"jax_sqrt_where_nan.py:{LINE}" in done.stdout and "All demo sections finished." in done.stdout
